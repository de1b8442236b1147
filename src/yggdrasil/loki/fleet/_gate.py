"""One rate gate for the whole fleet: requests in flight, 429 pauses, tokens spent.

Each worker's engine retries only its own failures, so one worker's 429 would not slow the
others, and the endpoint keeps being hammered. Every request of every worker therefore
passes one :class:`Gate`: it admits at most ``limit`` requests at a time, and a 429 seen
by anyone pauses everyone for the wait the server asked for. The gate is plain threaded
Python, hosted where all workers reach it: a ``multiprocessing`` manager process on the
local backend, a threaded Ray actor on a cluster.

Leases are per holder (one attempt of one task): when an attempt dies, the driver calls
:meth:`Gate.forget`, which frees what it held and refuses what it still asks for, so a
killed worker cannot leak a slot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..engine import Completion, Engine, Message, RetryPolicy
from ..errors import EngineError, EngineRateLimited, EngineUnavailable

__all__ = ["Gate", "GateClient", "GatedEngine"]


class Gate:
    """Admits at most ``limit`` requests at once, and none while a 429 pause lasts."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the gate needs a limit of at least 1 request, got {limit}")
        self.limit = limit
        self._cond = threading.Condition()
        self._held: dict[str, int] = {}
        self._forgotten: set[str] = set()
        self._in_flight = 0
        self._paused_until = 0.0
        self._counts = {"requests": 0, "rate_limited": 0, "max_in_flight": 0,
                        "input_tokens": 0, "output_tokens": 0}

    def acquire(self, holder: str) -> bool:
        """Wait for a slot; False when ``holder`` was forgotten (its attempt is over)."""
        with self._cond:
            while True:
                if holder in self._forgotten:
                    return False
                pause = self._paused_until - time.monotonic()
                if pause <= 0 and self._in_flight < self.limit:
                    break
                self._cond.wait(pause if pause > 0 else None)
            self._in_flight += 1
            self._held[holder] = self._held.get(holder, 0) + 1
            self._counts["requests"] += 1
            self._counts["max_in_flight"] = max(self._counts["max_in_flight"], self._in_flight)
            return True

    def release(self, holder: str, usage: Mapping[str, int] | None = None,
                pause: float = 0.0) -> None:
        """Give the slot back; ``pause`` > 0 (after a 429) stops everyone that long."""
        with self._cond:
            if self._held.get(holder, 0) > 0:
                self._held[holder] -= 1
                self._in_flight -= 1
            for key in ("input_tokens", "output_tokens"):
                self._counts[key] += int((usage or {}).get(key, 0) or 0)
            if pause > 0:
                self._counts["rate_limited"] += 1
                self._paused_until = max(self._paused_until, time.monotonic() + pause)
            self._cond.notify_all()

    def forget(self, holder: str) -> None:
        """The attempt ``holder`` is over: free its slots and refuse its later requests."""
        with self._cond:
            self._forgotten.add(holder)
            self._in_flight -= self._held.pop(holder, 0)
            self._cond.notify_all()

    def stats(self) -> dict[str, int]:
        """Requests admitted, 429s seen, the most in flight at once, tokens spent."""
        with self._cond:
            return {**self._counts, "in_flight": self._in_flight}


class GateClient(Protocol):
    """How a worker reaches the gate (directly, through a manager proxy or a Ray actor)."""

    def acquire(self, holder: str) -> bool: ...

    def release(self, holder: str, usage: Mapping[str, int] | None = None,
                pause: float = 0.0) -> None: ...


class GatedEngine:
    """An engine whose every request passes the fleet's gate.

    The wrapped engine is built not to retry (``RetryPolicy(attempts=1)``): retries happen
    here, under ``policy``, so that a 429 pauses the whole fleet (for the server's
    Retry-After, else the policy's backoff) instead of only this worker.
    """

    def __init__(self, inner: Engine, gate: GateClient, holder: str,
                 policy: RetryPolicy | None = None) -> None:
        self.inner = inner
        self.gate = gate
        self.holder = holder
        self.policy = policy or RetryPolicy()
        self.name = str(getattr(inner, "name", "custom"))
        self.model = str(getattr(inner, "model", ""))
        self.native_tools = bool(getattr(inner, "native_tools", False))
        self.schema_flavor = str(getattr(inner, "schema_flavor", "neutral"))  # what its API wants

    def complete(self, messages: Sequence[Message], *, system: str,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> Completion:
        attempt = 1
        while True:
            if not self.gate.acquire(self.holder):
                raise EngineUnavailable("the fleet ended this attempt; its requests are refused")
            try:
                completion = self.inner.complete(messages, system=system, tools=tools)
            except EngineError as exc:
                wait = self.policy.wait_for(exc, attempt)
                if wait is None:
                    self.gate.release(self.holder)
                    raise
                limited = isinstance(exc, EngineRateLimited)
                self.gate.release(self.holder, pause=wait if limited else 0.0)
                if not limited:
                    self.policy.sleep(wait)
                attempt += 1
                continue
            except BaseException:
                self.gate.release(self.holder)
                raise
            self.gate.release(self.holder, usage=completion.usage)
            return completion
