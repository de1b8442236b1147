"""Subprocesses: each in its own session, bounded output, killed whole when it is over.

A command runs in a new session with stdin at EOF (a background job: stdin a pipe the
agent writes, output pumped into the job's own buffers). When it exits or runs out of time,
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from io import BufferedReader
from typing import IO, Protocol

from ..errors import ToolError
from ._cancel import current_cancel
from ._kill import kill_pipe_holders, kill_tree, signal_command, start_time
from ._warm_client import WarmLauncher, WarmProcess

HEAD_BYTES = 16_384  # of each stream, kept from the start
TAIL_BYTES = 16_384  # of each stream, kept from the end
RUN_ID = "LOKI_RUN_ID"  # environment variable that marks a command's processes
_READ = 1 << 20
_PIPE_SIZE = 1 << 20  # fewer wake-ups under a flood (F_SETPIPE_SZ; best effort)
_F_SETPIPE_SZ = 1031
_SETTLE = 0.25  # seconds for the pipes to drain once the tree is dead
_GRACE = 2.0  # seconds a stream may stay open after its last known holder was killed
_REAP_GRACE = 1.0  # seconds the launcher gets to kill its subtree on timeout
_CANCEL_CHECK = 0.05  # seconds between looks at the cancel event while waiting


class Overflow(Protocol):
    """Where the whole of a stream goes once it outgrows its head (a spill file)."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def discard(self) -> None: ...


class Capture:
    """Keeps the first and last bytes of a stream and counts the rest: bounded memory.

    ``spill``: makes an ``Overflow`` when the stream outgrows its head; the whole stream
    goes there from then on (head included), so nothing cut is lost. ``settle()`` keeps
    it when bytes were cut, else removes it."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES,
                 spill: Callable[[], Overflow | None] | None = None) -> None:
        self.head_size, self.tail_size = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._make_spill = spill
        self.spill: Overflow | None = None
        self._settled: tuple[Overflow | None] | None = None

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_size - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and (self.spill is not None or self._make_spill is not None):
            self._overflow(chunk)
        if chunk and self.tail_size:
            self.tail += chunk[-self.tail_size :]
            del self.tail[: -self.tail_size]

    def _overflow(self, rest: bytes) -> None:
        if self.spill is None:
            make, self._make_spill = self._make_spill, None  # one try
            self.spill = make() if make is not None else None
            if self.spill is None:
                return
            self.spill.write(bytes(self.head))
        self.spill.write(rest)

    def settle(self) -> Overflow | None:
        """The spill, closed, when bytes were cut (None otherwise: it is removed); the
        stream has ended. Asked again, the same answer."""
        if self._settled is not None:
            return self._settled[0]
        spill, self.spill, self._make_spill = self.spill, None, None
        if spill is not None and self.cut <= 0:
            spill.discard()
            spill = None
        elif spill is not None:
            spill.close()
        self._settled = (spill,)
        return spill

    @property
    def cut(self) -> int:
        """Bytes dropped from the middle."""
        return self.total - len(self.head) - len(self.tail)

    def decoded(self) -> tuple[str, str]:
        """(head, tail), decoded; apart when bytes were cut between them (``cut``)."""
        return self.head.decode("utf-8", "replace"), self.tail.decode("utf-8", "replace")


class Sink(Protocol):
    """Where a stream's bytes go as they arrive (a Capture, a job's buffer)."""

    def feed(self, chunk: bytes) -> None: ...


def _pump(stream: BufferedReader, sink: Sink) -> None:
    with stream:
        for chunk in iter(lambda: stream.read1(_READ), b""):
            sink.feed(chunk)


@dataclass
class Completed:
    exit_code: int | None
    stdout: Capture
    stderr: Capture
    timed_out: bool = False
    timeout: float = 0.0
    held_open: bool = False  # a process that escaped the kill still holds stdout/stderr
    cancelled: bool = False  # stopped through its cancel event (see ``_cancel``)


# -- running ------------------------------------------------------------------------------


def _widen(stream: IO[bytes]) -> None:
    with contextlib.suppress(OSError):
        fcntl.fcntl(stream.fileno(), _F_SETPIPE_SZ, _PIPE_SIZE)


def _start(argv: Sequence[str], cwd: str, env: dict[str, str], stdin: bool,
           warm: WarmLauncher | None = None) -> subprocess.Popen[bytes] | WarmProcess:
    if not os.path.isdir(cwd):
        raise ToolError(f"working folder {cwd} does not exist (was the root removed?)")
    started = warm.start(argv, cwd=cwd, env=env, stdin=stdin) if warm is not None else None
    if started is not None:
        return started
    try:
        return subprocess.Popen(
            list(argv), cwd=cwd, env=env,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc


class Process:
    """One started command: its output pumped into sinks as it comes, and the means to
    ask it to stop (:meth:`signal`) and to kill all it left (:meth:`finish`).

    ``reaped``: ``argv`` is the launcher (``_landlock``/``_reaper``), which on SIGTERM kills
    the command's whole subtree, escapees included, and exits. ``stdin``: a pipe the
    caller writes (non-blocking, see :meth:`write_input`) instead of stdin at EOF.
    ``warm``: the launcher argv is run by this warm launcher (``_warm``) when it can be,
    which saves the launcher's Python start; the fence is the same. ``contained``: the
    launcher runs the command in a PID namespace of its own (``--ns``): once the launcher
    has ended by itself, the kernel has killed every process of that namespace (its PID 1
    exited first), so the sweep of /proc for leftovers, which costs a read per process
    on the machine, is skipped then (it still runs after a stop or a timeout).
    Raises ToolError only when the command cannot start (missing program or folder).
    """

    def __init__(self, argv: Sequence[str], *, cwd: str, stdout: Sink, stderr: Sink,
                 env: Mapping[str, str] | None = None, reaped: bool = False,
                 stdin: bool = False, warm: WarmLauncher | None = None,
                 contained: bool = False) -> None:
        self.run_id = secrets.token_hex(8)
        self.reaped = reaped
        self.contained = contained and reaped
        full_env = {**(os.environ if env is None else env), RUN_ID: self.run_id}
        self.popen = proc = _start(argv, cwd, full_env, stdin, warm if reaped else None)
        self.since = start_time(proc.pid)
        self.stdout, self.stderr = stdout, stderr
        assert proc.stdout is not None and proc.stderr is not None
        streams = [(proc.stdout, self.stdout), (proc.stderr, self.stderr)]
        for stream, _ in streams:
            _widen(stream)
        if proc.stdin is not None:
            _widen(proc.stdin)
            os.set_blocking(proc.stdin.fileno(), False)
        self._pipes = {f"pipe:[{os.fstat(s.fileno()).st_ino}]" for s, _ in streams}
        self._pumps = [threading.Thread(target=_pump, args=pair, daemon=True)
                       for pair in streams]
        for t in self._pumps:
            t.start()

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def wait(self, timeout: float, cancel: threading.Event | None = None) -> bool:
        """True once the command (the launcher) exited; False on timeout or ``cancel``."""
        return _wait(self.popen, timeout, cancel)

    def signal(self, sig: int) -> int:
        """Send ``sig`` to the command's processes (never to the launcher); how many."""
        return signal_command(self.pid, sig, reaped=self.reaped)

    def write_input(self, data: bytes, seconds: float) -> int:
        """Write ``data`` to the command's stdin, waiting at most ``seconds`` for room;
        the number of bytes written. Raises BrokenPipeError once nobody reads it."""
        pipe = self.popen.stdin
        assert pipe is not None, "started without stdin=True"
        room = select.poll()  # not select(): the agent may hold more than 1024 descriptors
        room.register(pipe.fileno(), select.POLLOUT)
        deadline, done = time.monotonic() + seconds, 0
        while done < len(data):
            try:
                done += os.write(pipe.fileno(), data[done : done + _PIPE_SIZE])
                continue
            except BlockingIOError:
                pass
            left = deadline - time.monotonic()
            if left <= 0 or self.popen.poll() is not None:
                break
            room.poll(min(left, _CANCEL_CHECK) * 1000)
        return done

    def close_input(self) -> None:
        if self.popen.stdin is not None:
            with contextlib.suppress(OSError):
                self.popen.stdin.close()

    def finish(self, *, stop: bool) -> bool:
        """Kill everything the command left (``stop``: it is still running, so ask the
        launcher first) and collect the rest of its output; True when a process that
        escaped every kill still holds the output open."""
        try:
            if stop and self.reaped:
                _stop_reaper(self.popen)
        finally:
            # The command is over (or out of time): nothing it started may outlive it.
            ended = (self.contained and not stop and self.popen.returncode is not None
                     and getattr(self.popen, "reported", True))  # the launcher said so
            kill_tree(self.pid, f"{RUN_ID}={self.run_id}".encode(), self.since,
                      sweep=not ended)
            self.popen.wait()
            self.close_input()
        _join(self._pumps, _SETTLE)
        if any(t.is_alive() for t in self._pumps):  # an escapee without our marker
            kill_pipe_holders(self._pipes)
            _join(self._pumps, _GRACE)
        return any(t.is_alive() for t in self._pumps)


def run_process(
    argv: Sequence[str], *, cwd: str, timeout: float, env: Mapping[str, str] | None = None,
    reaped: bool = False, cancel: threading.Event | None = None,
    spill: Callable[[], Overflow | None] | None = None, warm: WarmLauncher | None = None,
    contained: bool = False,
) -> Completed:
    """Run ``argv`` in a new session with stdin at EOF; never raises for the command's faults.

    ``cancel`` (default: the event of the enclosing ``cancel_scope``), once set, stops the
    command as a timeout does, and the result says ``exit=cancelled``. ``spill``: makes
    where a stream that outgrows its head is kept whole (see ``Capture``).

    ``reaped``: see :class:`Process`; on timeout the launcher gets ``_REAP_GRACE`` seconds
    to kill the command's subtree before everything is SIGKILLed; ``warm``, ``contained``:
    see :class:`Process`.
    Raises ToolError only when the command cannot start (missing program or folder).
    """
    out, err = Capture(spill=spill), Capture(spill=spill)
    proc = Process(argv, cwd=cwd, env=env, reaped=reaped, stdout=out, stderr=err, warm=warm,
                   contained=contained)
    cancel = cancel if cancel is not None else current_cancel()
    finished = timed_out = cancelled = False
    waited = False
    try:
        finished = proc.wait(timeout, cancel)
        waited = True
        cancelled = not finished and cancel is not None and cancel.is_set()
        timed_out = not finished and not cancelled
    finally:
        held = proc.finish(stop=waited and not finished)
    return Completed(proc.returncode, out, err, timed_out, timeout, held, cancelled)


def _wait(proc: subprocess.Popen[bytes] | WarmProcess, timeout: float,
          cancel: threading.Event | None = None) -> bool:
    """Wait for ``proc`` to exit; False on timeout or once ``cancel`` is set.

    Popen.wait(timeout) polls with sleeps that double up to 50 ms, which adds ~15 ms to a
    20 ms command; a pidfd wakes at once. With a cancel event the wait wakes every
    ``_CANCEL_CHECK`` seconds to look at it."""
    deadline = time.monotonic() + timeout
    step = _CANCEL_CHECK if cancel is not None else timeout
    if isinstance(proc, WarmProcess):  # its status arrives on a socket
        while proc.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0 or (cancel is not None and cancel.is_set()):
                return False
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(min(left, step))
        return True
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


def _stop_reaper(proc: subprocess.Popen[bytes] | WarmProcess) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(_REAP_GRACE)


def _join(threads: list[threading.Thread], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
