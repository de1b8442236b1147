"""What one tool call returns to a program, and the calls a toolbox has running.

``Observation`` is the structured form of the string a model reads: programs and
adapters test ``is_error``/``refused`` instead of parsing prefixes, and ``changed``
names the files this call (not the run) changed. ``RunningCalls`` keeps the cancel
event of every call in flight, so that one ``cancel()`` stops them all (a server
shutting down), and serialises the calls that may change files.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..files import clip_text, printable

__all__ = ["Observation", "RunningCalls"]

_LOCK_CHECK = 0.05  # seconds between looks at the cancel event while waiting for the lock


@dataclass(frozen=True)
class Observation:
    """One tool call's result: the observation text and what it means.

    ``is_error``: the text starts with ``ERROR:`` (the call failed, nothing or only
    part of it happened); ``refused``: it starts with ``REFUSED:`` (a confirmation was
    declined, nothing changed); ``changed``: root-relative paths this call created,
    modified or deleted, in the order they were heard of.
    """

    text: str
    is_error: bool = False
    refused: bool = False
    changed: tuple[str, ...] = ()

    @classmethod
    def of(cls, text: str, changed: tuple[str, ...] = ()) -> Observation:
        """The observation of ``text``: made printable, capped, and classified by its prefix."""
        # The one guard every observation passes: made printable (names with stray bytes
        # shown escaped) and capped, errors and refusals too (they may quote a 2 MB
        # argument, a tool name, a command line).
        text = clip_text(printable(text))
        return cls(text, text.startswith("ERROR:"), text.startswith("REFUSED:"), changed)

    @property
    def ok(self) -> bool:
        return not (self.is_error or self.refused)

    def __str__(self) -> str:
        return self.text


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
