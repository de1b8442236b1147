"""Fleets on the local backend (a process pool, no Ray): batches, faults, the rate gate.

Real git repositories in tmp dirs, real worker processes, the scripted engine replaying
one script per task, and for the gate a real HTTP server on 127.0.0.1 in the OpenAI wire
format. The same batch runs on a Ray cluster in test_fleet_ray.py.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fleet_kit import (
    attempt_pids,
    chat_server,
    chat_tasks,
    check_batch,
    check_outputs,
    done,
    leftovers,
    make_batch,
    make_repo,
    marked_processes,
    marked_running,
    run,
    wait_for,
    write_script,
)
from yggdrasil.loki.fleet import Fleet, Task, TaskResult
from yggdrasil.loki.fleet._gate import GateCore


def fleet(tmp_path: Path, model: str, **options: object) -> Fleet:
    settings: dict[str, object] = {"backend": "local", "workers": 2, "out": tmp_path / "out",
                                   "cache_dir": tmp_path / "cache"}
    settings.update(options)
    return Fleet("scripted", model=model, **settings)  # type: ignore[arg-type]


def test_importing_the_fleet_does_not_import_ray() -> None:
    code = ("import sys, yggdrasil.loki.fleet; "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    shown = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True)
    assert shown.stdout.strip() == "[]"


# --- a batch ---------------------------------------------------------------------------

def test_a_batch_gives_correct_patches_verify_results_and_outputs(tmp_path: Path) -> None:
    batch = make_batch(tmp_path / "src")
    ran = fleet(tmp_path, batch.model)
    results = list(ran.run(batch.tasks))
    check_batch(batch, results, tmp_path / "check")
    check_outputs(tmp_path / "out", results)
    assert leftovers(tmp_path / "cache") == []  # every working copy removed
    assert len(list((tmp_path / "cache" / "mirrors").glob("*.git"))) == 2  # one per repository
    assert ran.status.done == 5 and ran.status.verified == 4 and ran.status.graded == 5


def test_running_again_skips_what_is_done(tmp_path: Path) -> None:
    batch = make_batch(tmp_path / "src")
    first = list(fleet(tmp_path, batch.model).run(batch.tasks[:2]))
    before = (tmp_path / "out" / "results.jsonl").read_text()
    again = fleet(tmp_path, batch.model)
    second = list(again.run(batch.tasks))
    assert sorted(r.id for r in second) == sorted(t.id for t in batch.tasks[2:])
    assert again.status.skipped == 2
    after = (tmp_path / "out" / "results.jsonl").read_text()
    assert after.startswith(before)  # the earlier lines untouched
    check_outputs(tmp_path / "out", first + second)


def test_verify_sees_only_the_patch_not_what_else_the_agent_left(tmp_path: Path) -> None:
    """An ignored file that makes the check pass in the agent's own copy is not in the
    patch, so the fresh copy verify runs in does not have it."""
    repo = tmp_path / "repo"
    make_repo(repo, {"check.sh": "test -f pass.local\n", ".gitignore": "*.local\n"})
    write_script(tmp_path / "s", "cheat",
                 {"tool": "write_file", "args": {"path": "pass.local", "content": "ok\n"}},
                 run("sh check.sh"), done())
    task = Task(id="cheat", repo=str(repo), prompt="make check.sh pass", verify="sh check.sh")
    [result] = fleet(tmp_path, str(tmp_path / "s" / "{id}.jsonl")).run([task])
    assert result.status == "done" and result.patch == "" and result.files_changed == []
    assert result.verified is False and result.verify_exit == 1


def test_verify_and_the_next_attempt_see_the_commit_whatever_the_agent_left(
        tmp_path: Path) -> None:
    """verify runs in the agent's copy put back to the commit, and the worker's next
    attempt reuses that copy: neither sees anything of the agent's but its patch (ignored
    files, a nested repository, a .gitattributes that would convert files on checkout, a
    .git of its own), and the next one is at its own commit."""
    repo = tmp_path / "repo"
    first = make_repo(repo, {"a.txt": "one\n", ".gitignore": "*.local\n.gitattributes\nn/\n"})
    make_repo(repo, {"a.txt": "two\n"}, "second")
    mess = ("echo cheat > pass.local; printf '* text eol=crlf\\n' > .gitattributes; "
            "git init -q n; echo changed > a.txt; (rm -f .git && echo 'gitdir: /x' > .git); "
            "true")
    clean = ("test ! -e pass.local && test ! -e .gitattributes && test ! -e n && "
             "grep -q gitdir: .git && test \"$(ls -A)\" = \"$(printf '{files}')\" && "
             "printf '{text}' | cmp - a.txt")
    write_script(tmp_path / "s", "mess", run(mess), done())
    write_script(tmp_path / "s", "older", done())
    tasks = [Task(id="mess", repo=str(repo), prompt="x",
                  verify=clean.format(files=".git\\n.gitignore\\na.txt", text="changed\\n")),
             Task(id="older", repo=str(repo), prompt="x", commit=first,
                  verify=clean.format(files=".git\\n.gitignore\\na.txt", text="one\\n"))]
    results = list(fleet(tmp_path, str(tmp_path / "s" / "{id}.jsonl"), workers=1).run(tasks))
    assert [r.verified for r in results] == [True, True], [r.verify_output for r in results]
    assert results[0].files_changed == ["a.txt"] and results[1].patch == ""
    assert leftovers(tmp_path / "cache") == []


def test_verify_is_fenced(tmp_path: Path) -> None:
    """verify runs code the model wrote: it cannot write outside its fresh copy."""
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    write_script(tmp_path / "s", "escape",
                 {"tool": "write_file", "args": {"path": "evil.sh",
                                                 "content": f"touch {outside}/pwned\n"}}, done())
    task = Task(id="escape", repo=str(repo), prompt="x", verify="sh evil.sh")
    [result] = fleet(tmp_path, str(tmp_path / "s" / "{id}.jsonl")).run([task])
    # Refused by Landlock, or not even visible from the command's private /tmp
    assert result.verified is False and not (outside / "pwned").exists()
    assert any(why in result.verify_output
               for why in ("Permission denied", "No such file or directory"))


def test_setup_runs_first_in_both_copies_and_its_failure_is_the_reason(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n", ".gitignore": "built\n"})
    scripts = tmp_path / "s"
    write_script(scripts, "built", run("cat built"), done())
    write_script(scripts, "broken", done())
    tasks = [Task(id="built", repo=str(repo), prompt="x", setup="echo made > built",
                  verify="grep -q made built"),
             Task(id="broken", repo=str(repo), prompt="x", setup="echo nope >&2; exit 3")]
    results = {r.id: r for r in fleet(tmp_path, str(scripts / "{id}.jsonl")).run(tasks)}
    assert results["built"].status == "done" and results["built"].verified is True
    assert results["built"].patch == ""  # what setup made is not the agent's change
    broken = results["broken"]
    assert broken.status == "failed" and len(broken.attempts) == 1  # an exit code: not retried
    assert "setup failed (exit 3)" in broken.reason and "nope" in broken.reason
    assert broken.reason.count("exit 3") == 1 and "stdout:" not in broken.reason
    # its real time, not 0.0 s; its steps unknown (None, a dash in the report), not 0
    ran = broken.attempts[0]["ended_at"] - broken.attempts[0]["started_at"]
    assert broken.seconds == pytest.approx(ran, abs=0.01) and broken.seconds > 0
    assert broken.steps is None
    line = json.loads(next(x for x in (tmp_path / "out" / "results.jsonl").read_text()
                           .splitlines() if '"broken"' in x))
    assert line["steps"] is None and line["seconds"] == broken.seconds


# --- faults ------------------------------------------------------------------------------

def test_a_task_that_raises_is_retried_once_then_failed_and_others_go_on(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    scripts = tmp_path / "s"
    write_script(scripts, "short", run("true"))  # the script runs out: the engine raises
    write_script(scripts, "fine", done())
    tasks = [Task(id="short", repo=str(repo), prompt="x"), Task(id="fine", repo=str(repo), prompt="x")]
    results = {r.id: r for r in fleet(tmp_path, str(scripts / "{id}.jsonl")).run(tasks)}
    assert results["fine"].status == "done"
    short = results["short"]
    assert short.status == "failed" and len(short.attempts) == 2
    assert short.reason.count("no reply left") == 2 and "attempt 1:" in short.reason
    assert (tmp_path / "out" / "short" / "transcript.jsonl").exists()  # the last attempt's


def test_a_task_past_its_timeout_is_killed_retried_then_failed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    write_script(tmp_path / "s", "hang", run("sleep 60"), done())
    task = Task(id="hang", repo=str(repo), prompt="x", timeout=1.5)
    started = time.monotonic()
    [result] = fleet(tmp_path, str(tmp_path / "s" / "{id}.jsonl")).run([task])
    assert time.monotonic() - started < 30
    assert result.status == "failed" and len(result.attempts) == 2
    assert result.reason.count("timed out after 1.5s") == 2
    assert leftovers(tmp_path / "cache") == []
    assert marked_processes() == []  # the `sleep 60` of each killed attempt is gone too


def kill_attempts(cache: Path, task_id: str, times: int) -> threading.Thread:
    """A watcher that SIGKILLs the worker of ``task_id``'s attempts, ``times`` times."""
    def watch() -> None:
        killed: set[int] = set()
        deadline = time.monotonic() + 60
        while len(killed) < times and time.monotonic() < deadline:
            for pid in attempt_pids(cache, task_id):
                if pid not in killed:
                    # mid-task: once its command runs (the task's only `sleep`)
                    wait_for(lambda: marked_running("sleep"), timeout=60, every=0.01)
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
            time.sleep(0.02)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("kills", [1, 2])
def test_a_worker_killed_mid_task(tmp_path: Path, kills: int) -> None:
    """Killed once: the retry finishes it. Killed twice: failed, with the reason. Either
    way the other tasks finish, and nothing is lost or recorded twice."""
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    scripts = tmp_path / "s"
    write_script(scripts, "slow", run("sleep 2; echo late > slow.txt"), done())
    for name in ("quick-1", "quick-2", "quick-3"):
        write_script(scripts, name, run(f"echo {name} > {name}.txt"), done())
    tasks = [Task(id=name, repo=str(repo), prompt="x")
             for name in ("slow", "quick-1", "quick-2", "quick-3")]
    watcher = kill_attempts(tmp_path / "cache", "slow", kills)
    results = {r.id: r for r in fleet(tmp_path, str(scripts / "{id}.jsonl")).run(tasks)}
    watcher.join()
    assert sorted(results) == ["quick-1", "quick-2", "quick-3", "slow"]
    assert all(results[f"quick-{i}"].status == "done" for i in (1, 2, 3))
    slow = results["slow"]
    assert len(slow.attempts) == 2 and "the worker process died (killed by SIGKILL)" in slow.reason
    if kills == 1:
        assert slow.status == "done" and slow.files_changed == ["slow.txt"]
    else:
        assert slow.status == "failed" and slow.reason.count("killed by SIGKILL") == 2
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == sorted(results)
    assert leftovers(tmp_path / "cache") == [] and marked_processes() == []


def test_a_missing_commit_fails_at_once(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    task = Task(id="ghost", repo=str(repo), prompt="x", commit="0123456789abcdef")
    [result] = fleet(tmp_path, "unused").run([task])
    assert result.status == "failed" and len(result.attempts) == 1  # retrying cannot help
    assert "commit '0123456789abcdef' is not in" in result.reason


def test_a_patch_over_the_cap_fails_without_flooding_memory(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    write_script(tmp_path / "s", "huge", run("head -c 200000 /dev/urandom > big.bin"), done())
    task = Task(id="huge", repo=str(repo), prompt="x")
    [result] = fleet(tmp_path, str(tmp_path / "s" / "{id}.jsonl"),
                     max_patch_bytes=10_000).run([task])
    assert result.status == "failed" and len(result.attempts) == 1
    assert "over the 10,000-byte cap" in result.reason and result.patch == ""


# --- attacks from the model and the repository ----------------------------------------------

def test_the_agent_overwriting_the_worktree_git_file_changes_nothing_else(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    scripts = tmp_path / "s"
    write_script(scripts, "vandal", run("echo 'gitdir: /etc' > .git; echo b > a.txt"), done())
    write_script(scripts, "after", run("echo c > a.txt"), done())
    model = str(scripts / "{id}.jsonl")
    [vandal] = fleet(tmp_path, model, workers=1).run([Task(id="vandal", repo=str(repo), prompt="x")])
    assert vandal.status == "done" and vandal.files_changed == ["a.txt"]  # .git is never patched
    [after] = fleet(tmp_path, model, workers=1).run([Task(id="after", repo=str(repo), prompt="x")])
    assert after.status == "done" and "+c" in after.patch  # the mirror still serves
    assert leftovers(tmp_path / "cache") == []


def test_a_plain_folder_with_a_fifo_is_copied_without_it(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    os.mkfifo(folder / "pipe")  # opening it to copy would block forever
    (folder / "link").symlink_to("/etc/passwd")
    write_script(tmp_path / "s", "fifo", run("ls -l; echo b > a.txt"), done())
    [result] = fleet(tmp_path, str(tmp_path / "s" / "{id}.jsonl")).run(
        [Task(id="fifo", repo=str(folder), prompt="x", timeout=60)])
    assert result.status == "done" and result.files_changed == ["a.txt"]


def test_a_repo_string_is_never_run_as_a_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(ValueError, match=r"names a git remote helper \(ext::\)"):
        Task(id="ext", repo=f"ext::sh -c touch% {marker}", prompt="x")
    assert not marker.exists()


@pytest.mark.parametrize(("fields", "message"), [
    ({"id": "../up", "repo": "r", "prompt": "p"}, "is not allowed"),
    ({"id": "a/b", "repo": "r", "prompt": "p"}, "is not allowed"),
    ({"id": "ok", "repo": "r", "prompt": "p", "commit": "--upload-pack=touch x"}, "is not a commit"),
    ({"id": "ok", "repo": "r", "prompt": ""}, "'prompt' must be a non-empty string"),
    ({"id": "ok", "repo": "r", "prompt": "p", "max_steps": 0}, "max_steps must be"),
    ({"id": "ok", "repo": "r", "prompt": "p", "timeout": -1}, "timeout is in seconds"),
    ({"id": "ok", "repo": "r", "prompt": "p", "verify": 3}, "must be a shell command"),
])
def test_bad_tasks_are_refused_saying_what_is_allowed(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Task.from_dict(fields)


def test_tasks_from_jsonl(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text(
        '# a comment\n\n{"id": "a", "repo": "repos/x", "prompt": "p", "max_steps": 5}\n'
        '{"id": "b", "repo": "https://example.com/x.git", "prompt": "p"}\n')
    a, b = Task.from_jsonl(tmp_path / "tasks.jsonl")
    assert a.repo == str(tmp_path / "repos" / "x") and a.max_steps == 5  # from the file's folder
    assert b.repo == "https://example.com/x.git"
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "repo": "r", "prompt": "p"}\n{"id": "a", '
                                        '"repo": "r", "prompt": "p", "colour": 1}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: unknown task field\(s\) colour; allowed: id"):
        Task.from_jsonl(tmp_path / "bad.jsonl")
    (tmp_path / "dup.jsonl").write_text('{"id": "a", "repo": "r", "prompt": "p"}\n' * 2)
    with pytest.raises(ValueError, match="repeated: a"):
        Task.from_jsonl(tmp_path / "dup.jsonl")
    (tmp_path / "junk.jsonl").write_text("[1, 2]\n")
    with pytest.raises(ValueError, match=r"junk\.jsonl:1: a task must be a JSON object"):
        Task.from_jsonl(tmp_path / "junk.jsonl")


def test_fleet_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="backend must be one of local, ray"):
        Fleet("scripted", backend="dask")
    with pytest.raises(ValueError, match="a fleet needs an engine"):
        Fleet()
    with pytest.raises(ValueError, match="workers must be"):
        Fleet("scripted", workers=0)


def test_one_fleet_at_a_time_per_output_folder(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    write_script(tmp_path / "s", "t1", done())
    write_script(tmp_path / "s", "t2", done())
    model = str(tmp_path / "s" / "{id}.jsonl")
    first = fleet(tmp_path, model).run([Task(id="t1", repo=str(repo), prompt="x"),
                                        Task(id="t2", repo=str(repo), prompt="x")])
    next(first)  # suspended mid-run: it holds the output folder
    try:
        with pytest.raises(RuntimeError, match="another fleet is writing"):
            list(fleet(tmp_path, model).run([Task(id="t3", repo=str(repo), prompt="x")]))
    finally:
        first.close()  # stops it: the running attempt is killed, preds.json written
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads((tmp_path / "out" / "preds.json").read_text())


def test_a_torn_last_line_is_cut_off_and_that_task_runs_again(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    write_script(tmp_path / "s", "t1", done())
    write_script(tmp_path / "s", "t2", done())
    tasks = [Task(id="t1", repo=str(repo), prompt="x"), Task(id="t2", repo=str(repo), prompt="x")]
    out = tmp_path / "out"
    out.mkdir()
    whole = TaskResult(id="t1", status="done").to_json() + "\n"
    (out / "results.jsonl").write_text(whole + '{"id": "t2", "status": "do')
    results = list(fleet(tmp_path, str(tmp_path / "s" / "{id}.jsonl")).run(tasks))
    assert [r.id for r in results] == ["t2"]
    lines = (out / "results.jsonl").read_text().splitlines()
    assert lines[0] == whole.strip() and [json.loads(x)["id"] for x in lines] == ["t1", "t2"]


# --- the rate gate -------------------------------------------------------------------------

def openai_fleet(tmp_path: Path, url: str, **options: object) -> Fleet:
    settings: dict[str, object] = {"backend": "local", "out": tmp_path / "out",
                                   "cache_dir": tmp_path / "cache"}
    settings.update(options)
    return Fleet("openai", model="gpt-fake", base_url=url, api_key="sk-test",
                 **settings)  # type: ignore[arg-type]


def test_the_gate_keeps_the_fleet_within_the_endpoint_limit(tmp_path: Path) -> None:
    """The endpoint takes two requests at a time and answers 429 to a burst beyond that:
    four workers behind a gate of two never make it answer 429."""
    pytest.importorskip("openai")
    with chat_server(delay=0.3, capacity=2) as server:
        ran = openai_fleet(tmp_path, server.url, workers=4, max_in_flight=2)
        results = list(ran.run(chat_tasks(tmp_path, 6)))
    assert [r.status for r in results] == ["done"] * 6
    assert all(r.files_changed == ["out.txt"] for r in results)
    assert server.limited == [] and server.max_in_flight == 2
    assert len(server.arrivals) == 12 and ran.status.requests == 12
    assert ran.status.input_tokens == 120  # the gate sums what every worker spent


def test_a_429_holds_back_only_the_request_it_hit(tmp_path: Path) -> None:
    """One worker's 429 (Retry-After: 3) makes that request wait its 3 s; the other
    workers' requests go on meanwhile (the fleet is not paused). (3 s, not 1: on a busy
    machine the other workers' requests took longer than 1 s to come.)"""
    pytest.importorskip("openai")
    with chat_server(delay=0.05, first_429=True, retry_after=3.0) as server:
        ran = openai_fleet(tmp_path, server.url, workers=3, max_in_flight=3)
        results = list(ran.run(chat_tasks(tmp_path, 3)))
    assert [r.status for r in results] == ["done"] * 3
    [limited] = server.limited
    assert len([t for t in server.arrivals if limited < t < limited + 2.9]) >= 2  # others went on
    assert len(server.arrivals) == 7 and ran.status.rate_limited == 1
    assert max(t - limited for t in server.arrivals) >= 3.0  # its retry waited its 3 s


def test_the_gate_hands_a_slot_to_one_waiter_and_forgets_the_dead() -> None:
    """A worker killed while holding a gate slot, or while waiting for one, leaks nothing:
    the driver forgets it, which frees the slot and turns its pending acquire away; a
    freed slot goes to the longest waiting request, one at a time."""
    from yggdrasil.loki.fleet._gate import Gate

    gate = Gate(1)
    assert gate.acquire("dead#1")
    answers: list[tuple[str, bool]] = []
    waiting = []
    for holder in ("dead#1", "first#1", "second#1"):
        thread = threading.Thread(target=lambda h=holder: answers.append((h, gate.acquire(h))),
                                  daemon=True)
        thread.start()
        waiting.append(thread)
        wait_for(lambda: gate.stats()["waiting"] == len(waiting))
    assert answers == []  # all wait: the one slot is held
    gate.forget("dead#1")
    wait_for(lambda: len(answers) == 2)
    assert sorted(answers) == [("dead#1", False), ("first#1", True)]  # second waits its turn
    stats = gate.stats()
    assert stats["in_flight"] == 1 and stats["waiting"] == 1
    gate.release("first#1", {"input_tokens": 7})
    for thread in waiting:
        thread.join(5)
    assert answers[-1] == ("second#1", True) and gate.stats()["input_tokens"] == 7


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def gate_core(limit: int) -> GateCore:
    return GateCore(limit, clock=Clock())


def answer(core: GateCore, holder: str, limited: bool, retry_after: float = 1.0) -> None:
    """One request of ``holder`` through the gate (once any pause is over), answered (429
    when ``limited``)."""
    core.clock.now += core.pause_left()  # type: ignore[attr-defined]
    assert core.enter(holder, None) is True
    core.release(holder, limited=limited, retry_after=retry_after)


def test_the_gate_window_halves_once_per_round_trip_when_most_are_refused() -> None:
    """Most of a sample of 20 answers refused: the window halves. The answers to requests
    already in flight when it was cut do not count towards the next cut; it never goes
    below one request."""
    core = gate_core(8)
    for i in range(19):
        answer(core, f"a{i}", limited=i % 4 != 0)  # 14 of 19 refused: no decision yet
    assert core.stats()["window"] == 8
    for i in range(3):
        assert core.enter(f"old{i}", None) is True  # in flight across the cut
    answer(core, "a19", limited=True)
    assert core.stats()["window"] == 4 and core.stats()["window_cuts"] == 1
    for i in range(3):
        core.release(f"old{i}", limited=True)
    for i in range(19):
        answer(core, f"b{i}", limited=True)
    assert core.stats()["window_cuts"] == 1  # the three old ones did not count: 19 of 20
    answer(core, "b19", limited=True)
    assert core.stats()["window"] == 2 and core.stats()["window_cuts"] == 2
    for i in range(100):
        answer(core, f"c{i}", limited=True)
    assert core.stats()["window"] == 1 and core.stats()["window_cuts"] == 7


def test_the_gate_window_grows_back_by_one_per_window_of_answers() -> None:
    core = gate_core(8)
    for i in range(60):
        answer(core, f"a{i}", limited=True)
    assert core.stats()["window"] == 1
    windows = []
    for i in range(40):
        answer(core, f"b{i}", limited=False)
        windows.append(core.stats()["window"])
    assert windows[:4] == [2, 2, 2, 3]  # 1 -> 2 -> 2.5 -> 2.9 -> 3.24
    assert windows == sorted(windows) and windows[-1] == 8 and 8 not in windows[:20]


def test_a_random_share_of_429s_leaves_the_window_where_it_is() -> None:
    """30% of answers 429 at random (other tenants' load, not ours): at most a rare cut,
    soon grown back; the fleet keeps (nearly) all its slots. Halving after any round of
    four answers mostly refused (157 cuts) kept it at 3.5 of 4 on average."""
    rng = random.Random(7)
    core = gate_core(4)
    windows = []
    for i in range(4000):
        answer(core, f"t{i}", limited=rng.random() < 0.3)
        windows.append(core.stats()["window"])
    assert core.stats()["rate_limited"] > 1000
    assert sum(windows) / len(windows) > 3.95 and core.stats()["window_cuts"] <= 4


def test_the_gate_pauses_when_the_endpoint_refuses_everything() -> None:
    """A whole sample refused (a quota spent, an outage): no admission until the longest
    Retry-After among them has passed, then a window's worth. One answer that is not a 429
    in the sample: a cut, no pause."""
    core = gate_core(4)
    for i in range(19):
        answer(core, f"a{i}", limited=i != 7)
    answer(core, "a19", limited=True)
    assert core.stats()["window_cuts"] == 1 and core.pause_left() == 0
    for i in range(20):
        answer(core, f"b{i}", limited=True, retry_after=5.0 if i == 3 else 2.0)
    assert core.stats()["pauses"] == 1 and core.pause_left() == 5.0
    assert core.enter("new", "t1") is None and core.enter("new2", "t2") is None  # slots free
    core.clock.now += 4.9  # type: ignore[attr-defined]
    assert core.resume() == [] and core.enter("b3", "t3") is None  # a retry: first in line
    core.clock.now += 0.1  # type: ignore[attr-defined]
    assert core.resume() == [("t3", True)]  # the window is 1 now: one at a time
    assert core.stats()["window"] == 1 and core.stats()["waiting"] == 2


def test_a_paused_gate_resumes_by_itself() -> None:
    """The thread gate's timer admits the waiting when the pause ends (nobody calls)."""
    from yggdrasil.loki.fleet._gate import Gate

    gate = Gate(2)
    for i in range(20):
        assert gate.acquire(f"a{i}")
        gate.release(f"a{i}", limited=True, retry_after=0.5)
    started = time.monotonic()
    assert gate.acquire("next")
    assert 0.4 < time.monotonic() - started < 5 and gate.stats()["pauses"] == 1


def test_an_endpoint_that_refuses_everything_pauses_the_gate_within_the_policy() -> None:
    """Over HTTP: an endpoint answering every request 429 with ``Retry-After: inf`` pauses
    the gate after a sample, for the policy's longest wait (max_delay), not forever."""
    pytest.importorskip("openai")
    from yggdrasil.loki.engine import RetryPolicy, create_engine
    from yggdrasil.loki.errors import EngineRateLimited
    from yggdrasil.loki.fleet._gate import Gate, GatedEngine

    gate = Gate(2)
    policy = RetryPolicy(attempts=1, max_delay=2.0)
    with chat_server(capacity=0, retry_after=float("inf")) as server:
        for i in range(20):
            inner = create_engine("openai", model="m", base_url=server.url, api_key="sk-test",
                                  retry=RetryPolicy(attempts=1))
            with pytest.raises(EngineRateLimited):
                GatedEngine(inner, gate, f"t{i}", policy).complete(
                    [{"role": "user", "content": "hi"}], system="s")
    assert len(server.limited) == 20 and gate.stats()["pauses"] == 1
    assert 1.0 < gate.core.pause_left() <= 2.0


def test_a_429_frees_its_slot_at_once_and_its_retry_goes_first() -> None:
    """A 429 hands its slot to the next waiter at once (nobody is paused); when the 429'd
    request asks again, after its Retry-After, it goes ahead of those that have not been
    answered yet."""
    core = gate_core(2)
    assert core.enter("a", "ta") is True and core.enter("b", "tb") is True
    assert core.enter("c", "tc") is None
    assert core.release("a", limited=True) == [("tc", True)]
    assert core.enter("d", "td") is None
    assert core.enter("a", "ta2") is None  # the retry, back after its wait: in line, first
    assert core.release("b") == [("ta2", True)]
    assert core.release("c") == [("td", True)]
    assert core.stats()["window"] == 2 and core.stats()["rate_limited"] == 1


def test_a_zombie_owner_counts_as_dead(tmp_path: Path) -> None:
    """A killed attempt may stay a zombie (no one reaps it in some containers): its
    folder must still be swept."""
    from yggdrasil.loki.fleet._scratch import Workspace
    from yggdrasil.loki.sandbox import running_since

    space = Workspace(tmp_path / "cache")
    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        folder = space.work / "task.abc123"
        folder.mkdir()
        stat = Path(f"/proc/{child}/stat").read_bytes()
        start = stat[stat.rfind(b")") + 2 :].split()[19].decode()
        wait_for(lambda: Path(f"/proc/{child}/stat").read_bytes().split(b") ")[1][:1] == b"Z")
        assert running_since(child) == ""
        (folder / "owner").write_text(json.dumps({"pid": child, "start": start,
                                                  "marker": "0" * 16,
                                                  "host": os.uname().nodename}))
        assert space.sweep() == 1 and not folder.exists()
    finally:
        os.waitpid(child, 0)


def test_many_attempts_share_one_mirror_at_once(tmp_path: Path) -> None:
    """git does not guard its worktree list against concurrent writers: unlocked, one
    `worktree add` read another's half-written record and failed (a retry then hid it)."""
    repo = tmp_path / "repo"
    make_repo(repo, {f"f{i}.txt": f"{i}\n" for i in range(50)})
    scripts = tmp_path / "s"
    tasks = []
    for i in range(8):
        write_script(scripts, f"t{i}", run(f"echo {i} > f{i}.txt"), done())
        tasks.append(Task(id=f"t{i}", repo=str(repo), prompt="x", verify=f"grep -qx {i} f{i}.txt"))
    results = list(fleet(tmp_path, str(scripts / "{id}.jsonl"), workers=4).run(tasks))
    assert [(r.status, len(r.attempts), r.reason) for r in results] == [("done", 1, "")] * 8
    assert all(r.verified for r in results)
    assert leftovers(tmp_path / "cache") == []
    mirror = next((tmp_path / "cache" / "mirrors").glob("*.git"))
    assert not (mirror / "worktrees").exists() or list((mirror / "worktrees").iterdir()) == []


def test_the_gated_engine_keeps_the_schema_flavor_its_api_wants() -> None:
    """A fleet run must send the same tool schemas as a single run (strict for OpenAI)."""
    from yggdrasil.loki.engines.openai import OpenAIEngine
    from yggdrasil.loki.fleet._gate import GatedEngine

    for flavor in ("openai-strict", "neutral"):
        inner = OpenAIEngine("m", base_url="http://127.0.0.1:9/v1", schema_flavor=flavor)
        assert GatedEngine(inner, gate=None, holder="t").schema_flavor == flavor  # type: ignore[arg-type]


def test_key_fixtures_are_protected_from_the_agent_unless_asked_but_verify_sees_them(
        tmp_path: Path) -> None:
    """Repositories ship key and certificate test fixtures (tests/certs/server.pem): the
    default protects them from the agent; protect=() lets it read them; verify, the task
    author's command, always sees every file."""
    repo = tmp_path / "repo"
    make_repo(repo, {"tests/certs/server.pem": "-----BEGIN CERT-----\n"})
    write_script(tmp_path / "s", "pem", run("cat tests/certs/server.pem"), done())
    task = Task(id="pem", repo=str(repo), prompt="x", verify="grep -q BEGIN tests/certs/server.pem")
    for protect, out in ((None, "out-default"), ((), "out-open")):
        [result] = fleet(tmp_path, str(tmp_path / "s" / "{id}.jsonl"), out=tmp_path / out,
                         protect=protect).run([task])
        lines = (tmp_path / out / "pem" / "transcript.jsonl").read_text().splitlines()
        [seen] = [json.loads(x)["observation"] for x in lines if '"type": "step"' in x]
        assert ("BEGIN CERT" in seen) is (protect == ()), seen
        assert result.verified is True, result.verify_output


# --- checkpoints -------------------------------------------------------------------------

def test_an_attempt_starts_from_another_attempts_checkpoint(tmp_path: Path) -> None:
    from yggdrasil.loki.fleet import read_run, write_report

    repo = tmp_path / "src" / "r"
    make_repo(repo, {"a.txt": "zero\n"})
    scripts = tmp_path / "scripts"
    write_script(scripts, "first", run("echo one > a.txt"),
                 run("echo two > a.txt && echo x > b.txt"), done())
    write_script(scripts, "second", run("cat a.txt; ls"), run("echo more >> a.txt"), done())
    model = str(scripts / "{id}.jsonl")
    [first] = fleet(tmp_path, model).run([Task("first", str(repo), "p")])
    assert first.status == "done", first.reason
    assert first.checkpoints and sorted(first.checkpoint_diffs) == ["1", "2"]
    assert "-zero\n+one" in first.checkpoint_diffs["1"]
    assert "-one\n+two" in first.checkpoint_diffs["2"] and "+++ b/b.txt" in first.checkpoint_diffs["2"]
    second_task = Task("second", str(repo), "p", start_from=f"{first.checkpoints}:1")
    [second] = fleet(tmp_path, model).run([second_task])
    assert second.status == "done", second.reason
    assert "-zero\n+one\n+more" in second.patch and "b.txt" not in second.patch  # both attempts'
    assert sorted(second.checkpoint_diffs) == ["2"]  # numbered on from the step it began at
    missing = Task("third", str(repo), "p", start_from="no-such-run:1")
    [third] = fleet(tmp_path, model).run([missing])
    assert third.status == "failed" and "no checkpoints of run 'no-such-run'" in third.reason
    assert read_run(tmp_path / "out").tasks[0].checkpoint_diffs == first.checkpoint_diffs
    html = write_report(tmp_path / "out").read_text()
    assert 'href="#t0-c1"' in html and 'id="t0-c1"' in html


def test_start_from_must_name_a_run_and_a_step(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="start_from 'run' is not RUN:STEP"):
        Task("t", str(tmp_path), "p", start_from="run")
