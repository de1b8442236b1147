"""The local backend: a warm worker process per slot on this machine, no Ray needed.

Each slot's worker is started once and then runs attempt after attempt, as Ray reuses its
workers: an attempt costs a message, not a process. It sends each result back through its
pipe; a pipe that closes without one means the worker died (killed, crashed), and the
driver says so and starts another for the slot. A worker is retired after :data:`USES`
attempts (whatever a long run leaks goes with it).

Workers are forked from the fleet's own zygote: one interpreter started fresh (``spawn``,
with the driver's ``sys.path``) that imports the agent and the engine's SDK once (~2 s of
CPU with the openai SDK), starts no thread, and forks a worker whenever the driver asks.
Eight slots so cost one import, not eight racing for the cores. The zygote is the
workers' parent: it reports how each one ended. It is the fleet's, not multiprocessing's
process-global fork server, so nothing depends on a temp folder an earlier fleet's caller
may have removed.

The rate gate lives in a manager process every worker reaches over an abstract UNIX
socket (no file: nothing to leave behind, and nothing that depends on a temp folder that
an earlier fleet's caller may have removed). Every process of a fleet is its own: a
second fleet in the same process starts its own. Workers and the manager watch the
driver: when it dies they stop what they started and exit, so killing the driver leaves
nothing running.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import secrets
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing import reduction
from multiprocessing.connection import Connection, wait
from multiprocessing.managers import BaseManager
from typing import Any

from ..sandbox import main_not_rerun
from ._attempt import Settings, run_attempt, warm_up
from ._gate import Gate
from ._scratch import MARKER, Workspace, kill_marked
from ._task import Task

__all__ = ["LocalBackend"]

USES = 200  # attempts a worker runs before it is replaced by a fresh one


class _GateManager(BaseManager):
    pass


_GateManager.register("Gate", Gate)


@dataclass(eq=False)
class _Worker:
    process: _Forked
    conn: Connection
    uses: int = 0


@dataclass(eq=False)
class _Attempt:
    worker: _Worker
    holder: str


class LocalBackend:
    """Runs attempts on warm worker processes of this machine; ``gate`` is shared by all."""

    starts_at_once = True  # a worker per slot: nothing waits in a queue

    def __init__(self, settings: Settings, limit: int) -> None:
        self.settings = settings
        self.ctx = multiprocessing.get_context("spawn")
        self.idle: list[_Worker] = []
        address = f"\0loki-fleet-gate-{os.getpid()}-{secrets.token_hex(8)}"
        self.manager = _GateManager(address=address, ctx=self.ctx)
        with main_not_rerun():
            self.manager.start(initializer=_watch_driver)
        self.gate: Any = self.manager.Gate(limit)  # type: ignore[attr-defined]
        self.zygote = Zygote(settings)

    def start(self, task: Task, holder: str) -> _Attempt:
        worker = self.idle.pop() if self.idle else self._spawn()
        worker.uses += 1
        with contextlib.suppress(OSError):  # died while idle: the attempt reads as its death
            worker.conn.send((task, holder))
        return _Attempt(worker, holder)

    def wait(self, attempts: list[_Attempt], timeout: float) -> list[_Attempt]:
        """The attempts that ended (result sent, or worker gone) within ``timeout``."""
        ready = set(wait([a.worker.conn for a in attempts], timeout))
        return [a for a in attempts if a.worker.conn in ready]

    def outcome(self, attempt: _Attempt) -> dict[str, Any]:
        worker = attempt.worker
        try:
            outcome: dict[str, Any] = worker.conn.recv()
        except (EOFError, OSError):
            outcome = {"ok": False, "error": self._bury(worker)}
        except Exception as exc:  # a result cut short by the worker dying mid-send
            outcome = {"ok": False, "error": f"{self._bury(worker)} ({exc})"}
        else:
            self._reuse(worker)
        return outcome

    def kill(self, attempt: _Attempt) -> bool:
        """Stop the attempt: its worker is killed (and replaced by the next start); over
        at once (the worker is reaped here, its requests ended with it)."""
        attempt.worker.process.kill()
        self._bury(attempt.worker)
        return True

    def close(self) -> None:
        for worker in self.idle:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
        for worker in self.idle:
            worker.process.join(5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self.idle = []
        self.zygote.close()
        self.manager.shutdown()
        Workspace(self.settings.cache_dir).sweep()

    def _spawn(self) -> _Worker:
        process, conn = self.zygote.fork()
        with contextlib.suppress(OSError):  # died at once: the attempt reads as its death
            conn.send(self.gate)
        return _Worker(process, conn)

    def _reuse(self, worker: _Worker) -> None:
        if worker.uses < USES:
            self.idle.append(worker)
            return
        with contextlib.suppress(OSError):
            worker.conn.send(None)
        worker.process.join(5)
        self._bury(worker)

    def _bury(self, worker: _Worker) -> str:
        """A worker that is gone (or must go): reaped, and what it left swept; why it died."""
        worker.process.join(5)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()
        Workspace(self.settings.cache_dir).sweep()  # its commands, its working copy
        return died(worker.process.exitcode)


def died(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the worker process died (killed by {name})"
    return f"the worker process died (exit code {exitcode}) before sending a result"


class Zygote:
    """The fleet's warm interpreter its workers are forked from (see the module doc)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, theirs = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=_zygote, args=(theirs, self.settings),
                                   name="loki-fleet zygote", daemon=True)
        with main_not_rerun():
            self.process.start()
        theirs.close()

    def fork(self) -> tuple[_Forked, Connection]:
        """A new worker and the driver's end of its pipe (its first message: the gate)."""
        ours, theirs = multiprocessing.Pipe(duplex=True)
        try:
            with self.lock:
                for again in (True, False):  # a zygote that died is replaced, once
                    try:
                        self.conn.send(("fork",))
                        reduction.send_handle(self.conn, theirs.fileno(), self.process.pid)
                        pid: int = self.conn.recv()
                        break
                    except (EOFError, OSError):
                        if not again:
                            raise
                        self._restart()
        finally:
            theirs.close()
        return _Forked(self, pid, self.process), ours

    def wait(self, worker: _Forked, timeout: float | None) -> int | None:
        """How ``worker`` ended (a multiprocessing exit code: -N for signal N), or None
        when it still runs after ``timeout`` seconds (None: until it ends)."""
        if worker.parent is self.process:
            try:
                with self.lock:
                    self.conn.send(("wait", worker.pid, timeout))
                    code: int | None = self.conn.recv()
                    return code
            except (EOFError, OSError):
                pass
        return _gone_by(worker.pid, timeout)  # its zygote died: it is nobody's child now

    def close(self) -> None:
        """Stop the zygote; it kills whatever worker it still has (none, normally)."""
        with self.lock, contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()

    def _restart(self) -> None:
        self.conn.close()
        self.process.join(1)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self._start()


class _Forked:
    """A worker forked by the zygote, with the part of multiprocessing.Process's interface
    the backend uses; its end is learnt from the zygote, its parent."""

    def __init__(self, zygote: Zygote, pid: int, parent: Any) -> None:
        self.zygote, self.pid, self.parent = zygote, pid, parent
        self.exitcode: int | None = None

    def join(self, timeout: float | None = None) -> None:
        if self.exitcode is None:
            self.exitcode = self.zygote.wait(self, timeout)

    def is_alive(self) -> bool:
        return self.exitcode is None

    def kill(self) -> None:
        if self.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _gone_by(pid: int, timeout: float | None) -> int | None:
    """For an orphaned worker (its zygote died): None while it runs, else -SIGKILL, the
    only end the driver gives one (its real status went to whoever reaps it)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while _running(pid):
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(0.01)
    return -signal.SIGKILL


def _running(pid: int) -> bool:
    """Alive, and not a zombie (dead, waiting for a parent that may never reap it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2 :][:1] != b"Z"


def _zygote(conn: Connection, settings: Settings) -> None:
    """The zygote: import what a worker needs, then fork one per request of the driver,
    and tell it how a worker ended. It never starts a thread (forking one that holds a
    lock would hand the child a lock nobody releases)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    warm_up(settings)
    driver = multiprocessing.parent_process()
    children: set[int] = set()
    watched = [conn] + ([driver.sentinel] if driver is not None else [])
    while True:
        ready = wait(watched)
        message = None
        if conn in ready:
            with contextlib.suppress(EOFError, OSError):
                message = conn.recv()
        if message is None:  # told to stop, or the driver is gone
            break
        if message[0] == "fork":
            fd = reduction.recv_handle(conn)
            pid = os.fork()
            if pid == 0:
                conn.close()
                _forked_worker(fd, settings)
            os.close(fd)
            children.add(pid)
            conn.send(pid)
        else:
            _, pid, timeout = message
            code = _reap(pid, timeout)
            if code is not None:
                children.discard(pid)
            conn.send(code)
    for pid in children:  # the driver closed its workers first: these are stragglers
        if _reap(pid, 5) is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _reap(pid, None)


def _reap(pid: int, timeout: float | None) -> int | None:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, 0 if deadline is None else os.WNOHANG)
        except ChildProcessError:
            return -signal.SIGKILL  # not ours, or reaped already
        if done:
            return os.waitstatus_to_exitcode(status)
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


def _forked_worker(fd: int, settings: Settings) -> None:
    """A worker forked by the zygote; exits the process whatever happens."""
    code = 1
    try:
        conn = Connection(fd)
        gate = conn.recv()
        _serve(conn, settings, gate)
        code = 0
    except (EOFError, OSError):
        code = 0  # the driver went away before giving us work
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve(conn: Connection, settings: Settings, gate: Any) -> None:
    """A worker: run the attempts the driver sends, one at a time, until told to stop."""
    # Ctrl-C reaches the whole process group: the driver handles it (and kills us), so an
    # attempt does not die of it on its own with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_driver()
    warm_up(settings)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task, holder = message
        conn.send(run_attempt(task, settings, gate, holder))


def _watch_driver() -> None:
    """Exit when the driver is gone (killed, say), stopping this attempt's commands first."""
    threading.Thread(target=_die_with_driver, daemon=True).start()


def _die_with_driver() -> None:
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    wait([parent.sentinel])
    marker = os.environ.get(MARKER)
    if marker:
        kill_marked(marker)
    os._exit(1)
