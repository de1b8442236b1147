"""A small pool of warm language servers: one per language, started on first use.

Each server has a :class:`Slot`: a thread that runs its checks one at a time (a server's
documents are one sequence of changes), the running client, and what went wrong. A
server that crashes, hangs (a request unanswered for ``hang`` seconds), floods or breaks
the protocol is stopped; the check that met it says so, and the next start waits a
backoff that doubles (1 s, 2 s, 4 s... up to a minute); after ``MAX_FAILURES`` failures
in a row the slot gives up for the toolbox's life and says so. At most ``warm`` servers
run at once: starting one more stops the one used least recently.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from ..results import Diagnostic
from ._client import LanguageClient, ServerFailed, Start
from ._servers import ServerSpec

__all__ = ["MAX_FAILURES", "Check", "Pool", "Slot"]

log = logging.getLogger("yggdrasil.loki.diagnostics")

MAX_FAILURES = 5  # failures in a row before a server is given up for the toolbox's life
MAX_BACKOFF = 60.0
MAX_OPEN = 64  # documents a server keeps open; the oldest is closed past it


@dataclass(frozen=True)
class Check:
    """What a server found in the file ``rel`` before and after a change (``before``
    None: the file is new, or the check is of the file as it is), or why it could not
    say (``problem``)."""

    rel: str
    server: str
    before: list[Diagnostic] | None
    after: list[Diagnostic]
    problem: str = ""


@dataclass
class _Job:
    rel: str
    before: str | None
    after: str | None  # None: the file was deleted (closed in the server)
    future: Future[Check]


class Slot:
    """One language's server across its restarts (see the module docstring)."""

    def __init__(self, spec: ServerSpec, root: Path, start: Start, *, hang: float,
                 on_start: Callable[[Slot], None]) -> None:
        self.spec, self.root, self._start = spec, root, start
        self.hang = hang
        self._on_start = on_start
        self.client: LanguageClient | None = None
        self.failures = 0
        self.next_start = 0.0
        self.problem = ""  # the last failure, as a phrase
        self.used = 0.0
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._known: dict[str, tuple[str, list[Diagnostic]]] = {}  # rel -> (text, found)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.closed = False

    @property
    def given_up(self) -> bool:
        return self.failures >= MAX_FAILURES

    def submit(self, rel: str, before: str | None, after: str | None) -> Future[Check]:
        future: Future[Check] = Future()
        if self.closed:
            future.set_result(Check(rel, self.spec.name, None, [], "the toolbox is closed"))
            return future
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True,
                                                name=f"loki-lsp-{self.spec.name}")
                self._thread.start()
        self._jobs.put(_Job(rel, before, after, future))
        return future

    def stop(self) -> None:
        """Stop the server (the pool needs room); the next check starts it again."""
        client, self.client = self.client, None
        if client is not None:
            client.close()
        self._known.clear()

    def close(self) -> None:
        self.closed = True
        self._jobs.put(None)
        self.stop()

    # -- the slot's thread ---------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None or self.closed:
                if job is not None:
                    job.future.set_result(Check(job.rel, self.spec.name, None, [],
                                                "the toolbox is closed"))
                return
            try:
                job.future.set_result(self._run(job))
            except BaseException as exc:  # never leave a waiter hanging
                log.debug("check of %s failed", job.rel, exc_info=True)
                job.future.set_result(Check(job.rel, self.spec.name, None, [],
                                            f"{self.spec.name} failed: {exc}"))

    def _run(self, job: _Job) -> Check:
        name = self.spec.name
        if job.after is None:
            if self.client is not None:
                self.client.forget(job.rel)
            self._known.pop(job.rel, None)
            return Check(job.rel, name, None, [])
        try:
            client = self._client()
            before = None if job.before is None else self._found(client, job.rel, job.before)
            after = self._found(client, job.rel, job.after)
        except ServerFailed as exc:
            return Check(job.rel, name, None, [], self._failed(str(exc)))
        except _Unavailable as exc:
            return Check(job.rel, name, None, [], str(exc))
        self.failures = 0
        return Check(job.rel, name, before, after)

    def _found(self, client: LanguageClient, rel: str, text: str) -> list[Diagnostic]:
        known = self._known.get(rel)
        if known is not None and known[0] == text:
            return known[1]
        found = client.diagnose(rel, text, self.hang)
        self._known[rel] = (text, found)
        if client.open_files > MAX_OPEN:
            oldest = next(iter(self._known))
            client.forget(oldest)
            self._known.pop(oldest, None)
        return found

    def _client(self) -> LanguageClient:
        client = self.client
        if client is not None and client.alive:
            self.used = time.monotonic()
            return client
        if client is not None:  # it died between checks
            reason = client.fault or client._gone_reason(client.process)
            self.stop()
            raise ServerFailed(reason)
        if self.given_up:
            raise _Unavailable(f"{self.spec.name} is not used any more: it failed "
                               f"{self.failures} times in a row ({self.problem})")
        wait = self.next_start - time.monotonic()
        if wait > 0:
            raise _Unavailable(f"{self.spec.name} is restarting after it failed "
                               f"({self.problem}); it starts again in {wait:.0f} s")
        self._on_start(self)
        fresh = LanguageClient(self.spec, self.root, self._start)
        self.client = fresh
        self.used = time.monotonic()
        try:
            fresh.start(self.hang * 2)  # a cold start indexes the project
        except ServerFailed:
            self.client = None
            fresh.close()
            raise
        return fresh

    def _failed(self, why: str) -> str:
        """Stop the server after a failure, schedule its restart; the sentence to show."""
        self.stop()
        self.failures += 1
        self.problem = why
        if self.given_up:
            return (f"{self.spec.name} stopped: {why}; it failed {self.failures} times in a "
                    "row and is not used any more in this session")
        backoff = min(MAX_BACKOFF, 2.0 ** (self.failures - 1))
        self.next_start = time.monotonic() + backoff
        return (f"{self.spec.name} stopped: {why}; it starts again in {backoff:g} s "
                "at the earliest (the edit landed)")


class _Unavailable(Exception):
    pass


class Pool:
    """The slots of one toolbox's servers, by name; at most ``warm`` run at once."""

    def __init__(self, specs: dict[str, ServerSpec], root: Path, start: Start, *,
                 warm: int = 3, hang: float = 30.0) -> None:
        self.warm = warm
        self.slots = {name: Slot(spec, root, start, hang=hang, on_start=self._make_room)
                      for name, spec in specs.items()}

    def slot_for(self, rel: str) -> Slot | None:
        for slot in self.slots.values():
            if slot.spec.language_of(rel) is not None:
                return slot
        return None

    def _make_room(self, starting: Slot) -> None:
        running = [s for s in self.slots.values() if s is not starting and s.client is not None]
        while len(running) >= self.warm:
            oldest = min(running, key=lambda s: s.used)
            oldest.stop()
            running.remove(oldest)

    def close(self) -> None:
        for slot in self.slots.values():
            slot.close()
