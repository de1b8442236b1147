"""A hand's tools answering the text a model reads: each typed result rendered.

The hands (``Search``, ``Files``...) answer typed results; tests that pin the observation
text (the contract in DESIGN.md) wrap a hand in :class:`Texts` to compare strings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yggdrasil.loki.results import render_text


class Texts:
    """``Texts(hand).grep(...)`` is ``render_text(hand.grep(...))``; ``typed`` is the hand."""

    def __init__(self, hand: Any) -> None:
        self.typed = hand

    def __getattr__(self, name: str) -> Callable[..., str]:
        tool = getattr(self.typed, name)
        return lambda *args, **kwargs: render_text(tool(*args, **kwargs))
