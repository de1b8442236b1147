"""The calls a toolbox has running.

``RunningCalls`` keeps the cancel event of every call in flight, so that one ``cancel()``
stops them all (a server shutting down), and serialises the calls that may change files.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RunningCalls"]

_LOCK_CHECK = 0.05  # seconds between looks at the cancel event while waiting for the lock


class RunningCalls:
    """The cancel events of the calls in flight, and the lock mutating calls take."""

    def __init__(self) -> None:
        self._events: set[threading.Event] = set()
        self._guard = threading.Lock()
        self._writer = threading.RLock()  # a tool may call another tool of its box
        self._idle = threading.Condition(self._guard)

    @contextmanager
    def track(self, event: threading.Event) -> Iterator[threading.Event]:
        with self._guard:
            self._events.add(event)
        try:
            yield event
        finally:
            with self._guard:
                self._events.discard(event)
                self._idle.notify_all()

    @contextmanager
    def exclusive(self, event: threading.Event, *, blocking: bool = True) -> Iterator[bool]:
        """Hold the mutating lock for the block; yields False if cancelled while waiting,
        or at once when ``blocking`` is false and another thread holds it."""
        if not blocking:
            if not self._writer.acquire(blocking=False):
                yield False
                return
        else:
            while not self._writer.acquire(timeout=_LOCK_CHECK):
                if event.is_set():
                    yield False
                    return
        try:
            yield True
        finally:
            self._writer.release()

    def cancel_all(self) -> int:
        """Set every running call's cancel event; the number of calls it reached."""
        with self._guard:
            for event in self._events:
                event.set()
            return len(self._events)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no call is running; False if ``timeout`` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._events, timeout)

    def __len__(self) -> int:
        with self._guard:
            return len(self._events)
