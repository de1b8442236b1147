"""What ``loki mcp --http`` spends on clients before it knows who they are.

A connection that has not yet sent a whole request head costs a descriptor and nothing
proves it is a client: a slowloris attacker opens a thousand and sends a byte now and then,
and the server, out of descriptors, can accept no one else. So, before a request's head is
read (before the bearer token can be checked):

- a connection waits for its head at most ``HEAD_TIMEOUT`` seconds (bytes trickling in do
  not extend it), then it is dropped;
- at most ``PER_CLIENT`` such connections per client address and ``TOTAL`` in all: a new
  one beyond either drops the oldest waiting one (of that client, or of all), so a real
  client, whose head follows its connect at once, always gets through;
- the soft descriptor limit is raised to the hard one (:func:`raise_nofile`).

Refused requests (401, 403, 421) are logged, at most one line per status every
``LOG_EVERY`` seconds with how many were not (:class:`RefusalLog`).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import OrderedDict
from typing import Any

__all__ = ["HEAD_TIMEOUT", "PER_CLIENT", "TOTAL", "RefusalLog", "Waiting", "guarded_protocol",
           "raise_nofile"]

log = logging.getLogger("yggdrasil.loki.mcp")

HEAD_TIMEOUT = 10.0  # seconds a connection may take to send a request's head
PER_CLIENT = 32  # connections of one address waiting for their head
TOTAL = 256  # connections of every address waiting for their head
LOG_EVERY = 10.0  # seconds between two log lines about refused requests of one status


def raise_nofile() -> int:
    """Raise the soft limit of open descriptors to the hard one; the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            return hard
        except (ValueError, OSError):
            pass
    return soft


class Waiting:
    """The connections waiting for a request head, oldest first, by client and in all."""

    def __init__(self, per_client: int = PER_CLIENT, total: int = TOTAL) -> None:
        self.per_client, self.total = per_client, total
        self.all: OrderedDict[Any, str] = OrderedDict()
        self.by_client: dict[str, OrderedDict[Any, None]] = {}
        self.dropped = 0

    def start(self, conn: Any, client: str) -> None:
        self.stop(conn)
        self.all[conn] = client
        self.by_client.setdefault(client, OrderedDict())[conn] = None
        mine = self.by_client[client]
        while len(mine) > self.per_client:
            self._drop(next(iter(mine)))
        while len(self.all) > self.total:
            self._drop(next(iter(self.all)))

    def stop(self, conn: Any) -> None:
        client = self.all.pop(conn, None)
        if client is None:
            return
        mine = self.by_client[client]
        mine.pop(conn, None)
        if not mine:
            del self.by_client[client]

    def _drop(self, conn: Any) -> None:
        self.stop(conn)
        self.dropped += 1
        conn.drop()


class RefusalLog:
    """One warning per status per ``every`` seconds, saying how many were not logged."""

    def __init__(self, every: float = LOG_EVERY) -> None:
        self.every = every
        self.last: dict[int, float] = {}
        self.quiet: dict[int, int] = {}

    def refused(self, status: int, client: str, why: str) -> None:
        now = time.monotonic()
        if now - self.last.get(status, -self.every) < self.every:
            self.quiet[status] = self.quiet.get(status, 0) + 1
            return
        self.last[status] = now
        more = self.quiet.pop(status, 0)
        also = f" (and {more} more refused {status} since the last line)" if more else ""
        log.warning("refused a request from %s with %d: %s%s", client or "?", status,
                    why, also)


def guarded_protocol(waiting: Waiting, timeout: float = HEAD_TIMEOUT) -> type:
    """uvicorn's h11 protocol, with the connections waiting for a head bounded by
    ``waiting`` and timed out after ``timeout`` seconds."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Guarded(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _seen: object = None  # the request cycle whose head was read last

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._wait()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._check()

        def on_response_complete(self) -> None:
            super().on_response_complete()  # may read a pipelined head
            if self.cycle is self._seen and not self.transport.is_closing():
                self._wait()  # keep-alive: the next head is awaited under the same bounds
            self._check()

        def connection_lost(self, exc: Exception | None) -> None:
            self._done()
            super().connection_lost(exc)

        def _wait(self) -> None:
            self._done()
            self._timer = self.loop.call_later(timeout, self.drop)
            waiting.start(self, self.client[0] if self.client else "")

        def _check(self) -> None:
            if self.cycle is not None and self.cycle is not self._seen:
                self._seen = self.cycle  # a head was read: its token is checked next
                self._done()

        def _done(self) -> None:
            waiting.stop(self)
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def drop(self) -> None:
            self._done()
            if not self.transport.is_closing():
                self.transport.abort()

    return Guarded
