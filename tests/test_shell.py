"""run and run_python with real subprocesses: exit codes, process trees, floods, stdin, env."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from procs import NS_PID, settles_dead
from yggdrasil.loki.shell import Shell
from yggdrasil.loki.tools import Tool, Toolbox, filesystem_toolbox


def test_run_reports_exit_and_streams(root: Path, box: Toolbox) -> None:
    out = box.call("run", {"command": "echo out; echo err >&2; exit 3"})
    assert out == "exit=3\nstdout:\nout\n\nstderr:\nerr\n"


def test_run_happens_in_the_root(root: Path, box: Toolbox) -> None:
    assert box.call("run", {"command": "pwd"}).splitlines()[2] == str(root.resolve())


def test_stdin_is_at_eof(box: Toolbox) -> None:
    out = box.call("run", {"command": "cat; read line; echo read=$?; echo done", "timeout": 10})
    assert out.startswith("exit=0") and "read=1" in out and "done" in out
    out = box.call("run_python", {"code": "import sys; print(repr(sys.stdin.read()))"})
    assert out.startswith("exit=0\nstdout:\n''")


def test_timeout_kills_grandchildren(root: Path, box: Toolbox) -> None:
    out = box.call("run", {"command": f"sleep 300 & echo $! {NS_PID} > grandchild.pid; echo started; wait",
                           "timeout": 1})
    assert out.startswith("exit=timeout (killed after 1s") and "started" in out
    assert settles_dead(root / "grandchild.pid")


def test_timeout_kills_a_child_that_left_the_process_group(root: Path, box: Toolbox) -> None:
    code = ("import os, signal, subprocess\n"
            "p = subprocess.Popen(['sleep', '300'], process_group=0)\n"
            "open('moved.pid', 'w').write(f\"{p.pid} {os.readlink('/proc/self/ns/pid')}\")\n"
            "assert os.getpgid(p.pid) != os.getpgid(0)\n"
            "print('moved', flush=True)\n"
            "signal.pause()\n")  # until the timeout kills it
    out = box.call("run_python", {"code": code, "timeout": 2})
    assert out.startswith("exit=timeout") and "moved" in out
    assert settles_dead(root / "moved.pid")


def test_a_daemon_that_left_the_session_is_killed_too(root: Path, box: Toolbox) -> None:
    out = box.call("run", {"command": f"setsid sleep 300 & echo $! {NS_PID} > daemon.pid; sleep 0.2"})
    assert out.startswith("exit=0")
    assert settles_dead(root / "daemon.pid")


def test_leftovers_die_after_a_normal_exit(root: Path, box: Toolbox) -> None:
    out = box.call("run", {"command": f"nohup sleep 300 >/dev/null 2>&1 & echo $! {NS_PID} > bg.pid"})
    assert out.startswith("exit=0")
    assert settles_dead(root / "bg.pid")


def _peak_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/self/status")


def test_a_gigabyte_of_output_costs_bounded_memory(box: Toolbox) -> None:
    # what the first command loads once (the tokenizer the caps count with) is not the
    # output's cost: a small command first, then the mark
    box.call("run", {"command": "head -c 100000 /dev/zero | tr '\\0' a"})
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS mark (VmHWM)
    base = _peak_rss_kb()
    out = box.call("run", {"command": "head -c 1073741824 /dev/zero | tr '\\0' a; echo END >&2"})
    grew_mb = (_peak_rss_kb() - base) / 1024
    assert out.startswith("exit=0") and len(out) < 40_000
    assert "of output cut from the middle" in out and out.endswith("stderr:\nEND\n")
    assert grew_mb < 64, f"peak RSS grew by {grew_mb:.0f} MB while reading 1 GB"


def test_run_python_sees_src_layout(root: Path, box: Toolbox) -> None:
    (root / "src" / "mypkg").mkdir(parents=True)
    (root / "src" / "mypkg" / "__init__.py").write_text("ANSWER = 42\n")
    out = box.call("run_python", {"code": "import mypkg, os\nprint(mypkg.ANSWER, os.getcwd())"})
    assert out == f"exit=0\nstdout:\n42 {root.resolve()}\n\nstderr:\n"
    assert os.listdir(root) == ["src"]  # the snippet itself is not left in the root


def test_bad_arguments(box: Toolbox) -> None:
    assert box.call("run", {"command": "  "}).startswith("ERROR: command is empty")
    assert "at most 3600" in box.call("run", {"command": "true", "timeout": 0})
    err = box.call("run_python", {"code": "raise SystemExit(4)"})
    assert err.startswith("exit=4")


def test_missing_interpreter_is_a_readable_error(root: Path) -> None:
    from yggdrasil.loki.files import Root

    shell = Shell(Root.at(root), shell="/no/such/bash")
    box = Toolbox()
    box.add(Tool("run", "run", {"command": "c", "timeout": "t"}, shell.run))
    out = box.call("run", {"command": "echo hi"})
    assert out.startswith("ERROR: cannot start '/no/such/bash': no such program")


def test_a_removed_root_is_a_readable_error(tmp_path: Path) -> None:
    root = tmp_path / "gone"
    root.mkdir()
    box = filesystem_toolbox(root)
    shutil.rmtree(root)
    for name, args in (("run", {"command": "true"}), ("run_python", {"code": "pass"})):
        out = box.call(name, args)
        assert out.startswith("ERROR: working folder") and "does not exist" in out


# -- the environment ----------------------------------------------------------------------


def test_secrets_are_invisible_to_commands(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "k-123")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_abc")
    monkeypatch.setenv("DATABASE_URL", "postgres://me:hunter2@db/app")
    monkeypatch.setenv("HARMLESS_SETTING", "yes")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    box = filesystem_toolbox(root)
    out = box.call("run", {"command": "env"})
    for leaked in ("k-123", "eu-west-1", "ghp_abc", "hunter2", "GITHUB_TOKEN"):
        assert leaked not in out
    for kept in ("HARMLESS_SETTING=yes", "LC_ALL=C.UTF-8", f"PATH={os.environ['PATH']}",
                 f"HOME={os.environ['HOME']}"):
        assert kept in out
    py = box.call("run_python", {"code": "import os; print(os.environ.get('MY_SERVICE_API_KEY'))"})
    assert py.startswith("exit=0\nstdout:\nNone\n")
    assert "secret-looking environment variables withheld" in box.status


def test_explicit_env_passes_even_a_secret(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-parent")
    box = filesystem_toolbox(root, env={"OPENAI_API_KEY": "given-on-purpose", "MODE": "x"})
    out = box.call("run", {"command": "echo $OPENAI_API_KEY $MODE"})
    assert out.startswith("exit=0\nstdout:\ngiven-on-purpose x\n")


def test_scratch_tmpdir_is_private_and_removed(root: Path, box: Toolbox) -> None:
    out = box.call("run", {"command": "echo $TMPDIR; touch $TMPDIR/x; ls $TMPDIR"})
    scratch = out.splitlines()[2]
    assert out.splitlines()[3] == "x" and scratch.startswith(os.path.realpath("/tmp") + "/")
    assert not Path(scratch).exists()
    py = box.call("run_python", {"code": "import tempfile; print(tempfile.gettempdir())"})
    assert py.splitlines()[2] != scratch and not Path(py.splitlines()[2]).exists()


def test_an_escapee_holding_the_output_is_killed(root: Path, box: Toolbox) -> None:
    """setsid + an empty environment leaves no trace but the output pipe it still holds."""
    cmd = (f"setsid env -i sleep 300 & pid=$!; echo $pid {NS_PID} > esc.pid; "
           "while [ -n \"$(tr -d '\\0' < /proc/$pid/environ)\" ]; do sleep 0.01; done; echo hi")
    out = box.call("run", {"command": cmd, "timeout": 20})
    assert out.startswith("exit=0\nstdout:\nhi\n")
    assert settles_dead(root / "esc.pid")


# A daemon that leaves the session, clears its environment (no LOKI_RUN_ID) and lets go
# of the output pipes: only the launcher, its subreaper, can still find it.
_ESCAPEE = ("setsid env -i /bin/sh -c 'echo $$ $(readlink /proc/self/ns/pid) > esc.pid; "
            "exec sleep 300' "
            "</dev/null >/dev/null 2>&1 & while [ ! -s esc.pid ]; do sleep 0.01; done; ")


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_a_daemon_without_marker_or_pipes_dies_with_the_command(root: Path, sandbox: str) -> None:
    box = filesystem_toolbox(root, sandbox=sandbox)  # type: ignore[arg-type]
    out = box.call("run", {"command": _ESCAPEE + "echo started; exit 3", "timeout": 20})
    assert out.startswith("exit=3\nstdout:\nstarted\n")
    assert settles_dead(root / "esc.pid")


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_a_daemon_without_marker_or_pipes_dies_on_timeout(root: Path, sandbox: str) -> None:
    box = filesystem_toolbox(root, sandbox=sandbox)  # type: ignore[arg-type]
    out = box.call("run", {"command": _ESCAPEE + "echo started; sleep 300", "timeout": 1})
    assert out.startswith("exit=timeout (killed after 1s") and "started" in out
    assert settles_dead(root / "esc.pid")


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_signals_and_pipes_behave_as_without_the_launcher(root: Path, sandbox: str) -> None:
    box = filesystem_toolbox(root, sandbox=sandbox)  # type: ignore[arg-type]
    assert box.call("run", {"command": "kill -9 $$"}).startswith("exit=-9\n")
    assert box.call("run_python", {"code": "import os; os.abort()"}).startswith("exit=-6\n")
    assert not list(root.iterdir())  # the launcher re-raised SIGABRT without a core file
    # SIGPIPE is back to its default: `yes` dies quietly instead of reporting EPIPE.
    assert box.call("run", {"command": "yes | head -1"}) == "exit=0\nstdout:\ny\n\nstderr:\n"


@pytest.mark.skipif(sys.platform != "linux", reason="without the launcher $PPID is pytest")
def test_only_the_agent_can_stop_the_launcher(root: Path) -> None:
    """A command that signals its parent (`kill 0`, `kill $PPID`) does not end the run."""
    box = filesystem_toolbox(root, sandbox="off")
    out = box.call("run", {"command": "kill -TERM $PPID; sleep 0.2; echo still here"})
    assert out == "exit=0\nstdout:\nstill here\n\nstderr:\n"
