"""Background jobs under attack: escapees, stubborn processes, fork storms, stdin floods,
another call's scratch folder, the fence, and an agent that goes away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs_kit import GUARD, read_until_exit, sections, start, started_id, wait_for_file
from procs import NS_PID, alive, running, settles_dead
from yggdrasil.loki.sandbox import isolation_status, landlock_status
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

SRC = Path(__file__).resolve().parents[1] / "src"

# A job that leaves processes every way it can: a grandchild, a daemon in its own
# session (setsid), a double fork whose middle process exits at once, then waits.
ESCAPES = ("import os, signal, subprocess\n"
           "ns = os.readlink('/proc/self/ns/pid')\n"
           "def note(name, pid): open(name, 'w').write(f'{pid} {ns}')\n"
           "note('child.pid', subprocess.Popen(['sleep', '300']).pid)\n"
           "note('daemon.pid', subprocess.Popen(['setsid', 'sleep', '300'],"
           " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)\n"
           "if os.fork() == 0:\n"
           "    os.setsid()\n"
           "    if os.fork() == 0:\n"
           "        os.closerange(0, 3)\n"
           "        note('double.pid', os.getpid())\n"
           "        signal.pause()\n"
           "    os._exit(0)\n"
           "note('main.pid', os.getpid())\n"
           "print('all started', flush=True)\n"
           "signal.pause()\n")  # until it is killed
PIDFILES = ("main.pid", "child.pid", "daemon.pid", "double.pid")


def _start_escapes(box: Toolbox, root: Path) -> int:
    job = started_id(box.call("run_python", {"code": ESCAPES, "background": True}))
    for name in PIDFILES:
        wait_for_file(root / name)
    assert all(running(root / name) for name in PIDFILES)
    return job


# "off": no namespace, no fence; the launcher still reaps (a subreaper) and the agent
# finds the command's processes below it
@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_job_stop_kills_grandchildren_daemons_and_double_forks(root: Path, sandbox: str) -> None:
    with filesystem_toolbox(root, sandbox=sandbox) as box:  # type: ignore[arg-type]
        job = _start_escapes(box, root)
        stopped = box.call("job_stop", {"job": job})
        assert "stopped by job_stop" in stopped.splitlines()[0], stopped
        assert all(settles_dead(root / name) for name in PIDFILES)


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_close_kills_grandchildren_daemons_and_double_forks(root: Path, sandbox: str) -> None:
    with filesystem_toolbox(root, sandbox=sandbox) as box:  # type: ignore[arg-type]
        _start_escapes(box, root)
    assert all(settles_dead(root / name) for name in PIDFILES)
    assert box.call("run", {"command": "true", "background": True}).startswith(
        "ERROR: this toolbox is closed; background jobs can no longer start")


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_a_job_ignoring_sigint_and_sigterm_is_killed(root: Path, sandbox: str) -> None:
    with filesystem_toolbox(root, sandbox=sandbox) as box:  # type: ignore[arg-type]
        job, _ = start(box, f"trap '' INT TERM; echo $$ {NS_PID} > stubborn.pid; "
                            "sleep 300 & echo $! " + NS_PID + " > sleeper.pid; wait; wait")
        wait_for_file(root / "sleeper.pid")
        began = time.monotonic()
        state = box.call("job_stop", {"job": job}).splitlines()[0]
        took = time.monotonic() - began
    assert state == ("exit=-9 (stopped by job_stop: SIGINT and SIGTERM did not end it within "
                     "2s each, so it was killed)")
    assert took < GUARD
    assert settles_dead(root / "stubborn.pid") and settles_dead(root / "sleeper.pid")


def test_a_job_ignoring_only_sigint_ends_on_sigterm(root: Path) -> None:
    code = ("import signal\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "print('ready')\n"
            "signal.pause()\n")  # until a signal ends it
    with filesystem_toolbox(root) as box:
        job = started_id(box.call("run_python", {"code": code, "background": True}))
        state = box.call("job_stop", {"job": job}).splitlines()[0]
    assert state == ("exit=-15 (stopped by job_stop: SIGINT did not end it within 2s, it "
                     "exited on SIGTERM)")


def _processes_in(ns: str) -> list[int]:
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{name}/ns/pid") == ns and alive(int(name)):
                found.append(int(name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not isolation_status().namespaces, reason="needs PID namespaces")
def test_a_fork_storm_is_stopped_whole(root: Path) -> None:
    # keeps ~100 processes alive, each replaced as soon as it dies: a race for any
    # kill that walks the tree, none for the end of the PID namespace
    code = ("import os, time\n"
            "open('ns.txt', 'w').write(os.readlink('/proc/self/ns/pid'))\n"
            "kids = set()\n"
            "while True:\n"
            "    while len(kids) < 100:\n"
            "        pid = os.fork()\n"
            "        if pid == 0:\n"
            "            time.sleep(0.05)\n"
            "            os._exit(0)\n"
            "        kids.add(pid)\n"
            "    kids.discard(os.wait()[0])\n")
    with filesystem_toolbox(root) as box:
        job = started_id(box.call("run_python", {"code": code, "background": True}))
        wait_for_file(root / "ns.txt")
        ns = (root / "ns.txt").read_text()
        deadline = time.monotonic() + GUARD
        while len(_processes_in(ns)) < 20:  # the storm is up
            assert time.monotonic() < deadline, _processes_in(ns)
            time.sleep(0.02)
        box.call("job_stop", {"job": job})
    deadline = time.monotonic() + 10
    while _processes_in(ns):
        assert time.monotonic() < deadline, _processes_in(ns)
        time.sleep(0.05)


def test_job_input_to_a_job_that_never_reads_does_not_block_the_agent(root: Path) -> None:
    with filesystem_toolbox(root) as box:
        job, _ = start(box, "sleep 300")  # never reads stdin
        first = box.call("job_input", {"job": job, "text": "x" * 999_999})
        assert first.startswith(f"job {job}: sent 1000000 bytes to its stdin")  # the pipe holds it
        began = time.monotonic()
        second = box.call("job_input", {"job": job, "text": "y" * 999_999})
        assert time.monotonic() - began < GUARD
        assert second.startswith(f"ERROR: job {job} did not read its input: ")
        assert "bytes were written in 5s and the rest was dropped" in second
        assert box.call("job_stop", {"job": job}).startswith("exit=")


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_input_for_a_job_that_closed_its_stdin_is_refused(root: Path, sandbox: str) -> None:
    with filesystem_toolbox(root, sandbox=sandbox) as box:  # type: ignore[arg-type]
        job, _ = start(box, "exec <&-; echo closed; sleep 300")
        refused = box.call("job_input", {"job": job, "text": "anyone there?"})
        assert refused == f"ERROR: job {job} closed its stdin: it reads no more input"
        box.call("job_stop", {"job": job})


def test_a_flooding_job_is_read_in_bounded_pieces_and_stopped(root: Path) -> None:
    with filesystem_toolbox(root) as box:
        job, obs = start(box, "yes flood")
        assert len(obs) < 40_000
        for _ in range(3):
            obs = box.call("job_output", {"job": job, "wait": 1})
            assert obs.startswith(f"job {job} running") and len(obs) < 40_000
            assert "of output cut from the middle" in obs
        assert box.call("job_stop", {"job": job}).startswith("exit=")


def test_a_job_that_closed_its_output_is_still_stopped(root: Path) -> None:
    with filesystem_toolbox(root) as box:
        job, _ = start(box, f"exec >&- 2>&- <&-; echo $$ {NS_PID} > quiet.pid; sleep 300")
        wait_for_file(root / "quiet.pid")
        assert box.call("job_output", {"job": job, "wait": 0.5}).startswith(f"job {job} running")
        box.call("job_stop", {"job": job})
    assert settles_dead(root / "quiet.pid")


@pytest.mark.skipif(not isolation_status().namespaces, reason="needs a private /tmp per command")
def test_a_command_cannot_read_a_jobs_scratch_folder(root: Path) -> None:
    with filesystem_toolbox(root) as box:
        job, obs = start(box, 'echo secret > "$TMPDIR/mine.txt"; echo "$TMPDIR"; sleep 300')
        scratch = sections(obs)[1].strip()
        assert Path(scratch, "mine.txt").read_text() == "secret\n"  # it is there, on the host
        peek = box.call("run", {"command": f"cat {scratch}/mine.txt"})
        assert peek.startswith("exit=1") and "No such file or directory" in peek
        other, obs = start(box, f"cat {scratch}/mine.txt")
        _, _, err, _ = read_until_exit(box, other)
        assert "No such file or directory" in sections(obs)[2] + err
        box.call("job_stop", {"job": job})
    assert not Path(scratch).exists()  # removed when the job ended


@pytest.mark.skipif(not landlock_status().available, reason="needs Landlock")
def test_a_job_runs_under_the_same_fence_as_run(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "tok-123-secret")
    outside = root.parent / "outside" / "written.txt"
    with filesystem_toolbox(root, network=False) as box:
        job, obs = start(box, f"echo token=[$MY_API_TOKEN] sandbox=$LOKI_SANDBOX; "
                              f"echo x > {outside}; "
                              "python -c \"import socket; socket.create_connection(('1.1.1.1', 53), 3)\"")
        state, out, err, _ = read_until_exit(box, job)
        out, err = sections(obs)[1] + out, sections(obs)[2] + err
    assert "token=[] sandbox=landlock-abi-" in out
    assert "Permission denied" in err and not outside.exists()
    assert state.startswith("exit=") and state != "exit=0"  # the connect failed


def _agent(root: Path, tmp: Path, body: str) -> subprocess.Popen[str]:
    script = ("import sys\n"
              "from yggdrasil.loki.tools import filesystem_toolbox\n"
              f"box = filesystem_toolbox({str(root)!r})\n"
              "print(box.call('run_python', {'code': " + repr(ESCAPES) + ", 'background': True})"
              ".splitlines()[0], flush=True)\n" + body)
    env = {**os.environ, "PYTHONPATH": str(SRC), "TMPDIR": str(tmp)}
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env=env)


def test_jobs_end_when_the_interpreter_exits_without_close(root: Path) -> None:
    tmp = root.parent / "agent-tmp"
    tmp.mkdir()
    # once the job wrote its pid files, the agent exits: atexit must end the job
    agent = _agent(root, tmp, "import os, time\n"
                              f"names = [os.path.join({str(root)!r}, n) for n in {PIDFILES!r}]\n"
                              "while not all(os.path.exists(n) and os.path.getsize(n)"
                              " for n in names):\n"
                              "    time.sleep(0.02)\n")
    out, _ = agent.communicate(timeout=GUARD)
    assert agent.returncode == 0 and out.startswith("started job 1:")
    assert all(settles_dead(root / name) for name in PIDFILES)
    assert not list(tmp.glob("loki-tmp-*"))


def test_jobs_end_when_the_agent_is_killed_outright(root: Path) -> None:
    tmp = root.parent / "agent-tmp"
    tmp.mkdir()
    agent = _agent(root, tmp, "import signal; signal.pause()\n")  # until it is killed
    try:
        assert agent.stdout is not None and agent.stdout.readline().startswith("started job 1:")
        for name in PIDFILES:
            wait_for_file(root / name)
        agent.send_signal(signal.SIGKILL)  # no atexit, no close: the launcher must notice
        agent.wait(GUARD)
    finally:
        agent.kill()
    deadline = time.monotonic() + 15
    while any(running(root / name) for name in PIDFILES):
        assert time.monotonic() < deadline, [n for n in PIDFILES if running(root / n)]
        time.sleep(0.1)
