"""Subprocesses: each in its own session, bounded output, killed whole when it is over.

A command runs in a new session with stdin at EOF. When it exits or runs out of time,
everything it started is killed: its process group, every process still in its session
(a child that moved to another process group keeps the session), and every process that
started after it and still carries its run id in its environment (a daemon that left the
session with setsid usually keeps its environment); and if the output pipes are still
held open after that, whoever holds them. Commands run through the launcher
(``reaped=True``) are covered first by its reaper, which kills every descendant, escapees
that left the session and cleared their environment included. Output is kept as head and
tail of each stream, so a flood costs a fixed amount of memory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from io import BufferedReader
from typing import IO

from yggdrasil.io import human_size

from ..errors import ToolError
from ._cancel import current_cancel

HEAD_BYTES = 16_384  # of each stream, kept from the start
TAIL_BYTES = 16_384  # of each stream, kept from the end
RUN_ID = "LOKI_RUN_ID"  # environment variable that marks a command's processes
_READ = 1 << 20
_PIPE_SIZE = 1 << 20  # fewer wake-ups under a flood (F_SETPIPE_SZ; best effort)
_F_SETPIPE_SZ = 1031
_SETTLE = 0.25  # seconds for the pipes to drain once the tree is dead
_GRACE = 2.0  # seconds a stream may stay open after its last known holder was killed
_KILL_ROUNDS = 50
_REAP_GRACE = 1.0  # seconds the launcher gets to kill its subtree on timeout
_CANCEL_CHECK = 0.05  # seconds between looks at the cancel event while waiting


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
            self.tail += chunk[-TAIL_BYTES:]
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
    held_open: bool = False  # a process that escaped the kill still holds stdout/stderr
    cancelled: bool = False  # stopped through its cancel event (see ``_cancel``)

    def observation(self) -> str:
        if self.cancelled:
            first = ("exit=cancelled (stopped on request with its whole process tree; "
                     "partial output below)")
        elif self.timed_out:
            first = (f"exit=timeout (killed after {self.timeout:g}s with its whole process "
                     "tree; partial output below)")
        else:
            first = f"exit={self.exit_code}"
        text = f"{first}\nstdout:\n{self.stdout.text()}\nstderr:\n{self.stderr.text()}"
        if self.held_open:
            text += ("" if text.endswith("\n") else "\n") + (
                "[a background process that left the session still holds the output open; "
                "output after this point is not shown]\n")
        return text


# -- killing a whole tree -----------------------------------------------------------------


def _stat_fields(pid: str) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (state first); None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def _start_time(pid: int) -> int:
    fields = _stat_fields(str(pid))
    return int(fields[19]) if fields else 0


def _carries(pid: str, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return marker in fh.read().split(b"\0")
    except OSError:
        return False


def _leftovers(session: int, marker: bytes, since: int) -> Iterator[int]:
    """Live processes in ``session``, or started since ``since`` and carrying ``marker``."""
    me = str(os.getpid())
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit() and p != me]
    except OSError:
        return  # no /proc (not Linux): the process group kill is all we can do
    for pid in pids:
        fields = _stat_fields(pid)
        if not fields or fields[0] in ("Z", "X"):
            continue
        if int(fields[3]) == session or (int(fields[19]) >= since and _carries(pid, marker)):
            yield int(pid)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def kill_tree(leader: int, marker: bytes, since: int) -> None:
    """Kill the process group and session led by ``leader`` and its marked escapees."""
    kill_group(leader)
    for _ in range(_KILL_ROUNDS):  # repeat: a process may fork while we scan
        found = list(_leftovers(leader, marker, since))
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def kill_pipe_holders(links: set[str]) -> None:
    """Kill every other process holding one of these pipes (``pipe:[inode]`` links)."""
    me = str(os.getpid())
    with contextlib.suppress(OSError):
        for pid in [p for p in os.listdir("/proc") if p.isdigit() and p != me]:
            with contextlib.suppress(OSError):
                fds = os.listdir(f"/proc/{pid}/fd")
                if any(_link(f"/proc/{pid}/fd/{fd}") in links for fd in fds):
                    os.kill(int(pid), signal.SIGKILL)


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


# -- running ------------------------------------------------------------------------------


def _widen(stream: IO[bytes]) -> None:
    with contextlib.suppress(OSError):
        fcntl.fcntl(stream.fileno(), _F_SETPIPE_SZ, _PIPE_SIZE)


def _start(argv: Sequence[str], cwd: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    if not os.path.isdir(cwd):
        raise ToolError(f"working folder {cwd} does not exist (was the root removed?)")
    try:
        return subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc


def run_process(
    argv: Sequence[str], *, cwd: str, timeout: float, env: Mapping[str, str] | None = None,
    reaped: bool = False, cancel: threading.Event | None = None,
) -> Completed:
    """Run ``argv`` in a new session with stdin at EOF; never raises for the command's faults.

    ``cancel`` (default: the event of the enclosing ``cancel_scope``), once set, stops the
    command as a timeout does, and the result says ``exit=cancelled``.

    ``reaped``: ``argv`` is the launcher (``_landlock``/``_reaper``), which on SIGTERM kills
    the command's whole subtree, escapees included, and exits; on timeout it gets
    ``_REAP_GRACE`` seconds to do so before everything is SIGKILLed.
    Raises ToolError only when the command cannot start (missing program or folder).
    """
    run_id = secrets.token_hex(8)
    full_env = {**(os.environ if env is None else env), RUN_ID: run_id}
    proc = _start(argv, cwd, full_env)
    since = _start_time(proc.pid)
    out, err = Capture(), Capture()
    assert proc.stdout is not None and proc.stderr is not None
    streams = [(proc.stdout, out), (proc.stderr, err)]
    for stream, _ in streams:
        _widen(stream)
    pipes = {f"pipe:[{os.fstat(stream.fileno()).st_ino}]" for stream, _ in streams}
    pumps = [threading.Thread(target=_pump, args=pair, daemon=True) for pair in streams]
    for t in pumps:
        t.start()
    cancel = cancel if cancel is not None else current_cancel()
    timed_out = cancelled = False
    try:
        finished = _wait(proc, timeout, cancel)
        cancelled = not finished and cancel is not None and cancel.is_set()
        timed_out = not finished and not cancelled
        if not finished and reaped:
            _stop_reaper(proc)
    finally:
        # The command is over (or out of time): nothing it started may outlive it.
        kill_tree(proc.pid, f"{RUN_ID}={run_id}".encode(), since)
        proc.wait()
    _join(pumps, _SETTLE)
    if any(t.is_alive() for t in pumps):  # an escapee without our marker holds the output
        kill_pipe_holders(pipes)
        _join(pumps, _GRACE)
    held = any(t.is_alive() for t in pumps)
    return Completed(proc.returncode, out, err, timed_out, timeout, held, cancelled)


def _wait(proc: subprocess.Popen[bytes], timeout: float,
          cancel: threading.Event | None = None) -> bool:
    """Wait for ``proc`` to exit; False on timeout or once ``cancel`` is set.

    Popen.wait(timeout) polls with sleeps that double up to 50 ms, which adds ~15 ms to a
    20 ms command; a pidfd wakes at once. With a cancel event the wait wakes every
    ``_CANCEL_CHECK`` seconds to look at it."""
    deadline = time.monotonic() + timeout
    step = _CANCEL_CHECK if cancel is not None else timeout
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux 5.3+: Popen's polling
        while not (cancel is not None and cancel.is_set()):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                proc.wait(min(left, step))
                return True
            except subprocess.TimeoutExpired:
                continue
        return False
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while proc.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0 or (cancel is not None and cancel.is_set()):
                return False
            poller.poll(min(left, step) * 1000)
        return True
    finally:
        os.close(pidfd)


def _stop_reaper(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(_REAP_GRACE)


def _join(threads: list[threading.Thread], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
