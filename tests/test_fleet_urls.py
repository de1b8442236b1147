"""Tasks whose repository is a URL git clones: ``file://`` and git's smart HTTP (a real
``git http-backend`` on 127.0.0.1), and repo strings that try to be options or commands."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from fleet_kit import done, git, leftovers, make_repo, marked_processes, run, write_script
from git_http import git_http
from yggdrasil.loki.fleet import Fleet, Task


def fleet(tmp_path: Path, **options: object) -> Fleet:
    settings: dict[str, object] = {"backend": "local", "workers": 2, "out": tmp_path / "out",
                                   "cache_dir": tmp_path / "cache"}
    settings.update(options)
    return Fleet("scripted", model=str(tmp_path / "s" / "{id}.jsonl"), **settings)  # type: ignore[arg-type]


def two_commits(repo: Path) -> str:
    """A repository whose HEAD moved on from the commit the task pins (returned)."""
    first = make_repo(repo, {"greet.txt": "hi\n"})
    make_repo(repo, {"greet.txt": "hi there\n"}, "second")
    return first


def url_task(tmp_path: Path, task_id: str, url: str, commit: str) -> Task:
    # the edit only matches the pinned commit's text: the worktree must be at that commit
    write_script(tmp_path / "s", task_id,
                 {"tool": "edit_file", "args": {"path": "greet.txt", "old": "hi", "new": "hello"}},
                 run("printf 'new\\n' > added.txt"), done())
    return Task(id=task_id, repo=url, prompt="say hello", commit=commit,
                verify="grep -qx hello greet.txt && test -f added.txt")


def check_cloned(tmp_path: Path, result_patch: str, url: str, commit: str) -> None:
    """One bare mirror of ``url`` in the cache, holding the commit; the patch applies to a
    fresh clone at the commit and gives the agent's files."""
    [mirror] = (tmp_path / "cache" / "mirrors").glob("*.git")
    assert git(mirror, "config", "remote.origin.url").strip() == url
    assert git(mirror, "cat-file", "-t", commit).strip() == "commit"
    assert git(mirror, "worktree", "list", "--porcelain").count("worktree ") == 1  # its own
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "-q", url, str(fresh)], check=True)
    git(fresh, "checkout", "-q", commit)
    subprocess.run(["git", "apply", "-"], cwd=fresh, input=result_patch.encode(), check=True)
    assert (fresh / "greet.txt").read_text() == "hello\n"
    assert (fresh / "added.txt").read_text() == "new\n"


def test_a_file_url_is_cloned_into_a_mirror_and_worked_at_the_commit(tmp_path: Path) -> None:
    first = two_commits(tmp_path / "upstream")
    url = (tmp_path / "upstream").as_uri()
    assert url.startswith("file:///")
    [result] = fleet(tmp_path).run([url_task(tmp_path, "by-file-url", url, first)])
    assert result.status == "done", result.reason
    assert result.commit == first and result.verified is True
    assert sorted(result.files_changed) == ["added.txt", "greet.txt"]
    check_cloned(tmp_path, result.patch, url, first)
    assert leftovers(tmp_path / "cache") == []


def test_a_smart_http_url_is_cloned_without_a_prompt(tmp_path: Path) -> None:
    served = tmp_path / "served"
    first = two_commits(served / "greet")
    with git_http(served) as server:
        url = server.url("greet")
        tasks = [url_task(tmp_path, "by-http", url, first),
                 url_task(tmp_path, "by-http-again", url, first)]
        results = {r.id: r for r in fleet(tmp_path).run(tasks)}
        for result in results.values():
            assert result.status == "done", result.reason
            assert result.commit == first and result.verified is True
        assert any(r.startswith("POST /greet/git-upload-pack") for r in server.requests)
        check_cloned(tmp_path, results["by-http"].patch, url, first)
        assert results["by-http"].patch == results["by-http-again"].patch


@pytest.mark.parametrize("userinfo", ["bot:s3cret-token", "s3cret-token"])
def test_a_server_wanting_credentials_fails_fast_and_hides_the_token(tmp_path: Path,
                                                                     userinfo: str) -> None:
    with git_http(tmp_path) as server:
        url = server.url("private/repo").replace("http://", f"http://{userinfo}@")
        started = time.monotonic()
        [result] = fleet(tmp_path, attempts=1).run([Task(id="locked", repo=url, prompt="x")])
    assert time.monotonic() - started < 60  # never a prompt waiting for a password
    assert result.status == "failed" and "cannot clone http://***@127.0.0.1:" in result.reason
    assert "s3cret-token" not in (tmp_path / "out" / "results.jsonl").read_text()


def test_a_file_url_of_a_folder_that_is_no_repository_says_so(tmp_path: Path) -> None:
    escape = f"file://{tmp_path}/../../../../../../etc"  # climbs out to /etc
    results = {r.id: r for r in fleet(tmp_path, attempts=1).run(
        [Task(id="etc", repo="file:///etc", prompt="x"),
         Task(id="escape", repo=escape, prompt="x")])}
    for task_id, shown in (("etc", "file:///etc"), ("escape", escape)):
        assert results[task_id].status == "failed"
        assert f"cannot clone {shown}: " in results[task_id].reason
        assert "does not appear to be a git repository" in results[task_id].reason
    assert not list((tmp_path / "cache" / "mirrors").glob("*.git"))  # no half mirror


@pytest.mark.parametrize(("repo", "message"), [
    ("--upload-pack=touch /tmp/pwned", "starts with '-' (git would take it as an option)"),
    ("-oProxyCommand=touch@x:y", "starts with '-'"),
    ("ext::sh -c touch% /tmp/pwned", "names a git remote helper (ext::)"),
    ("fd::3", "names a git remote helper (fd::)"),
    ("ext::sh -c 'touch /tmp/pwned' ://x", "names a git remote helper (ext::)"),
    ("javascript://x", "scheme 'javascript' is not allowed; use file://"),
])
def test_repo_strings_that_are_options_or_commands_are_refused(repo: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Task(id="bad", repo=repo, prompt="x")


def test_an_ssh_url_smuggling_an_option_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    [result] = fleet(tmp_path, attempts=1).run(
        [Task(id="ssh", repo=f"ssh://-oProxyCommand=touch%20{marker}/repo", prompt="x")])
    assert result.status == "failed" and "cannot clone ssh://-oProxyCommand" in result.reason
    assert "strange hostname" in result.reason  # git's own refusal, passed on
    assert not marker.exists() and marked_processes() == []
