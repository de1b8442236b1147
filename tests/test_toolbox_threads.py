"""Toolbox.call from several threads, Toolbox.run's structured result, and cancelling."""

from __future__ import annotations

import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from procs import NS_PID, running, settles_dead
from yggdrasil.loki.tools import Observation, Toolbox, filesystem_toolbox


def _wait_for(path: Path, thread: threading.Thread) -> None:
    """Until ``path`` exists (the command got going), or the thread ended without it."""
    while not path.exists():
        if not thread.is_alive():
            raise AssertionError(f"the call ended before {path.name} appeared")
        thread.join(0.01)


@pytest.mark.parametrize("attempt", range(3))
def test_concurrent_calls_get_exact_change_reports(root: Path, attempt: int) -> None:
    """The reported bug: two threads on a two-file root were told 'not tracked' and
    charged with each other's file. Each call must report exactly its own change."""
    (root / "a.txt").write_text("a\n")
    (root / "b.txt").write_text("b\n")
    box = filesystem_toolbox(root)
    rounds = 15

    def commands(name: str) -> list[str]:
        return [box.call("run", {"command": f"echo {i} >> {name}"}) for i in range(rounds)]

    def writes() -> list[Observation]:
        return [box.run("write_file", {"path": "w.txt", "content": f"{i}\n"})
                for i in range(rounds)]

    def reads() -> list[str]:
        return [box.call("read_file", {"path": "b.txt", "end": 1}) for _ in range(rounds)]

    with ThreadPoolExecutor(4) as pool:
        a, b = pool.submit(commands, "a.txt"), pool.submit(commands, "b.txt")
        w, r = pool.submit(writes), pool.submit(reads)
    for name, future in (("a.txt", a), ("b.txt", b)):
        for observation in future.result():
            assert observation == f"exit=0\nstdout:\n\nstderr:\nchanged:\nmodified {name}\n"
    created = [obs.changed for obs in w.result()]
    assert created == [("w.txt",)] * rounds
    assert [(obs.data.path, obs.data.created) for obs in w.result()] == (
        [("w.txt", True)] + [("w.txt", False)] * (rounds - 1))
    assert all(text.startswith("1\tb") for text in r.result())
    assert (root / "a.txt").read_text().splitlines() == ["a", *map(str, range(rounds))]
    assert box.changed == sorted(box.changed, key=box.changed.index)  # no duplicates
    assert set(box.changed) == {"a.txt", "b.txt", "w.txt"}


@pytest.fixture
def not_temp(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Make the system temp dir somewhere else, so the test root counts as a real project."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("systemtmp")))


def test_run_gives_a_structured_observation(root: Path, not_temp: None) -> None:
    (root / "keep.txt").write_text("mine\n")
    box = filesystem_toolbox(root, confirm=lambda action: False)
    made = box.run("run", {"command": "echo 1 > x.txt && mkdir d && echo 2 > d/y.txt"})
    assert made == Observation(made.text, is_error=False, refused=False,
                               changed=("d/y.txt", "x.txt"))
    assert made.ok and made.text.startswith("exit=0")
    refused = box.run("write_file", {"path": "keep.txt", "content": "theirs"})
    assert (refused.refused, refused.is_error, refused.changed) == (True, False, ())
    assert refused.text == "REFUSED: user declined to overwrite keep.txt"
    failed = box.run("read_file", {"path": "../outside/secret.txt"})
    assert failed.is_error and not failed.ok and "escapes the agent root" in failed.text
    unknown = box.run("nope", {})
    assert unknown.is_error and "available tools" in str(unknown)
    assert box.call("read_file", {"path": "keep.txt"}) == "1\tmine"  # call() stays a str


def test_a_read_tool_answers_while_a_command_runs_and_cancel_stops_the_tree(root: Path) -> None:
    (root / "notes.txt").write_text("hello\n")
    box = filesystem_toolbox(root)
    script = (f"(sleep 300 & echo $! {NS_PID} > child.pid; wait) & echo $$ {NS_PID} > shell.pid; "
              "while [ ! -s child.pid ]; do sleep 0.01; done; touch started; sleep 300")
    results: list[str] = []
    runner = threading.Thread(target=lambda: results.append(box.call("run", {"command": script})))
    runner.start()
    _wait_for(root / "started", runner)
    assert box.call("read_file", {"path": "notes.txt"}) == "1\thello"
    assert runner.is_alive()  # the read did not wait behind the command
    pidfiles = [root / "shell.pid", root / "child.pid"]
    assert all(running(pidfile) for pidfile in pidfiles)
    assert box.cancel() == 1
    runner.join(60)
    assert not runner.is_alive()
    assert results[0].startswith("exit=cancelled (stopped on request with its whole process tree")
    assert "created started" in results[0]  # change tracking still ran
    assert all(settles_dead(pidfile) for pidfile in pidfiles)
    assert box.wait_idle(5)
    assert box.call("run", {"command": "echo after"}).startswith("exit=0\nstdout:\nafter")


def test_a_call_waiting_its_turn_can_be_cancelled(root: Path) -> None:
    box = filesystem_toolbox(root)
    first = threading.Thread(target=box.call, args=("run", {"command": "touch go; sleep 300"}))
    first.start()
    _wait_for(root / "go", first)
    mine = threading.Event()
    waiting: list[Observation] = []
    second = threading.Thread(target=lambda: waiting.append(
        box.run("write_file", {"path": "late.txt", "content": "x"}, cancel=mine)))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # queued behind the running command
    mine.set()
    second.join(30)
    assert waiting[0].text == "ERROR: write_file was cancelled before it started"
    assert not (root / "late.txt").exists()
    assert first.is_alive()  # only that call was cancelled
    box.cancel()
    first.join(60)
    assert not first.is_alive()


def test_a_tool_of_the_users_may_call_a_mutating_tool_of_its_box(root: Path) -> None:
    box = filesystem_toolbox(root)

    @box.tool(mutates=True)
    def note(text: str) -> str:
        """Append a note.

        Args:
            text: what to note
        """
        return box.call("write_file", {"path": "notes.md", "content": text})

    result = box.run("note", {"text": "hi"})
    assert result.text.startswith("created notes.md") and result.changed == ("notes.md",)


def test_cancel_with_nothing_running_reaches_nothing(box: Toolbox) -> None:
    assert box.cancel() == 0
    assert box.wait_idle(0)
