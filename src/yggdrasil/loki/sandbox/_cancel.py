"""Stopping a running command from another thread: a per-call cancel event.

Whoever runs a tool (``Toolbox.run``, a background job) owns a ``threading.Event`` and
makes it current for the code it calls with :func:`cancel_scope`; ``run_process`` picks
it up without every layer in between passing it along, and when the event is set it
kills the command's whole process tree as it would on a timeout. A context variable
(not a global) keeps concurrent calls on different threads apart.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["cancel_scope", "current_cancel"]

_CURRENT: ContextVar[threading.Event | None] = ContextVar("loki_cancel", default=None)


@contextmanager
def cancel_scope(event: threading.Event | None) -> Iterator[threading.Event | None]:
    """Make ``event`` the cancel event of every command started inside the block."""
    token = _CURRENT.set(event)
    try:
        yield event
    finally:
        _CURRENT.reset(token)


def current_cancel() -> threading.Event | None:
    """The cancel event of the running call, or None outside any ``cancel_scope``."""
    return _CURRENT.get()
