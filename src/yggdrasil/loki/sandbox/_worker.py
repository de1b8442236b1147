"""A long-lived, fenced, limited worker process for parsing untrusted input.

A crafted file can crash a parser (a segfault in polars), make it allocate without end
(calamine asked for 512 GiB by a 1.5 KB workbook) or spin. Run in the agent, that takes
the agent down, and with it the run's undo state. :class:`FencedWorker` runs such code
in one child process per owner, started on first use and kept for the next calls:

- Landlock (``_landlock.restrict_reads``, where the kernel has it): it reads only the
  given folders (the root) plus what the interpreter needs, writes nowhere, has no TCP,
  cannot signal out of its fence; it has no capabilities and no secrets in its
  environment. Without Landlock it is still a separate process with the same limits.
- Limits: data memory (RLIMIT_DATA: heap and anonymous maps, not the files polars maps),
  CPU per call (RLIMIT_CPU), wall time per call (killed by us).
- A crash, a signal or a limit raises :class:`WorkerFailed` with a phrase saying which
  (``it needed more than 2 GiB of memory (the table worker's limit)``); the next call
  starts a new worker. The caller's own state is untouched.

Requests and replies are JSON over a UNIX socket pair; files travel as descriptors
(SCM_RIGHTS), opened and checked by the caller.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from yggdrasil.io import human_size

from ._cancel import current_cancel
from ._env import scrubbed
from ._imports import guarded_roots
from ._landlock import landlock_status
from ._readonly import interpreter_paths

_CANCEL_CHECK = 0.1  # seconds between looks at the call's cancel event
_HEADER = struct.Struct("!I")
MAX_REPLY = 64 * 2**20  # a reply larger than this is a worker gone wrong
_START_SECONDS = 60.0  # importing polars on a cold, busy machine
_STDERR_KEEP = 4096


class WorkerFailed(Exception):
    """The worker died or hit a limit; ``str()`` says which, as a phrase."""


@dataclass(frozen=True)
class WorkerLimits:
    memory: int = 2 * 2**30  # bytes of data memory (RLIMIT_DATA)
    cpu_seconds: int = 60  # per call
    wall_seconds: float = 120.0  # per call


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class FencedWorker:
    """One child process running ``handler`` (a module name), fenced to read ``readable``.

    ``call(op, args, fds)`` runs ``handler.op(fds, **args)`` in the child and returns
    its JSON reply (``{"ok": ...}`` or ``{"error": message}``); it raises WorkerFailed
    when the child crashed or hit a limit (the next call starts a new one).
    """

    def __init__(self, handler: str, readable: Sequence[str], *, name: str = "worker",
                 limits: WorkerLimits | None = None, sandbox: bool = True) -> None:
        self.handler, self.readable, self.name = handler, list(readable), name
        self.limits = limits or WorkerLimits()
        self.abi = landlock_status().abi if sandbox else 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._stderr: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # -- status -----------------------------------------------------------------------------

    def status(self) -> str:
        limits = (f"{_gib(self.limits.memory)} of memory, {self.limits.cpu_seconds} s "
                  f"of CPU and {self.limits.wall_seconds:g} s per call")
        if self.abi:
            return (f"fenced by Landlock (ABI {self.abi}): it reads only the root and the "
                    f"Python installation, writes nowhere, has no network; {limits}")
        why = str(landlock_status()) if landlock_status().abi == 0 else "sandbox off"
        return f"NOT fenced ({why}): a separate process that can read what you can; {limits}"

    def pid(self) -> int | None:
        """The worker's process id while it runs (None before the first call)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    # -- calls ------------------------------------------------------------------------------

    def call(self, op: str, args: dict[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        with self._lock:
            sock = self._ensure()
            try:
                self._clear_stderr()
                socket.send_fds(sock, [self._frame({"op": op, "args": args})], list(fds))
                reply = self._read_reply(sock, self.limits.wall_seconds)
            except (OSError, ValueError) as exc:
                raise self._failed(exc) from None
            if reply.get("limit") == "memory":
                self._stop()
                raise WorkerFailed(self._memory_phrase())
            return reply

    def close(self) -> None:
        with self._lock:
            self._stop()

    # -- the process --------------------------------------------------------------------------

    def _ensure(self) -> socket.socket:
        sock = self._sock
        alive = self._proc is not None and self._proc.poll() is None and sock is not None
        # An idle worker never writes: a readable socket means it hung up (it died).
        if alive and sock is not None and not select.select([sock], [], [], 0)[0]:
            return sock
        self._stop()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the worker)
        config = self._config(child.fileno())
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker_main.py")
        env, _ = scrubbed(os.environ, {"RUST_BACKTRACE": "0", "PYTHONDONTWRITEBYTECODE": "1"})
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", script, json.dumps(config)], pass_fds=[child.fileno()],
                stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr,
                start_new_session=True, env=env, cwd="/")
        finally:
            child.close()
        self._sock = parent
        self._finalizer = weakref.finalize(self, _kill, self._proc, parent)
        try:
            if self._read_reply(parent, _START_SECONDS).get("ready") is not True:
                raise ValueError("no ready message")
        except (OSError, ValueError) as exc:
            lines = self._stderr_tail().splitlines()
            detail = lines[-1] if lines else str(exc)
            self._stop()
            raise WorkerFailed(f"the {self.name} could not start: {detail}") from None
        return parent

    def _config(self, fd: int) -> dict[str, Any]:
        # This very package first (its source may sit outside site-packages), then the
        # parent's absolute import folders; never '' (the working folder: maybe the root).
        own = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))))
        found = (os.path.abspath(p) for p in sys.path if p)
        path = list(dict.fromkeys([own, *(p for p in found if not _holds_home(p))]))
        system = interpreter_paths(path)
        guard = sorted({*guarded_roots(), *(os.path.realpath(p) for p in self.readable)})
        return {"fd": fd, "path": path, "guard": guard, "handler": self.handler, "abi": self.abi,
                "read": self.readable, "exec": system,
                "memory": self.limits.memory, "cpu": self.limits.cpu_seconds}

    def _stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._proc, self._sock = None, None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # -- framing ------------------------------------------------------------------------------

    @staticmethod
    def _frame(message: dict[str, Any]) -> bytes:
        body = json.dumps(message).encode()
        return _HEADER.pack(len(body)) + body

    def _read_reply(self, sock: socket.socket, timeout: float) -> dict[str, Any]:
        _await_reply(sock, timeout)
        sock.settimeout(timeout)
        (size,) = _HEADER.unpack(self._read_exactly(sock, _HEADER.size))
        if size > MAX_REPLY:
            raise ValueError(f"a reply of {size} bytes")
        reply = json.loads(self._read_exactly(sock, size))
        if not isinstance(reply, dict):
            raise ValueError("a reply that is not an object")
        return reply

    @staticmethod
    def _read_exactly(sock: socket.socket, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = sock.recv(min(n - got, 1 << 20))
            if not chunk:
                raise ConnectionResetError("the worker closed its socket")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    # -- what went wrong ----------------------------------------------------------------------

    def _failed(self, exc: BaseException) -> WorkerFailed:
        proc = self._proc
        timed_out = isinstance(exc, TimeoutError)
        if proc is not None and (timed_out or isinstance(exc, _Cancelled)):
            _kill(proc, None)
        if isinstance(exc, _Cancelled):
            self._stop()  # the next call starts a fresh worker
            return WorkerFailed(f"it was cancelled (the {self.name} was stopped)")
        code = None
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = proc.wait(5)
        err = self._stderr_tail()
        self._stop()
        if timed_out:
            return WorkerFailed(f"it took more than {self.limits.wall_seconds:g} s "
                                f"(the {self.name}'s time limit)")
        return WorkerFailed(self._phrase(code, err))

    def _phrase(self, code: int | None, err: str) -> str:
        low = err.lower()
        if code == -signal.SIGXCPU:
            return (f"it used more than {self.limits.cpu_seconds} s of CPU "
                    f"(the {self.name}'s limit)")
        if any(m in low for m in ("memory allocation of", "out of memory", "memoryerror",
                                  "cannot allocate memory", "bad_alloc")):
            return self._memory_phrase()
        if "overflowed its stack" in low or "stack overflow" in low:
            return (f"the parser overflowed its stack (the input is nested too deeply) "
                    f"and the {self.name} crashed")
        if code is not None and code < 0:
            return f"the parser crashed ({_signal_name(-code)}) and the {self.name} stopped"
        detail = f" ({err.splitlines()[-1][:200]})" if err.strip() else ""
        return f"the {self.name} stopped unexpectedly (exit code {code}){detail}"

    def _memory_phrase(self) -> str:
        return (f"it needed more than {_gib(self.limits.memory)} of memory "
                f"(the {self.name}'s limit)")

    def _clear_stderr(self) -> None:
        """Start each call with an empty stderr file (the child shares its offset)."""
        if self._stderr is not None:
            self._stderr.seek(0)
            self._stderr.truncate(0)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            size = os.fstat(self._stderr.fileno()).st_size
            self._stderr.seek(max(0, size - _STDERR_KEEP))
            return self._stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""


def _gib(size: int) -> str:
    return f"{size / 2**30:g} GiB" if size >= 2**30 else human_size(size)


def _holds_home(path: str) -> bool:
    """True for the home folder or a folder above it: never opened to the worker whole."""
    home = os.path.realpath(os.path.expanduser("~"))
    real = os.path.realpath(path)
    return real == "/" or home == real or home.startswith(real.rstrip("/") + "/")


def _kill(proc: subprocess.Popen[bytes], sock: socket.socket | None) -> None:
    """End the worker (its whole session: it starts nothing, but be sure) and reap it."""
    if sock is not None:
        sock.close()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


class _Cancelled(OSError):
    """The call's cancel event was set while the worker was still working."""


def _await_reply(sock: socket.socket, timeout: float) -> None:
    """Wait until the worker starts to answer, checking the call's cancel event (the toolbox
    cancels calls on request, and everything when it closes); TimeoutError past ``timeout``."""
    event = current_cancel()
    deadline = time.monotonic() + timeout
    while not select.select([sock], [], [], max(0.0, min(_CANCEL_CHECK,
                                                        deadline - time.monotonic())))[0]:
        if event is not None and event.is_set():
            raise _Cancelled("cancelled")
        if time.monotonic() >= deadline:
            raise TimeoutError("no reply in time")
