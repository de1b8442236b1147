"""The local backend: one process per attempt on this machine, no Ray needed.

Attempts are forked from a ``multiprocessing`` fork server that has the agent imported
already, so a task costs a fork, not an interpreter start. Each sends its one result back
through a pipe; a pipe that closes without one means the process died (killed, crashed),
and the driver says so. The rate gate lives in a manager process every attempt reaches.
An attempt process (and the gate's manager) whose driver dies kills what it started and
exits (each watches the driver's sentinel); the fork server then exits too, so killing
the driver leaves nothing running.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.managers import BaseManager
from typing import Any

from ._attempt import Settings, run_attempt
from ._gate import Gate
from ._scratch import MARKER, Workspace, kill_marked
from ._task import Task

__all__ = ["LocalBackend"]


class _GateManager(BaseManager):
    pass


_GateManager.register("Gate", Gate)


@dataclass(eq=False)
class _Attempt:
    process: Any  # a multiprocessing Process of the forkserver context
    conn: Connection


class LocalBackend:
    """Runs attempts as processes of this machine; ``gate`` is shared by all of them."""

    def __init__(self, settings: Settings, limit: int) -> None:
        self.settings = settings
        self.ctx = multiprocessing.get_context("forkserver")
        _start_fork_server(self.ctx, settings.engine)
        self.manager = _GateManager(ctx=self.ctx)
        with _main_not_rerun():
            self.manager.start(initializer=_watch_driver)
        self.gate: Any = self.manager.Gate(limit)  # type: ignore[attr-defined]

    def start(self, task: Task, holder: str) -> _Attempt:
        receive, send = self.ctx.Pipe(duplex=False)
        process = self.ctx.Process(target=_child, args=(send, task, self.settings, self.gate,
                                                        holder),
                                   name=f"loki-fleet {holder}", daemon=True)
        with _main_not_rerun():
            process.start()
        send.close()
        return _Attempt(process, receive)

    def wait(self, attempts: list[_Attempt], timeout: float) -> list[_Attempt]:
        """The attempts that ended (result sent, or process gone) within ``timeout``."""
        ready = set(wait([a.conn for a in attempts], timeout))
        return [a for a in attempts if a.conn in ready]

    def outcome(self, attempt: _Attempt) -> dict[str, Any]:
        try:
            outcome: dict[str, Any] = attempt.conn.recv()
        except (EOFError, OSError):
            attempt.process.join(5)
            outcome = {"ok": False, "error": died(attempt.process.exitcode)}
        except Exception as exc:  # a result cut short by the process dying mid-send
            attempt.process.join(5)
            outcome = {"ok": False, "error": f"{died(attempt.process.exitcode)} ({exc})"}
        attempt.conn.close()
        attempt.process.join(30)
        if not outcome["ok"] and "final" not in outcome:  # it died: sweep up after it now
            Workspace(self.settings.cache_dir).sweep()
        return outcome

    def kill(self, attempt: _Attempt) -> None:
        attempt.process.kill()
        attempt.process.join()
        attempt.conn.close()
        Workspace(self.settings.cache_dir).sweep()  # its commands, its working copy

    def close(self) -> None:
        self.manager.shutdown()
        Workspace(self.settings.cache_dir).sweep()


# The SDK an engine imports when it is made (half a second for openai): imported once in
# the fork server instead of once per attempt.
_ENGINE_SDKS = {"openai": "openai", "ollama": "openai", "anthropic": "anthropic"}


def _start_fork_server(ctx: Any, engine: object) -> None:
    """Start the fork server with the agent (and the engine's SDK) imported, so that an
    attempt costs a fork, not imports.

    Python 3.11's fork server is handed the driver's ``sys.path`` but drops it, so it would
    import whatever copy of the package the default path finds; it gets the driver's path
    through ``PYTHONPATH`` while it starts instead. (Already running: nothing to do.)
    """
    sdk = _ENGINE_SDKS.get(engine) if isinstance(engine, str) else None
    ctx.set_forkserver_preload(["yggdrasil.loki.fleet._attempt", *([sdk] if sdk else [])])
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    try:
        with _main_not_rerun():
            multiprocessing.forkserver.ensure_running()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@contextlib.contextmanager
def _main_not_rerun() -> Iterator[None]:
    """Start processes without re-running the driver's script in them.

    multiprocessing re-runs the main script in every new process (as ``__mp_main__``),
    which runs the fleet again unless the script guards it with ``if __name__ ==
    "__main__":``. The workers need nothing from it (they run library code), so while a
    process starts the script is presented as a package's ``__main__``, which is never
    re-run. A callable engine factory must therefore live in an importable module.
    """
    main = sys.modules.get("__main__")
    if main is None or getattr(getattr(main, "__spec__", None), "name", None):
        yield  # run with -m (or no script at all): nothing is re-run anyway
        return
    saved = main.__spec__
    main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)
    try:
        yield
    finally:
        main.__spec__ = saved


def died(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the worker process died (killed by {name})"
    return f"the worker process died (exit code {exitcode}) before sending a result"


def _child(conn: Connection, task: Task, settings: Settings, gate: Any, holder: str) -> None:
    # Ctrl-C reaches the whole process group: the driver handles it (and kills us), so an
    # attempt does not die of it on its own with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_driver()
    conn.send(run_attempt(task, settings, gate, holder))
    conn.close()


def _watch_driver() -> None:
    """Exit when the driver is gone (killed, say), stopping this attempt's commands first.

    Every process the fork server starts keeps it alive, so a gate manager or an attempt
    outliving its driver would leave the fork server behind too: none may.
    """
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
