"""One rate gate for the whole fleet: requests in flight, adaptive to 429s, tokens spent.

Each worker's engine retries only its own failures, so one worker's 429 would not slow the
others, and the endpoint keeps being hammered. Every request of every worker therefore
passes one gate. :class:`GateCore` is the decision, with no waiting in it:

- at most ``window`` requests are in flight; the window starts at ``limit``
  (``max_in_flight``) and adapts to the endpoint (AIMD). It is cut by half when most of a
  sample of answers (at least 20, and at least a window's worth) were 429: an endpoint at
  its capacity, refusing most of what it is sent. Only answers to requests admitted since
  the last cut count (one cut per round trip: the requests already in flight when the
  window was cut say nothing of the new one), and never below one request. Each answer
  that is not a 429 grows it back by ``1/window`` (one request per window of answers), up
  to ``limit``. A share of 429s the endpoint answers at random (other tenants' load,
  below one half) costs only the requests it hits: the window stays where it is;
- when every answer of such a sample was a 429 (the endpoint serves nothing: a quota
  spent, an outage), admissions pause until the longest Retry-After among them has
  passed: waiting requests, and retries, then go again a window at a time, and a fleet
  of thousands sends a sample's worth of requests per Retry-After, not one per worker;
- a 429'd request waits its Retry-After (else the policy's backoff) alone, outside the
  gate: its slot goes at once to the next request, nobody else is paused. When it asks
  again it goes ahead of those that have not waited yet;
- a freed slot is handed to one waiter, the longest waiting (first come, first served):
  no thundering herd, however many wait.

:class:`Gate` waits on it with threads (a ``multiprocessing`` manager process on the
local backend); the Ray backend waits on it with asyncio in an async actor, which holds
thousands of waiting requests without a thread each.

Leases are per holder (one attempt of one task). The driver calls :meth:`GateCore.forget`
when an attempt is over (its worker process known to be gone), which frees what it held
and refuses what it still asks for. Attempts also check in (:meth:`GateCore.begin`) when
they start on a worker: the driver learns there when and where each one runs.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..engine import Completion, Engine, Message, RetryPolicy
from ..errors import EngineError, EngineRateLimited, EngineUnavailable

__all__ = ["Gate", "GateClient", "GateCore", "GatedEngine"]

_KEEP_STARTED = 100_000  # check-ins kept for the driver before the oldest are dropped
_KEEP_FORGOTTEN = 10_000  # ended attempts whose late requests are refused (the latest ones)
# Answers (at least) behind a cut of the window: a random 30% of 429s makes most of 20 in
# one sample of 60, 70% (an endpoint at capacity) in 19 of 20.
_SAMPLE = 20
_PAUSE = 1.0  # seconds paused when the refusals said no Retry-After


class GateCore:
    """The gate's state and decisions (no waiting): see the module doc."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 1:
            raise ValueError(f"the gate needs a limit of at least 1 request, got {limit}")
        self.limit = limit
        self.clock = clock
        self.window = float(limit)
        self._held: dict[str, int] = {}
        self._forgotten: dict[str, None] = {}  # in order: the oldest dropped first
        self._retrying: set[str] = set()  # holders whose last answer was a 429
        self._cohort: dict[str, int] = {}  # holder -> the window cuts when it was admitted
        # (holder, the waiter's token): retries first, then first come, first served
        self._lines: tuple[deque[tuple[str, Any]], ...] = (deque(), deque())
        self._in_flight = 0
        self._sample = [0, 0]  # answers and 429s to requests admitted since the last cut
        self._sample_wait = 0.0  # the longest Retry-After of the sample
        self._paused_until = 0.0  # no admission before (clock time)
        self._started: dict[str, tuple[float, str]] = {}
        self._counts = {"requests": 0, "rate_limited": 0, "max_in_flight": 0,
                        "input_tokens": 0, "output_tokens": 0, "window_cuts": 0,
                        "pauses": 0}

    def enter(self, holder: str, token: Any) -> bool | None:
        """True: admitted now; False: refused (forgotten); None: ``token`` waits in line
        (its wake-up comes back from :meth:`release` or :meth:`forget`)."""
        if holder in self._forgotten:
            return False
        retry = holder in self._retrying
        self._retrying.discard(holder)
        if not any(self._lines) and self._open():
            self._admit(holder)
            return True
        self._lines[0 if retry else 1].append((holder, token))
        return None

    def leave(self, token: Any) -> None:
        """A waiter gave up (its caller was interrupted): out of the line."""
        self._drop(lambda _holder, waiter: waiter is token)

    def release(self, holder: str, usage: Mapping[str, int] | None = None,
                limited: bool = False, retry_after: float | None = None,
                ) -> list[tuple[Any, bool]]:
        """Give the slot back (``limited``: it was answered 429, with ``retry_after``
        when the server said one); the waiters to wake, each with whether it was
        admitted."""
        if self._held.get(holder, 0) > 0:
            self._held[holder] -= 1
            self._in_flight -= 1
        for key in ("input_tokens", "output_tokens"):
            self._counts[key] += int((usage or {}).get(key, 0) or 0)
        self._counts["rate_limited"] += limited
        if limited:
            self._retrying.add(holder)
        fresh = self._cohort.pop(holder, None) == self._counts["window_cuts"]
        self._adapt(limited, fresh, _PAUSE if retry_after is None else retry_after)
        return self._hand_out()

    def forget(self, holder: str) -> list[tuple[Any, bool]]:
        """The attempt ``holder`` is over: free its slots, refuse its requests (waiting
        ones too); the waiters to wake."""
        if len(self._forgotten) >= _KEEP_FORGOTTEN:
            self._forgotten.pop(next(iter(self._forgotten)))
        self._forgotten[holder] = None
        self._started.pop(holder, None)
        self._retrying.discard(holder)
        self._cohort.pop(holder, None)
        self._in_flight -= self._held.pop(holder, 0)
        refused = [(token, False) for line in self._lines for h, token in line if h == holder]
        self._drop(lambda h, _token: h == holder)
        return refused + self._hand_out()

    def pause_left(self) -> float:
        """Seconds until admissions resume (0: not paused): call :meth:`resume` then."""
        return max(0.0, self._paused_until - self.clock())

    def resume(self) -> list[tuple[Any, bool]]:
        """The waiters to wake now that a pause is over (none while it lasts)."""
        return self._hand_out()

    def begin(self, holder: str, node: str) -> None:
        """An attempt checks in as it starts on a worker: when (unix time) and where."""
        if len(self._started) >= _KEEP_STARTED:
            self._started.pop(next(iter(self._started)))
        self._started[holder] = (time.time(), node)

    def started(self, holders: Sequence[str]) -> dict[str, tuple[float, str]]:
        """When and where each of ``holders`` that checked in started."""
        return {h: self._started[h] for h in holders if h in self._started}

    def stats(self) -> dict[str, int]:
        """Requests admitted, 429s seen, the most in flight at once, tokens spent, the
        window now and how often it was cut."""
        return {**self._counts, "in_flight": self._in_flight,
                "waiting": sum(map(len, self._lines)), "window": int(self.window)}

    def _admit(self, holder: str) -> None:
        self._in_flight += 1
        self._held[holder] = self._held.get(holder, 0) + 1
        self._cohort[holder] = self._counts["window_cuts"]
        self._counts["requests"] += 1
        self._counts["max_in_flight"] = max(self._counts["max_in_flight"], self._in_flight)

    def _adapt(self, limited: bool, fresh: bool, wait: float) -> None:
        """AIMD: +1/window per answer that is not a 429; halve when most of a sample of
        answers to requests admitted since the last cut were 429; pause when all were."""
        if not limited:
            self.window = min(float(self.limit), self.window + 1 / self.window)
        if not fresh:
            return
        self._sample[0] += 1
        self._sample[1] += limited
        if limited:
            self._sample_wait = max(self._sample_wait, wait)
        answers, refused = self._sample
        if answers < max(_SAMPLE, int(self.window)):
            return
        if refused * 2 > answers:
            self.window = max(1.0, self.window / 2)
            self._counts["window_cuts"] += 1
        if refused == answers:
            self._paused_until = max(self._paused_until, self.clock() + self._sample_wait)
            self._counts["pauses"] += 1
        self._sample, self._sample_wait = [0, 0], 0.0

    def _open(self) -> bool:
        return self._in_flight < int(self.window) and self.pause_left() == 0

    def _hand_out(self) -> list[tuple[Any, bool]]:
        woken = []
        while any(self._lines) and self._open():
            holder, token = (self._lines[0] or self._lines[1]).popleft()
            self._admit(holder)
            woken.append((token, True))
        return woken

    def _drop(self, which: Callable[[str, Any], bool]) -> None:
        for line in self._lines:
            kept = [w for w in line if not which(*w)]
            line.clear()
            line.extend(kept)


class Gate:
    """:class:`GateCore` for threads: ``acquire`` blocks until admitted (or refused); a
    timer resumes admissions when a pause ends."""

    def __init__(self, limit: int) -> None:
        self.core = GateCore(limit)
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def acquire(self, holder: str) -> bool:
        """Wait for a slot; False when ``holder`` was forgotten (its attempt is over)."""
        waiter = _Waiter()
        with self._lock:
            now = self.core.enter(holder, waiter)
        if now is not None:
            return now
        try:
            waiter.event.wait()
        except BaseException:
            with self._lock:
                self.core.leave(waiter)
            raise
        return waiter.admitted

    def release(self, holder: str, usage: Mapping[str, int] | None = None,
                limited: bool = False, retry_after: float | None = None) -> None:
        with self._lock:
            _wake(self.core.release(holder, usage, limited, retry_after))
            self._resume_later()

    def forget(self, holder: str) -> None:
        with self._lock:
            _wake(self.core.forget(holder))

    def begin(self, holder: str, node: str) -> None:
        with self._lock:
            self.core.begin(holder, node)

    def started(self, holders: Sequence[str]) -> dict[str, tuple[float, str]]:
        with self._lock:
            return self.core.started(holders)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return self.core.stats()

    def _resume_later(self) -> None:
        left = self.core.pause_left()
        if left > 0 and self._timer is None:
            self._timer = threading.Timer(left, self._resume)
            self._timer.daemon = True
            self._timer.start()

    def _resume(self) -> None:
        with self._lock:
            self._timer = None
            _wake(self.core.resume())
            self._resume_later()  # paused again meanwhile


class _Waiter:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.admitted = False


def _wake(woken: list[tuple[Any, bool]]) -> None:
    for waiter, admitted in woken:
        waiter.admitted = admitted
        waiter.event.set()


class GateClient(Protocol):
    """How a worker reaches the gate (directly, through a manager proxy or a Ray actor)."""

    def acquire(self, holder: str) -> bool: ...

    def release(self, holder: str, usage: Mapping[str, int] | None = None,
                limited: bool = False, retry_after: float | None = None) -> None: ...

    def begin(self, holder: str, node: str) -> None: ...


class GatedEngine:
    """An engine whose every request passes the fleet's gate.

    The wrapped engine is built not to retry (``RetryPolicy(attempts=1)``): retries happen
    here, under ``policy``. A 429 gives the slot back at once (the gate learns of it and
    its Retry-After, and adapts) and this request alone waits the server's Retry-After
    (else the policy's backoff), outside the gate. A replaying engine (``spends_tokens`` False: the scripted one) has
    its recorded usage left out of the fleet's tokens spent.
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
        self.spends_tokens = bool(getattr(inner, "spends_tokens", True))

    def complete(self, messages: Sequence[Message], *, system: str,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> Completion:
        attempt = 1
        while True:
            if not self.gate.acquire(self.holder):
                raise EngineUnavailable("the fleet ended this attempt; its requests are refused")
            try:
                completion = self.inner.complete(messages, system=system, tools=tools)
            except EngineError as exc:
                if isinstance(exc, EngineRateLimited):  # the gate hears the wait it asks
                    # for, as bounded by the policy (a Retry-After of days waits max_delay)
                    self.gate.release(self.holder, limited=True,
                                      retry_after=self.policy.delay(attempt, exc.retry_after))
                else:
                    self.gate.release(self.holder)
                wait = self.policy.wait_for(exc, attempt)
                if wait is None:
                    raise
                self.policy.sleep(wait)
                attempt += 1
                continue
            except BaseException:
                self.gate.release(self.holder)
                raise
            self.gate.release(self.holder, usage=completion.usage if self.spends_tokens else None)
            return completion
