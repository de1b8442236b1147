"""Approvals that remember: a ``confirm`` whose "always" holds for the rest of the session.

A confirm callback answers a question (``"edit cli.py"``, ``"run rm -rf build"``) with a
bool, or with ``"yes"``, ``"no"`` or ``"always"``. "always" allows the question's
``key`` from then on without asking: the same verb on the same path for a file change,
the same rule for a command an ``ask`` rule matched, the same tool for an MCP server's
tool. Anything else declines: an answer nobody meant as yes is a no.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

__all__ = ["Answer", "Approvals", "answer_of"]

Answer = Literal["yes", "no", "always"]

_WORDS: dict[str, Answer] = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "": "no",
                             "a": "always", "always": "always"}


def answer_of(reply: Any) -> Answer:
    """A confirm callback's reply as one of the three answers (a bool still works)."""
    if isinstance(reply, bool):
        return "yes" if reply else "no"
    if isinstance(reply, str):
        return _WORDS.get(reply.strip().lower(), "no")
    return "no"


def key_of(action: str) -> str:
    """What an "always" for ``action`` covers: its ``key`` when it carries one, else itself."""
    return str(getattr(action, "key", "") or action)


class Approvals:
    """``confirm`` that returns a bool and remembers each "always" by the question's key."""

    def __init__(self, confirm: Callable[[str], Any]) -> None:
        self.confirm = confirm
        self.always: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, action: str) -> bool:
        key = key_of(action)
        with self._lock:
            if key in self.always:
                return True
        answer = answer_of(self.confirm(action))
        if answer == "always":
            with self._lock:
                self.always.add(key)
        return answer != "no"
