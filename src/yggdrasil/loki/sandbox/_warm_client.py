"""The warm launcher, the toolbox's half: starts it once, hands it each command.

:class:`WarmLauncher` starts ``python -I -S _landlock.py --warm`` (``_warm``) at the
first command and keeps it; :meth:`WarmLauncher.start` runs a cold launcher's argv
(``launcher_argv``) through it and returns a :class:`WarmProcess`, which answers what
``Process`` asks of a ``subprocess.Popen`` (pid, the pipes, poll, wait, send_signal).
The fence is the same code either way; only the Python start is saved. When the warm
launcher cannot be used (not Linux, no pidfd, it died), ``start`` returns None and the
caller starts the cold launcher as before.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
import subprocess
import threading
import weakref
from collections.abc import Mapping, Sequence
from io import BufferedReader, BufferedWriter

from . import _landlock

_LAUNCHER = _landlock.__file__

_INT = struct.Struct("i")
_ANSWER = 30.0  # seconds the warm launcher may take to answer a request (it forks at once)
_KEPT_VARS = ("LANG", "LC_ALL", "LC_CTYPE")  # its file names decode as the agent's do


class WarmProcess:
    """A command's launcher forked by the warm launcher; the part of ``Popen`` that
    ``Process`` uses. ``report``: the socket its wait status arrives on."""

    def __init__(self, pid: int, pidfd: int, report: socket.socket,
                 stdin: BufferedWriter | None, stdout: BufferedReader,
                 stderr: BufferedReader) -> None:
        self.pid, self._pidfd, self._report = pid, pidfd, report
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self.reported = False  # the status came from the warm launcher (not its death)
        self._lock = threading.Lock()

    def fileno(self) -> int:
        """Readable once the launcher has ended (its status is there)."""
        return self._report.fileno()

    def poll(self) -> int | None:
        return self._collect(0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(["loki launcher"], timeout or 0.0)
        return code

    def send_signal(self, sig: int) -> None:
        with self._lock:
            if self.returncode is None:
                signal.pidfd_send_signal(self._pidfd, sig)

    def _collect(self, timeout: float | None) -> int | None:
        if self.returncode is None:  # waited outside the lock: send_signal never waits
            _readable(self._report, timeout)
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            if not _readable(self._report, 0):
                return None
            data = _recv_exactly(self._report, _INT.size)
            if len(data) == _INT.size:
                self.returncode = os.waitstatus_to_exitcode(_INT.unpack(data)[0])
                self.reported = True
            else:  # the warm launcher died under it: the launcher was killed with it
                self.returncode = -signal.SIGKILL
            self._report.close()
            os.close(self._pidfd)
            return self.returncode


class WarmLauncher:
    """One warm launcher process for a toolbox, started at the first :meth:`start`;
    thread-safe. ``close`` lets it go (it exits once its commands have ended).
    ``enabled=False``: never used (every command starts a cold launcher)."""

    def __init__(self, python: str, *, enabled: bool = True) -> None:
        self.python = python
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._broken = not (enabled and hasattr(os, "pidfd_open")
                            and hasattr(signal, "pidfd_send_signal"))
        self._owner = os.getpid()  # a forked agent starts its commands cold (see start)
        self._finalizer: weakref.finalize | None = None

    def start(self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str],
              stdin: bool) -> WarmProcess | None:
        """``argv`` (a cold launcher's, from ``launcher_argv`` with our ``python``) run
        by the warm launcher; None when it cannot be (the caller starts ``argv`` itself)."""
        prefix = [self.python, "-I", "-S", os.path.abspath(_LAUNCHER)]
        if list(argv[:4]) != prefix or self._broken or os.getpid() != self._owner:
            return None  # (a forked agent: the warm launcher obeys only its parent's SIGTERM)
        with self._lock:
            control = self._ensure()
            if control is None:
                return None
            pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(3 if stdin else 2)]
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            null = -1 if stdin else os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            child_in = pipes[2][0] if stdin else null
            given = [theirs.fileno(), child_in, pipes[0][1], pipes[1][1]]
            try:
                control.sendmsg([b"R"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                          struct.pack(f"{len(given)}i", *given))])
            except OSError:
                self._broken = True
                for fd in (*(fd for pair in pipes for fd in pair), *([null] if null >= 0 else [])):
                    os.close(fd)
                mine.close()
                theirs.close()
                return None
            finally:
                theirs.close()
        for fd in (child_in, pipes[0][1], pipes[1][1]):
            os.close(fd)
        mine.settimeout(_ANSWER)
        try:
            pid, pidfd = _receive_pid(mine)
            fields = [cwd, str(len(argv) - 4), *argv[4:],
                      *(f"{k}={v}" for k, v in env.items())]
            payload = b"\0".join(os.fsencode(f) for f in fields)
            mine.sendall(_INT.pack(len(payload)) + payload)
        except (OSError, EOFError):
            for fd in (pipes[0][0], pipes[1][0], *([pipes[2][1]] if stdin else [])):
                os.close(fd)
            mine.close()
            with self._lock:
                self._broken = True
            return None  # nothing ran: the launcher never had its request
        mine.settimeout(None)
        return WarmProcess(pid, pidfd, mine,
                           os.fdopen(pipes[2][1], "wb") if stdin else None,
                           os.fdopen(pipes[0][0], "rb"), os.fdopen(pipes[1][0], "rb"))

    def _ensure(self) -> socket.socket | None:
        if self._control is not None:
            return self._control
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: os.environ[k] for k in _KEPT_VARS if k in os.environ}
        try:
            self._process = subprocess.Popen(
                [self.python, "-I", "-S", os.path.abspath(_LAUNCHER), "--warm"], stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd="/",
                start_new_session=True)
        except OSError:
            self._broken = True
            ours.close()
            return None
        finally:
            theirs.close()
        self._control = ours
        self._finalizer = weakref.finalize(self, _let_go, ours, self._process)
        return ours

    def close(self) -> None:
        """Let the warm launcher go: it takes no more commands and exits when the
        running ones have ended. A later ``start`` starts a new one."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
            self._control, self._process, self._finalizer = None, None, None


def _let_go(control: socket.socket, process: subprocess.Popen[bytes]) -> None:
    control.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(0)  # reaped now if it is done; else by subprocess's own cleanup later


def _readable(sock: socket.socket, timeout: float | None) -> bool:
    """Whether ``sock`` has data (or EOF) within ``timeout`` seconds (None: no limit).
    poll, not select: the agent may hold more than 1024 descriptors."""
    poller = select.poll()
    try:
        poller.register(sock.fileno(), select.POLLIN)
        return bool(poller.poll(None if timeout is None else timeout * 1000))
    except (ValueError, OSError):  # closed by another waiter meanwhile
        return False


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    got = b""
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        if not chunk:
            break
        got += chunk
    return got


def _receive_pid(sock: socket.socket) -> tuple[int, int]:
    data, ancillary, _, _ = sock.recvmsg(_INT.size, socket.CMSG_SPACE(_INT.size))
    fds = [n for level, kind, raw in ancillary
           if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
           for (n,) in struct.iter_unpack("i", raw[: len(raw) - len(raw) % 4])]
    if len(data) != _INT.size or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise EOFError("the warm launcher did not start the command")
    return _INT.unpack(data)[0], fds[0]
