"""Background jobs through the interfaces: `loki do` (its end, Ctrl-C, SIGTERM), `loki mcp`
(a real SDK client that disconnects mid-job, stdin EOF with a command still running) and
`Loki.act` with a toolbox of its own."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cli_run import child_env, interruptible, loki
from jobs_kit import GUARD, wait_for_file
from procs import NS_PID, settles_dead
from yggdrasil.loki import Loki
from yggdrasil.loki.engines.scripted import ScriptedEngine

# A job whose shell and background child write their pids, then keep running.
JOB = (f"sleep 300 & echo $! {NS_PID} > job-child.pid; echo $$ {NS_PID} > job.pid; "
       "echo job up; wait")
JOB_PIDS = ("job.pid", "job-child.pid")


def plan(path: Path, *decisions: dict[str, Any]) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in decisions))
    return str(path)


def background(command: str) -> dict[str, Any]:
    return {"thought": "start it", "tool": "run", "args": {"command": command, "background": True}}


def all_dead(root: Path, names: tuple[str, ...] = JOB_PIDS) -> bool:
    return all(settles_dead(root / name) for name in names)


def test_jobs_end_with_loki_do(root: Path) -> None:
    steps = plan(root.parent / "plan.jsonl", background(JOB),
                 {"thought": "look", "tool": "job_output", "args": {"job": 1, "wait": 1}},
                 {"thought": "", "done": True, "answer": "left it running"})
    done = loki(root.parent, "do", "t", "--root", str(root), "--engine", "scripted",
                "--model", steps, "--yes")
    assert done.returncode == 0, done.stderr
    assert "1/12 run" in done.stderr and "-> started job 1: sleep 300" in done.stderr
    assert "2/12 job_output" in done.stderr and "-> job 1 running" in done.stderr
    assert all_dead(root)
    assert "A job.pid" in done.stderr and "A job-child.pid" in done.stderr


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_in_loki_do_stops_the_jobs_and_the_running_command(
        root: Path, how: str) -> None:
    steps = plan(root.parent / "plan.jsonl", background(JOB),
                 {"thought": "r", "tool": "run", "args": {
                     "command": f"echo $$ {NS_PID} > fg.pid; sleep 300"}})
    with interruptible():
        proc = subprocess.Popen(
            [sys.executable, "-m", "yggdrasil.loki", "do", "t", "--root", str(root), "--engine",
             "scripted", "--model", steps, "--yes"], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(root.parent))
    try:
        wait_for_file(root / "fg.pid")
        proc.send_signal(getattr(signal, how))
        _, err = proc.communicate(timeout=GUARD)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "loki: interrupted" in err and "A job.pid" in err and "A fg.pid" in err
    assert all_dead(root, (*JOB_PIDS, "fg.pid"))


def test_loki_act_closes_the_toolbox_it_made(root: Path) -> None:
    engine = ScriptedEngine([background(JOB), {"thought": "", "done": True, "answer": "ok"}])
    result = Loki(engine).act("t", root=root)
    assert result.completed and {"job.pid", "job-child.pid"} <= set(result.files_changed)
    assert all_dead(root)


# -- loki mcp ----------------------------------------------------------------------------

def test_a_real_mcp_client_disconnecting_mid_job_leaves_nothing_running(
        root: Path, mcp_python: str) -> None:
    pytest.importorskip("mcp")
    from test_mcp import serve_and, text_of

    async def scenario(client: Any) -> str:
        started = await client.call_tool("run", {"command": JOB, "background": True})
        for name in JOB_PIDS:
            wait_for_file(root / name)
        later = await client.call_tool("job_output", {"job": 1})
        return text_of(started) + "\n---\n" + text_of(later)

    seen, log = serve_and(mcp_python, root, scenario)  # leaving the session disconnects
    assert seen.startswith("started job 1: sleep 300") and "\n---\njob 1 running" in seen
    assert all_dead(root), log
    assert "the client closed stdin" in log and "loki mcp: INFO stopped" in log, log
    assert "Traceback" not in log


def test_stdin_eof_stops_the_jobs_and_the_foreground_command(
        root: Path, mcp_python: str) -> None:
    pytest.importorskip("mcp")
    from test_mcp_stop import wire

    tmpdir = root.parent / "server-tmp"
    tmpdir.mkdir()
    with wire(mcp_python, root, tmpdir) as client:
        client.call(1, "run", command=JOB, background=True)
        client.answer(1)
        client.call(2, "run", command=f"echo $$ {NS_PID} > fg.pid; sleep 300")
        wait_for_file(root / "fg.pid")
        began = time.monotonic()
        client.proc.stdin.close()  # type: ignore[union-attr]
        assert client.exit_code() == 0
        assert time.monotonic() - began < GUARD
    assert all_dead(root, (*JOB_PIDS, "fg.pid"))
    assert not list(tmpdir.iterdir())  # no scratch folder of the job, no undo copy left
    assert "Traceback" not in client.stderr()
