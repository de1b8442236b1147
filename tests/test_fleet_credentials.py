"""Credentials in a task's repo URL reach git's requests and nothing else: not the node's
mirror (whose config every working copy shows the agent), not results, transcripts or
reasons; and the task's own folder, named by a ``file://`` URL, is hidden from its commands.

The HTTP server is a real ``git http-backend`` that wants HTTP Basic auth on every request.
"""

from __future__ import annotations

import base64
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet_kit import done, git, make_repo, run, write_script
from git_http import git_http
from yggdrasil.loki.fleet import Fleet, Task
from yggdrasil.loki.fleet._urls import local_folder, remote, shown_repo

# What the agent runs to look for the token: the remote, every config git reads, and the
# mirror's own config file (the worktree's common dir)
LOOK = ('git remote -v; git config --list --show-origin; '
        'cat "$(git rev-parse --git-common-dir)/config"; echo looked')


def fleet(tmp_path: Path, cache: Path, **options: object) -> Fleet:
    settings: dict[str, object] = {"backend": "local", "workers": 1, "out": tmp_path / "out",
                                   "cache_dir": cache, "attempts": 1}
    settings.update(options)
    return Fleet("scripted", model=str(tmp_path / "s" / "{id}.jsonl"), **settings)  # type: ignore[arg-type]


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp: a command's /tmp is private, it would hide what is there
    anyway (a cache there, the usual ~/.cache, shows the agent the mirrors)."""
    folder = Path(tempfile.mkdtemp(prefix="loki-fleet-src-", dir="/var/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def secret_forms(user: str, password: str, userinfo: str) -> list[bytes]:
    """Every way the secret could be written down: as given, as in the URL, as git's
    Authorization header carries it."""
    pair = base64.b64encode(f"{user}:{password}".encode())
    forms = [userinfo.encode(), pair, (password or user).encode()]
    return [form for form in forms if form]


def files_holding(folder: Path, secrets: list[bytes]) -> list[str]:
    return sorted(str(path) for path in folder.rglob("*")
                  if path.is_file() and not path.is_symlink()
                  and any(secret in path.read_bytes() for secret in secrets))


@pytest.mark.parametrize(("user", "password", "userinfo"), [
    ("bot", "s3cr3t/t0k@n", "bot:s3cr3t%2Ft0k%40n"),  # escapes git decodes, a raw '@'
    ("ghp_Z9onlyTokenZ9", "", "ghp_Z9onlyTokenZ9"),   # a token alone, as GitHub takes it
])
def test_a_token_in_the_url_clones_but_is_written_nowhere(tmp_path: Path, outside_tmp: Path,
                                                          user: str, password: str,
                                                          userinfo: str) -> None:
    cache = outside_tmp / "cache"
    served = tmp_path / "served"
    commit = make_repo(served / "greet", {"greet.txt": "hi\n"})
    write_script(tmp_path / "s", "private", run(LOOK), done())
    with git_http(served, auth=(user, password)) as server:
        url = server.url("greet").replace("http://", f"http://{userinfo}@")
        [result] = fleet(tmp_path, cache).run([Task(id="private", repo=url, prompt="look",
                                             verify="git remote -v")])
        assert result.status == "done", result.reason
        assert result.commit == commit and result.verified is True
        clean, refused = server.url("greet"), server.refused
    transcript = (tmp_path / "out" / "private" / "transcript.jsonl").read_text()
    assert f"{clean} (fetch)" in transcript and "looked" in transcript  # the agent looked
    [mirror] = (cache / "mirrors").glob("*.git")
    assert git(mirror, "config", "remote.origin.url").strip() == clean
    secrets = secret_forms(user, password, userinfo)
    assert files_holding(cache, secrets) == []
    assert files_holding(tmp_path / "out", secrets) == []
    assert not any(secret.decode() in result.verify_output for secret in secrets)
    assert refused == []  # the credentials went with every request, no 401 round first


def test_a_reused_mirror_fetches_with_the_token_and_forgets_one_stored_before(
        tmp_path: Path, outside_tmp: Path) -> None:
    cache = outside_tmp / "cache"
    served = tmp_path / "served"
    first = make_repo(served / "greet", {"greet.txt": "hi\n"})
    for task_id in ("one", "two"):
        write_script(tmp_path / "s", task_id, done())
    with git_http(served, auth=("bot", "s3cr3t-tok")) as server:
        url = server.url("greet").replace("http://", "http://bot:s3cr3t-tok@")
        [one] = fleet(tmp_path, cache).run([Task(id="one", repo=url, prompt="x", commit=first)])
        assert one.status == "done", one.reason
        [mirror] = (cache / "mirrors").glob("*.git")
        git(mirror, "config", "remote.origin.url", url)  # as an older version stored it
        second = make_repo(served / "greet", {"greet.txt": "hi there\n"}, "second")
        asked = len(server.requests)
        [two] = fleet(tmp_path, cache).run([Task(id="two", repo=url, prompt="x", commit=second)])
        assert two.status == "done", two.reason
        assert two.commit == second  # fetched into the same mirror
        assert any("git-upload-pack" in line for line in server.requests[asked:])
        clean, refused = server.url("greet"), server.refused
    assert [mirror] == list((cache / "mirrors").glob("*.git"))
    assert git(mirror, "config", "remote.origin.url").strip() == clean
    assert files_holding(cache, secret_forms("bot", "s3cr3t-tok", "")) == []
    assert refused == []


@pytest.mark.parametrize(("repo", "shown"), [
    ("https://ghp_abc123@github.com/o/r.git", "https://***@github.com/o/r.git"),
    ("https://user:pw@github.com/o/r.git", "https://***@github.com/o/r.git"),
    ("https://x-access-token:p@ss@host:8443/r.git?a=b@c", "https://***@host:8443/r.git?a=b@c"),
    ("ssh://git@host/r.git", "ssh://***@host/r.git"),
    ("git@github.com:o/r.git", "git@github.com:o/r.git"),   # a login, no secret
    ("https://host/r@v1.git", "https://host/r@v1.git"),     # an '@' in the path
    ("/srv/repos/a@b", "/srv/repos/a@b"),
    ("name::https://tok@host/r", "name::https://***@host/r"),  # refused, still masked
])
def test_shown_repo_hides_all_userinfo_of_urls(repo: str, shown: str) -> None:
    assert shown_repo(repo) == shown


@pytest.mark.parametrize(("repo", "url", "header"), [
    ("https://u:p%40ss@host/r.git", "https://host/r.git", "u:p@ss"),
    ("HTTP://tok@host:81/r", "HTTP://host:81/r", "tok:"),
    ("ssh://git:pw@host/r.git", "ssh://git@host/r.git", None),  # ssh: the login stays
    ("git@host:o/r.git", "git@host:o/r.git", None),
    ("file://me@/srv/r", "file:///srv/r", None),
    ("https://host/r.git", "https://host/r.git", None),
])
def test_remote_keeps_credentials_out_of_the_url(repo: str, url: str, header: str | None) -> None:
    origin = remote(repo)
    assert origin.url == url
    if header is None:
        assert origin.env == {}
    else:
        value = origin.env["GIT_CONFIG_VALUE_0"].removeprefix("Authorization: Basic ")
        assert origin.env["GIT_CONFIG_KEY_0"] == "http.extraHeader"
        assert base64.b64decode(value).decode() == header


@pytest.mark.parametrize("form", ["file-url", "escaped-file-url", "dot-git", "path"])
def test_the_tasks_own_folder_is_hidden_from_its_commands(tmp_path: Path, outside_tmp: Path,
                                                          form: str) -> None:
    source, cache = outside_tmp / "up stream", outside_tmp / "cache"
    make_repo(source, {"greet.txt": "hi\n"})
    (source / ".env").write_text("API_KEY=sk-never-seen-42\n")  # untracked, beside the repo
    repo = {"file-url": f"file://{source}", "escaped-file-url": source.as_uri(),
            "dot-git": (source / ".git").as_uri(), "path": str(source)}[form]
    write_script(tmp_path / "s", "peek", run(f"cat '{source}/.env'; echo peeked"), done())
    [result] = fleet(tmp_path, cache).run([Task(id="peek", repo=repo, prompt="x",
                                         verify=f"cat '{source}/.env'")])
    assert result.status == "done", result.reason
    transcript = (tmp_path / "out" / "peek" / "transcript.jsonl").read_text()
    assert "peeked" in transcript and "sk-never-seen-42" not in transcript
    assert result.verified is False and "sk-never-seen-42" not in result.verify_output
    assert local_folder(repo) == str(source)
