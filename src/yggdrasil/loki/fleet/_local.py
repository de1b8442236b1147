"""The local backend: a warm worker process per slot on this machine, no Ray needed.

Each slot's worker is started once and then runs attempt after attempt, as Ray reuses its
workers: an attempt costs a message, not a process. It sends each result back through its
pipe; a pipe that closes without one means the worker died (killed, crashed), and the
driver says so and starts another for the slot. A worker is retired after :data:`USES`
attempts (whatever a long run leaks goes with it).

Workers are forked from the fleet's own zygote (``_zygote``): one interpreter that
imports the agent and the engine's SDK once, so eight slots cost one import, not eight
racing for the cores.

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
import threading
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection, wait
from multiprocessing.managers import BaseManager
from typing import Any

from ..sandbox import main_not_rerun
from ._attempt import AttemptSettings, run_attempt, warm_up
from ._gate import Gate
from ._scratch import MARKER, Workspace, kill_marked
from ._task import Task
from ._zygote import Worker, Zygote

__all__ = ["LocalBackend"]

USES = 200  # attempts a worker runs before it is replaced by a fresh one


class _GateManager(BaseManager):
    pass


_GateManager.register("Gate", Gate)


@dataclass(eq=False)
class _Worker:
    process: Worker
    conn: Connection
    uses: int = 0


@dataclass(eq=False)
class _Attempt:
    worker: _Worker
    holder: str


class LocalBackend:
    """Runs attempts on warm worker processes of this machine; ``gate`` is shared by all.
    Used from one thread: the fleet's loop."""

    starts_at_once = True  # a worker per slot: nothing waits in a queue

    def __init__(self, settings: AttemptSettings, limit: int) -> None:
        self.settings = settings
        self.ctx = multiprocessing.get_context("spawn")
        self.idle: list[_Worker] = []
        address = f"\0loki-fleet-gate-{os.getpid()}-{secrets.token_hex(8)}"
        self.manager = _GateManager(address=address, ctx=self.ctx)
        with main_not_rerun():
            self.manager.start(initializer=_watch_driver)
        self.gate: Any = self.manager.Gate(limit)  # type: ignore[attr-defined]
        self.zygote = Zygote(partial(warm_up, settings), partial(_work, settings))

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
        return died(worker.process)


def died(worker: Worker) -> str:
    if worker.unknown:
        return ("the worker process died (how is unknown: the zygote it was forked from "
                "died first)")
    code = worker.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the worker process died (killed by {name})"
    return f"the worker process died (exit code {code}) before sending a result"


def _work(settings: AttemptSettings, conn: Connection) -> None:
    """A worker forked by the zygote: its first message is the gate, then attempts."""
    try:
        gate = conn.recv()
    except (EOFError, OSError):
        return  # the driver went away before giving it work
    _serve(conn, settings, gate)


def _serve(conn: Connection, settings: AttemptSettings, gate: Any) -> None:
    """A worker: run the attempts the driver sends, one at a time, until told to stop.
    What it needs was imported, and Ctrl-C set aside, by the zygote it was forked from."""
    _watch_driver()
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
