"""Bounds on what a tool may hand back to a model, and how a cut is announced.

Every list and every text a tool returns goes through one of these, so one call can
never flood a model's context, and a cut always says what was cut and how to narrow.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence

from yggdrasil.io import human_size

__all__ = ["clip_line", "clip_list", "clip_text", "did_you_mean", "human_size", "json_text",
           "more_note", "printable"]

MAX_OBSERVATION = 100_000  # characters: the last guard, applied by Toolbox.call
MAX_LINE = 2_000  # characters of one line shown by read_file and grep
MAX_READ_CHARS = 50_000  # characters of one read_file window
MAX_READ_LINES = 2_000  # lines of one read_file window without an explicit end
MAX_ENTRIES = 1_000  # entries of list_dir / find
MAX_HITS = 500  # grep matches


def clip_line(text: str, limit: int = MAX_LINE) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more chars on this line]"


def clip_list(items: Sequence[str], limit: int, what: str, narrow: str) -> list[str]:
    """The first ``limit`` items, plus a line saying how many were cut and how to narrow."""
    if len(items) <= limit:
        return list(items)
    return [*items[:limit], more_note(len(items) - limit, what, narrow)]


def more_note(more: int, what: str, narrow: str) -> str:
    """The line that ends a capped list: how many ``what`` were cut, and how to narrow."""
    return f"[... {more} more {what} not shown; {narrow}]"


def clip_text(text: str, limit: int = MAX_OBSERVATION) -> str:
    """Keep the head and the tail of an over-long observation, and say what was cut."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[-(limit // 4) :]
    cut = len(text) - len(head) - len(tail)
    return f"{head}\n[... {cut} characters cut from the middle; ask for less at a time ...]\n{tail}"


def printable(text: str) -> str:
    """``text`` as valid Unicode for any wire or terminal. A file name of stray bytes comes
    from the OS as lone surrogates (``\\udcff``), and JSON from a model may hold any lone
    surrogate: neither can be encoded, so they are shown escaped (``\\xff``, ``\\ud800``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that is no escaped byte
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def json_text(value: object, *, indent: int | None = None) -> str:
    """``value`` as JSON that a UTF-8 writer always takes: readable (non-ASCII kept) unless
    it holds a lone surrogate, which is then written as a ``\\u`` escape (lossless)."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, indent=indent, default=str)
    return text


def did_you_mean(given: object, choices: Iterable[str]) -> str:
    """``"; did you mean read_file?"`` for the choice closest to a mistyped name, or ""
    when none is close (``difflib``'s ratio of at least 0.6: one or two letters off)."""
    if not isinstance(given, str):
        return ""
    close = difflib.get_close_matches(given, list(choices), n=1)
    return f"; did you mean {close[0]}?" if close else ""
