"""The fleet's zygote: one warm interpreter the local backend's workers are forked from.

Starting a worker fresh costs an interpreter and its imports (~2 s of CPU with the openai
SDK); eight slots started at once on two cores race for them. The zygote is started
fresh once (``spawn``, with the driver's ``sys.path``; the caller's script is not re-run),
runs ``prepare`` (the imports), starts no thread, and then forks a worker whenever the
driver asks: each worker gets one end of a pipe whose other end the driver keeps, passed
over the zygote's own pipe (``SCM_RIGHTS``). A worker is the zygote's child, so the
zygote reports how each one ended; the driver holds a pidfd of each, so it signals and
watches the worker itself, never a process that reused its number.

It is the fleet's own, not multiprocessing's process-global fork server: it depends on no
temp folder and ends with the fleet. A zygote that died is replaced at the next fork; the
workers it leaves behind still end when they should, but how is then unknown. When the
driver dies, the zygote ends after its workers (which watch the driver themselves).
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing import reduction
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from ..sandbox import main_not_rerun, running_since

__all__ = ["Worker", "Zygote"]

_GRACE = 5.0  # seconds the zygote gives a straggler at close before SIGKILL


class Zygote:
    """Forks workers that run ``serve(conn)`` after ``prepare()`` ran once (both must be
    picklable: module-level functions, or partials of them). Thread-safe."""

    def __init__(self, prepare: Callable[[], None], serve: Callable[[Connection], None]) -> None:
        self.prepare, self.serve = prepare, serve
        self.lock = threading.Lock()
        self.closed = False
        self._start()

    def fork(self) -> tuple[Worker, Connection]:
        """A new worker and the driver's end of its pipe."""
        with self.lock:
            if self.closed:
                raise OSError("the fleet's zygote is closed: no more workers")
            for again in (True, False):  # a zygote that died is replaced, once
                ours, theirs = multiprocessing.Pipe(duplex=True)
                try:
                    return self._fork(theirs), ours
                except (EOFError, OSError) as exc:
                    ours.close()
                    if not again or isinstance(exc, _ForkFailed):
                        raise OSError(f"cannot start a fleet worker: {exc}") from exc
                    self._restart()
                finally:
                    theirs.close()
        raise AssertionError("unreachable")

    def wait(self, worker: Worker, timeout: float | None) -> int | str | None:
        """How ``worker`` ended (an exit code, -N for signal N), None while it still runs
        after ``timeout`` seconds (None: until it ends), or 'unknown' when this zygote is
        not its parent (an earlier one died)."""
        if worker.parent is self.process:
            try:
                with self.lock:
                    self.conn.send(("wait", worker.pid, timeout))
                    answer: int | str | None = self.conn.recv()
                    return answer
            except (EOFError, OSError):
                pass
        return "unknown"

    def close(self) -> None:
        """Stop the zygote; it waits for, then kills, whatever worker it still has."""
        with self.lock:
            self.closed = True
            with contextlib.suppress(OSError):
                self.conn.send(None)
        self.process.join(_GRACE + 5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()

    # -- the driver's side ----------------------------------------------------------------

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, theirs = ctx.Pipe(duplex=True)
        self.process: BaseProcess = ctx.Process(
            target=_zygote, args=(theirs, self.prepare, self.serve),
            name="loki-fleet zygote", daemon=True)
        with main_not_rerun():
            self.process.start()
        theirs.close()

    def _restart(self) -> None:
        self.conn.close()
        self.process.join(1)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self._start()

    def _fork(self, theirs: Connection) -> Worker:
        self.conn.send(("fork",))
        reduction.send_handle(self.conn, theirs.fileno(), self.process.pid)
        answer = self.conn.recv()
        if answer[0] == "error":
            raise _ForkFailed(answer[1])
        _, pid, has_pidfd = answer
        pidfd = reduction.recv_handle(self.conn) if has_pidfd else None
        return Worker(self, pid, self.process, pidfd)


class _ForkFailed(OSError):
    """The zygote could not fork (out of memory, a process limit): starting another one
    would not help."""


class Worker:
    """A worker forked by a :class:`Zygote`, with the part of multiprocessing.Process's
    interface the local backend uses."""

    def __init__(self, zygote: Zygote, pid: int, parent: BaseProcess, pidfd: int | None) -> None:
        self.zygote, self.pid, self.parent, self.pidfd = zygote, pid, parent, pidfd
        self.exitcode: int | None = None
        self.unknown = False  # it ended, but its zygote died first: nobody knows how

    def is_alive(self) -> bool:
        return self.exitcode is None and not self.unknown

    def join(self, timeout: float | None = None) -> None:
        if not self.is_alive():
            return
        answer = self.zygote.wait(self, timeout)
        if answer == "unknown":
            self.unknown = not self._running(timeout)
        elif isinstance(answer, int):
            self.exitcode = answer
        if not self.is_alive() and self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def kill(self) -> None:
        if not self.is_alive():
            return
        with contextlib.suppress(ProcessLookupError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:  # a kernel without pidfds (before 5.3)
                os.kill(self.pid, signal.SIGKILL)

    def _running(self, timeout: float | None) -> bool:
        """Whether the worker, no longer its zygote's, still runs after ``timeout``."""
        if self.pidfd is not None:  # readable once the process has ended
            poll = select.poll()
            poll.register(self.pidfd, select.POLLIN)
            return not poll.poll(None if timeout is None else max(0, int(timeout * 1000)))
        deadline = None if timeout is None else time.monotonic() + timeout
        while running_since(self.pid):  # '' once it is gone, or a zombie
            if deadline is not None and time.monotonic() >= deadline:
                return True
            time.sleep(0.01)
        return False


# -- the zygote's side ----------------------------------------------------------------------


def _zygote(conn: Connection, prepare: Callable[[], None],
            serve: Callable[[Connection], None]) -> None:
    """Run ``prepare``, then fork a worker per request of the driver and say how each
    ended. It never starts a thread: forking a process that holds a lock in another
    thread hands the child a lock nobody will release."""
    # Ctrl-C reaches the whole process group: the driver handles it (and kills what it
    # must), so neither the zygote nor a worker forked from it dies of it on its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    prepare()
    driver = multiprocessing.parent_process()
    children: set[int] = set()
    watched = [conn] + ([driver.sentinel] if driver is not None else [])
    while True:
        message = None
        if conn in wait(watched):
            with contextlib.suppress(EOFError, OSError):
                message = conn.recv()
        if message is None:  # told to stop, or the driver is gone
            break
        if message[0] == "fork":
            fd = reduction.recv_handle(conn)
            pid = _fork(fd, conn, serve)
            if pid is None:
                continue
            children.add(pid)
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:  # before Linux 5.3
                conn.send(("forked", pid, False))
            else:
                conn.send(("forked", pid, True))
                reduction.send_handle(conn, pidfd, driver.pid if driver else 0)
                os.close(pidfd)
        else:
            _, pid, timeout = message
            answer: int | str | None = "unknown"
            if pid in children:
                with contextlib.suppress(ChildProcessError):  # never, for a child of ours
                    answer = _reap(pid, timeout)
            if answer is not None:
                children.discard(pid)
            conn.send(answer)
    for pid in children:  # the driver stopped its workers first: these are stragglers
        if _reap(pid, _GRACE) is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _reap(pid, None)


def _fork(fd: int, conn: Connection, serve: Callable[[Connection], None]) -> int | None:
    """Fork a worker on ``fd``: its pid, in the zygote (None: said why to the driver)."""
    _flush()  # else what the zygote buffered would be written again by each child
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(fd)
        conn.send(("error", f"fork failed: {exc.strerror or exc}"))
        return None
    if pid == 0:
        conn.close()
        _child(fd, serve)
    os.close(fd)
    return pid


def _child(fd: int, serve: Callable[[Connection], None]) -> None:
    """The worker: ``serve`` its pipe, then exit the process, whatever happens (it must
    never return into the zygote's loop)."""
    code = 1
    try:
        serve(Connection(fd))
        atexit._run_exitfuncs()  # as a spawned worker ending normally would
        code = 0
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        _flush()
        os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()


def _reap(pid: int, timeout: float | None) -> int | None:
    """The exit code of child ``pid`` (-N: signal N), waiting at most ``timeout`` seconds
    (None: until it ends); None when it still runs."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, 0 if deadline is None else os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(0.005)
