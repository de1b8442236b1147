"""Fleets leave nothing behind and grade honestly (local backend; Ray in test_fleet_ray.py).

Leftovers are counted as files: what the run's TMPDIR and the fleet cache's work folder
hold before and after a run, a killed worker, a killed driver and the resume after it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from fleet_kit import (
    attempt_pids,
    done,
    git,
    leftovers,
    make_repo,
    marked_processes,
    run,
    wait_for,
    write_script,
)
from yggdrasil.loki.fleet import Fleet, Task
from yggdrasil.loki.fleet._attempt import AttemptSettings, warm_up
from yggdrasil.loki.fleet._local import _work, died
from yggdrasil.loki.fleet._scratch import Workspace
from yggdrasil.loki.fleet._zygote import Zygote
from yggdrasil.loki.sandbox import running_since

SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture
def system_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A TMPDIR of the driver's own (and so of its workers), to count what is left in it."""
    folder = tmp_path / "system-tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder


def fleet(tmp_path: Path, model: str, **options: object) -> Fleet:
    settings: dict[str, object] = {"backend": "local", "workers": 2, "out": tmp_path / "out",
                                   "cache_dir": tmp_path / "cache"}
    settings.update(options)
    return Fleet("scripted", model=model, **settings)  # type: ignore[arg-type]


def tmp_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def repo_and_scripts(tmp_path: Path, **scripts: list[dict[str, object]]) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    if not repo.exists():
        make_repo(repo, {"a.txt": "a\n", "check.sh": "test -f b.txt\n"})
    for name, steps in scripts.items():
        write_script(tmp_path / "s", name, *steps)
    return repo, str(tmp_path / "s" / "{id}.jsonl")


def test_a_verified_run_leaves_nothing_in_tmpdir_or_the_cache(tmp_path: Path,
                                                              system_tmp: Path) -> None:
    """Each verified task used to leave a loki-undo-* folder (verify's toolbox never
    discarded its undo copies, and workers exit with os._exit)."""
    steps = [run("echo b > b.txt"), {"tool": "edit_file",
                                     "args": {"path": "a.txt", "old": "a", "new": "A"}}, done()]
    repo, model = repo_and_scripts(tmp_path, **{f"t{i}": steps for i in range(4)})
    tasks = [Task(id=f"t{i}", repo=str(repo), prompt="x", verify="sh check.sh") for i in range(4)]
    results = list(fleet(tmp_path, model).run(tasks))
    assert [r.verified for r in results] == [True] * 4
    assert tmp_files(system_tmp) == [] and leftovers(tmp_path / "cache") == []


def test_a_killed_worker_leaves_nothing(tmp_path: Path, system_tmp: Path) -> None:
    repo, model = repo_and_scripts(tmp_path, slow=[run("echo b > b.txt; sleep 3"), done()])
    killed: list[int] = []

    def kill_once() -> None:
        pids = wait_for(lambda: attempt_pids(tmp_path / "cache", "slow"))
        # mid-command: it wrote b.txt in its working copy and sleeps
        wait_for(lambda: list((tmp_path / "cache" / "work").glob("slow.*/**/b.txt")))
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])

    watcher = threading.Thread(target=kill_once, daemon=True)
    watcher.start()
    [result] = fleet(tmp_path, model).run([Task(id="slow", repo=str(repo), prompt="x",
                                                verify="sh check.sh")])
    watcher.join(5)
    assert killed and result.verified is True and len(result.attempts) == 2
    assert tmp_files(system_tmp) == [] and leftovers(tmp_path / "cache") == []
    assert marked_processes() == []


def test_a_killed_driver_leaves_nothing_once_resumed(tmp_path: Path, system_tmp: Path) -> None:
    """The driver is SIGKILLed mid-task: its workers stop their commands and exit; the
    attempt's scratch folder (all its temporary files inside) stays until the next run on
    the cache (the resume) sweeps it; that run finishes the task."""
    repo, model = repo_and_scripts(tmp_path, slow=[run("echo b > b.txt; sleep 30"), done()])
    code = ("import sys; from yggdrasil.loki.fleet import Fleet, Task; "
            "f = Fleet('scripted', model=sys.argv[1], workers=1, out=sys.argv[2], "
            "cache_dir=sys.argv[3]); "
            "list(f.run([Task(id='slow', repo=sys.argv[4], prompt='x')]))")
    driver = subprocess.Popen(
        [sys.executable, "-c", code, model, str(tmp_path / "out"), str(tmp_path / "cache"),
         str(repo)], env={**os.environ, "PYTHONPATH": SRC, "TMPDIR": str(system_tmp)})
    try:
        wait_for(lambda: attempt_pids(tmp_path / "cache", "slow"), timeout=60)
        wait_for(marked_processes, timeout=30)  # its `sleep 30` runs
        started = descendants(driver.pid)  # the gate's manager, the zygote, its worker
        assert len(started) >= 3, started
    finally:
        driver.kill()
        driver.wait()
    assert marked_processes(settle=10) == []  # the workers stopped what they started
    wait_for(lambda: not any(alive(pid) for pid in started), timeout=15)
    assert tmp_files(system_tmp) == []  # the attempt's temporary files are in its scratch
    write_script(tmp_path / "s", "slow", run("echo b > b.txt"), done())
    [result] = fleet(tmp_path, model).run([Task(id="slow", repo=str(repo), prompt="x")])
    assert result.status == "done" and result.files_changed == ["b.txt"]
    assert tmp_files(system_tmp) == [] and leftovers(tmp_path / "cache") == []


def test_workers_are_forked_from_the_fleets_own_warm_zygote(tmp_path: Path) -> None:
    """One interpreter imports the agent; workers are its children (forked, not started
    fresh), it has no thread to fork, and it says how each worker ended. A zygote that
    died is replaced by the next fork; a worker it left behind is still watched (by its
    pidfd), and said to have ended in a way nobody knows."""
    settings = AttemptSettings(engine="scripted", cache_dir=str(tmp_path / "cache"))
    zygote = Zygote(partial(warm_up, settings), partial(_work, settings))
    try:
        first, first_conn = zygote.fork()
        second, second_conn = zygote.fork()
        parent = zygote.process.pid
        assert parent_of(first.pid) == parent_of(second.pid) == parent
        assert "Threads:\t1\n" in Path(f"/proc/{parent}/status").read_text()
        os.kill(first.pid, signal.SIGTERM)
        first.join(5)
        assert first.exitcode == -signal.SIGTERM and not first.is_alive()
        assert died(first) == "the worker process died (killed by SIGTERM)"
        with pytest.raises(EOFError):  # nobody else holds its end: the driver sees the death
            first_conn.recv()
        second_conn.send(None)  # the gate it would use
        second_conn.send(None)  # stop
        second.join(5)
        assert second.exitcode == 0
        orphan, _orphan_conn = zygote.fork()
        zygote.process.kill()
        zygote.process.join()
        third, third_conn = zygote.fork()
        assert parent_of(third.pid) == zygote.process.pid != parent
        third_conn.close()  # a worker whose driver went away before giving it work
        third.join(5)
        assert third.exitcode == 0
        orphan.join(0.2)  # not the new zygote's child: it still runs, and is said to
        assert orphan.is_alive()
        orphan.kill()
        orphan.join(5)
        assert not orphan.is_alive() and not alive(orphan.pid)
        assert orphan.exitcode is None and "how is unknown" in died(orphan)
    finally:
        zygote.close()
    assert not zygote.process.is_alive()
    with pytest.raises(OSError, match="closed"):
        zygote.fork()


def test_a_scratch_folder_says_whose_it_is_until_the_last(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Its owner record goes last: a worker killed while removing it (its driver died)
    leaves a folder the next sweep judges by its dead owner, not an ownerless one."""
    space = Workspace(tmp_path / "cache")
    removals: list[set[str]] = []
    real = shutil.rmtree

    def watched(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        removals.append({p.name for p in Path(space.work).rglob("*")})
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    with space.scratch("t1", "m") as folder:
        (folder / "copy" / "src").mkdir(parents=True)
        (folder / "copy" / "src" / "a.py").write_text("x = 1\n")
        (folder / "transcript.jsonl").write_text("{}\n")
        monkeypatch.setattr(shutil, "rmtree", watched)
    assert removals and all("owner" in seen for seen in removals[:-1])
    assert "transcript.jsonl" not in removals[-1] and "copy" not in removals[-1]
    assert list(space.work.iterdir()) == [] or [p.name for p in space.work.iterdir()] == [
        ".sweep.lock"]


def parent_of(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw[raw.rfind(b")") + 2 :].split()[1])


def descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and alive(int(entry.name)):
                try:
                    if parent_of(int(entry.name)) == parent:
                        found.append(int(entry.name))
                        frontier.append(int(entry.name))
                except OSError:
                    continue
    return found


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its parent, is not)."""
    return bool(running_since(pid))


def test_a_second_fleet_works_after_the_first_ones_tmpdir_is_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, model = repo_and_scripts(tmp_path, t1=[done()], t2=[done()])
    for name in ("t1", "t2"):
        temp = tmp_path / f"tmp-{name}"
        temp.mkdir()
        monkeypatch.setenv("TMPDIR", str(temp))
        monkeypatch.setattr(tempfile, "tempdir", str(temp))
        [result] = fleet(tmp_path, model).run([Task(id=name, repo=str(repo), prompt="x")])
        assert result.status == "done", result.reason
        assert tmp_files(temp) == []
        temp.rmdir()  # as pytest removes an old tmp folder


def test_a_stale_mirror_is_fetched_when_a_task_names_no_commit_or_a_branch(
        tmp_path: Path) -> None:
    repo, model = repo_and_scripts(tmp_path, **{n: [done()] for n in ("a", "b", "c", "d")})
    first = git(repo, "rev-parse", "HEAD").strip()
    [a] = fleet(tmp_path, model).run([Task(id="a", repo=str(repo), prompt="x")])
    assert a.commit == first
    second = make_repo(repo, {"a.txt": "moved on\n"}, "second")
    [b] = fleet(tmp_path, model, refresh="never").run([Task(id="b", repo=str(repo), prompt="x")])
    assert b.commit == first  # never: the mirror as it is
    ran = {r.id: r for r in fleet(tmp_path, model).run(
        [Task(id="c", repo=str(repo), prompt="x"),
         Task(id="d", repo=str(repo), prompt="x", commit="main")])}
    assert ran["c"].commit == ran["d"].commit == second  # auto: fetched (once) this run


def test_a_sigkilled_verify_is_retried_not_graded(tmp_path: Path) -> None:
    """An out-of-memory kill of verify is the node's doing, not a wrong patch: the attempt
    is retried; a verify killed every time fails the task, saying so. (The shell reports
    its killed child as exit 137; a verify killed itself as exit -9.)"""
    repo, model = repo_and_scripts(tmp_path, once=[run("echo b > b.txt"), done()],
                                   always=[done()])
    tasks = [Task(id="once", repo=str(repo), prompt="x", verify="sleep 3 && sh check.sh"),
             Task(id="always", repo=str(repo), prompt="x", verify="kill -9 $$")]
    killed: list[int] = []

    def kill_first_verify() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for pid in marked_processes(settle=0):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if argv.startswith(b"sleep\x003"):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    break
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_first_verify, daemon=True)
    watcher.start()
    results = {r.id: r for r in fleet(tmp_path, model).run(tasks)}
    watcher.join(5)
    once, always = results["once"], results["always"]
    assert killed and once.status == "done" and once.verified is True
    assert len(once.attempts) == 2 and "verify was killed" in once.attempts[0]["reason"]
    assert always.status == "failed" and always.verified is None
    assert always.reason.count("verify was killed (exit -9)") == 2


def test_redo_runs_the_failed_tasks_again(tmp_path: Path) -> None:
    repo, model = repo_and_scripts(tmp_path, good=[done()], bad=[run("true")])
    tasks = [Task(id="good", repo=str(repo), prompt="x"), Task(id="bad", repo=str(repo), prompt="x")]
    first = {r.id: r.status for r in fleet(tmp_path, model, attempts=1).run(tasks)}
    assert first == {"good": "done", "bad": "failed"}
    assert list(fleet(tmp_path, model).run(tasks)) == []  # nothing to do by default
    write_script(tmp_path / "s", "bad", done())
    again = [r.id for r in fleet(tmp_path, model, redo="failed").run(tasks)]
    assert again == ["bad"]
    every = sorted(r.id for r in fleet(tmp_path, model, redo="all").run(tasks))
    assert every == ["bad", "good"]
    recorded = Fleet("scripted", out=tmp_path / "out").results()
    assert {r.id: r.status for r in recorded} == {"good": "done", "bad": "done"}


def test_results_record_each_attempts_node_and_times_and_replays_spend_no_tokens(
        tmp_path: Path) -> None:
    turn = {"type": "turn", "text": json.dumps(done()),
            "usage": {"input_tokens": 500, "output_tokens": 20}}
    repo, model = repo_and_scripts(tmp_path, r=[turn])
    before = time.time()
    ran = fleet(tmp_path, model)
    [result] = ran.run([Task(id="r", repo=str(repo), prompt="x")])
    [attempt] = result.attempts
    assert attempt["node"] == os.uname().nodename
    assert before <= attempt["started_at"] <= attempt["ended_at"] <= time.time()
    assert 0 <= attempt["queued_seconds"] < 60
    assert result.usage["input_tokens"] == 500 and result.tokens_replayed is True
    assert ran.status.input_tokens == 0  # the recording's tokens were not spent now
    line = json.loads((tmp_path / "out" / "results.jsonl").read_text())
    assert set(line["attempts"][0]) >= {"node", "started_at", "ended_at", "queued_seconds"}
