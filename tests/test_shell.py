"""run and run_python with real subprocesses: exit codes, timeouts, floods, stdin."""

from __future__ import annotations

import os
import time
from pathlib import Path

from yggdrasil.loki.tools import Toolbox


def test_run_reports_exit_and_streams(root: Path, box: Toolbox) -> None:
    out = box.call("run", {"command": "echo out; echo err >&2; exit 3"})
    assert out == "exit=3\nstdout:\nout\n\nstderr:\nerr\n"


def test_run_happens_in_the_root(root: Path, box: Toolbox) -> None:
    assert box.call("run", {"command": "pwd"}).splitlines()[2] == str(root.resolve())


def test_stdin_is_closed(box: Toolbox) -> None:
    out = box.call("run", {"command": "cat; echo done", "timeout": 10})
    assert out.startswith("exit=0") and "done" in out


def test_timeout_kills_the_whole_tree(root: Path, box: Toolbox) -> None:
    pidfile = root / "grandchild.pid"
    start = time.monotonic()
    out = box.call("run", {"command": f"sleep 300 & echo $! > {pidfile}; echo started; wait",
                           "timeout": 1})
    assert time.monotonic() - start < 30
    assert out.startswith("exit=timeout (killed after 1s") and "started" in out
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_output_flood_is_bounded(box: Toolbox) -> None:
    out = box.call("run", {"command": "head -c 50000000 /dev/zero | tr '\\0' 'a'; echo END"})
    assert out.startswith("exit=0") and len(out) < 40_000
    assert "of output cut from the middle" in out and out.endswith("END\n\nstderr:\n")


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
