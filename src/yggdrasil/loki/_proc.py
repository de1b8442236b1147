"""Subprocesses: each in its own session, bounded output, killed whole on timeout."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from io import BufferedReader

from ._observe import human_size
from ._root import Root
from .errors import ToolError

HEAD_BYTES = 16_384  # of each stream, kept from the start
TAIL_BYTES = 16_384  # of each stream, kept from the end
_READ = 65_536
_GRACE = 2.0  # seconds a stream may stay open after its process has exited


class Capture:
    """Keeps the first and last bytes of a stream and counts the rest: bounded memory."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[:-TAIL_BYTES]

    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if cut <= 0:
            return head + tail
        return f"{head}\n[... {human_size(cut)} of output cut from the middle ...]\n{tail}"


def _pump(stream: BufferedReader, capture: Capture) -> None:
    with stream:
        for chunk in iter(lambda: stream.read1(_READ), b""):
            capture.feed(chunk)


@dataclass
class Completed:
    exit_code: int | None
    stdout: Capture
    stderr: Capture
    timed_out: bool = False
    timeout: float = 0.0

    def observation(self) -> str:
        if self.timed_out:
            first = (f"exit=timeout (killed after {self.timeout:g}s with its whole process "
                     "tree; partial output below)")
        else:
            first = f"exit={self.exit_code}"
        return f"{first}\nstdout:\n{self.stdout.text()}\nstderr:\n{self.stderr.text()}"


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_process(
    argv: Sequence[str], *, cwd: str, timeout: float, env: Mapping[str, str] | None = None
) -> Completed:
    """Run ``argv`` in a new session with stdin closed; never raises for the command's faults."""
    try:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise ToolError(f"cannot start {argv[0]!r}: {exc.strerror}") from exc
    out, err = Capture(), Capture()
    assert proc.stdout is not None and proc.stderr is not None
    streams = [(proc.stdout, out), (proc.stderr, err)]
    pumps = [threading.Thread(target=_pump, args=pair, daemon=True) for pair in streams]
    for t in pumps:
        t.start()
    timed_out = False
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # The command is over (or out of time): nothing it started may outlive it.
        kill_group(proc.pid)
        proc.wait()
    for t in pumps:
        t.join(_GRACE)
    return Completed(proc.returncode, out, err, timed_out, timeout)


@dataclass
class Shell:
    """run and run_python, in the root."""

    root: Root
    env: Mapping[str, str] | None = None
    shell: str = field(default_factory=lambda: shutil.which("bash") or "/bin/sh")

    def _timeout(self, timeout: float) -> float:
        if not 0 < timeout <= 3600:
            raise ToolError("timeout is in seconds, more than 0 and at most 3600")
        return timeout

    def run(self, command: str, timeout: float = 60) -> str:
        if not command.strip():
            raise ToolError("command is empty; give a shell command to run in the root")
        done = run_process([self.shell, "-c", command], cwd=str(self.root.path),
                           timeout=self._timeout(timeout), env=self.env)
        return done.observation()

    def run_python(self, code: str, timeout: float = 60) -> str:
        timeout = self._timeout(timeout)
        with tempfile.TemporaryDirectory(prefix="loki-py-") as scratch:
            script = os.path.join(scratch, "snippet.py")
            with open(script, "w", encoding="utf-8") as fh:
                fh.write(code)
            env = dict(self.env if self.env is not None else os.environ)
            paths = [str(self.root.path / "src"), str(self.root.path)]
            if env.get("PYTHONPATH"):
                paths.append(env["PYTHONPATH"])
            env["PYTHONPATH"] = os.pathsep.join(paths)
            done = run_process([sys.executable, script], cwd=str(self.root.path),
                               timeout=timeout, env=env)
        return done.observation()
