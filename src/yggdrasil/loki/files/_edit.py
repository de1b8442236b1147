"""Text edits that land where the model meant, or nowhere, and help when they miss.

``replace`` finds ``old`` exactly (as a substring) first; when it is not there, as whole
lines by the looser rungs of ``_match`` (line endings, trailing whitespace, indentation,
typographic punctuation), writing ``new`` in the file's conventions. Two or more places
at the first rung that matches are refused, listing them. When nothing matches, the error
points at the closest near-match. ``apply_edits`` runs several edits in order on the
evolving text, all or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ToolError
from ._diff import trimmed
from ._match import IGNORED, MAX_PLACES, NOTES, Lines, adapt
from ._nearmiss import near_miss
from ._text import printable

MAX_EDITS = 100  # edits in one edit_file call
MAX_SPANS = 1_000  # changed places of one replace_all recorded for its diff

_SHOW_PLACES = 10


@dataclass(frozen=True)
class Edit:
    old: str
    new: str
    replace_all: bool = False


@dataclass(frozen=True)
class Landed:
    """The text after an edit, how many places changed, and the rung that matched."""

    text: str
    count: int
    rung: int = 0
    # (start, end, count): lines [start, end) of the text, as it was when each replacement
    # was made (earlier ones applied), became ``count`` lines; in the order they were made
    spans: tuple[tuple[int, int, int], ...] = ()


def apply_edits(text: str, edits: Sequence[Edit], rel: str) -> tuple[str, list[Landed]]:
    """Every edit in order, each on the text the previous one left; ToolError changes nothing."""
    landed: list[Landed] = []
    for n, edit in enumerate(edits, 1):
        try:
            done = replace(text, edit.old, edit.new, rel, replace_all=edit.replace_all)
        except ToolError as exc:
            if len(edits) == 1:
                raise
            raise ToolError(f"edit {n} of {len(edits)}: {exc}\n(no edit was applied; "
                            f"{rel} is unchanged)") from exc
        landed.append(done)
        text = done.text
    return text, landed


def replace(text: str, old: str, new: str, rel: str, *, replace_all: bool = False) -> Landed:
    """``text`` with ``old`` replaced by ``new``; ToolError leaves no change."""
    if not old:
        raise ToolError("old must not be empty; to create or rewrite a whole file use write_file")
    if old == new:
        raise ToolError("old and new are the same; there is nothing to change")
    first = text.find(old)
    if first < 0 or (not replace_all and _whole_lines(text, old, first)):
        # whole lines go through the line matcher, which also checks that no slip could
        # have made old the exact text of this place while another was meant
        return _replace_lines(text, old, new, rel, replace_all=replace_all,
                              first_rung=0 if first >= 0 else 1)
    if replace_all:
        return Landed(text.replace(old, new), text.count(old), 0, _exact_spans(text, old, new))
    if text.find(old, first + 1) >= 0:  # overlapping places count: "a\na" in "a\na\na" is two
        found = _places(text, old)
        raise ToolError(
            f"old appears {_count(found)} in {rel} (at lines {', '.join(found[:_SHOW_PLACES])}"
            f"{_more(found)}); include more surrounding lines so it is unique, or pass "
            "replace_all=true to replace every one")
    line = text.count("\n", 0, first)
    span = (line, line + old.count("\n") + 1, new.count("\n") + 1)
    return Landed(text[:first] + new + text[first + len(old):], 1, 0, (span,))


def _exact_spans(text: str, old: str, new: str) -> tuple[tuple[int, int, int], ...]:
    """The line spans ``text.replace(old, new)`` changes, in the order it changes them."""
    k, m = old.count("\n") + 1, new.count("\n") + 1
    spans: list[tuple[int, int, int]] = []
    line = last = shift = 0
    pos = text.find(old)
    while pos >= 0 and len(spans) < MAX_SPANS:  # the diff shows the first few anyway
        line += text.count("\n", last, pos)
        spans.append((line + shift, line + shift + k, m))
        shift += m - k
        last, pos = pos, text.find(old, pos + len(old))
    return tuple(spans)


def _whole_lines(text: str, old: str, at: int) -> bool:
    """Whether ``old``, found at ``at``, is two or more whole lines of ``text``."""
    end = at + len(old)
    return (old.count("\n") - old.endswith("\n") >= 1 and (at == 0 or text[at - 1] == "\n")
            and (old.endswith("\n") or end == len(text) or text[end] == "\n"))


def _replace_lines(text: str, old: str, new: str, rel: str, *, replace_all: bool,
                   first_rung: int = 1) -> Landed:
    """``old`` as whole lines, found by the rungs from ``first_rung`` on."""
    lines = text.split("\n")
    ends_with_newline = lines[-1] == "" and len(lines) > 1
    body = lines[:-1] if ends_with_newline else lines
    want, repl = _blocks(old, new)
    doc = Lines(body)
    found = doc.find(want, first_rung=first_rung) if want else None
    if found is None:
        raise ToolError(f"old was not found in {rel}. {printable(near_miss(text, old))}")
    k = len(want)
    if len(found.starts) > 1 and not replace_all:
        spans = [f"{s + 1}-{s + k}" if k > 1 else str(s + 1) for s in found.starts]
        raise ToolError(
            f"old appears {_count(spans)} in {rel}{_when(found.rung)} (at lines "
            f"{', '.join(spans[:_SHOW_PLACES])}{_more(spans)}); include more surrounding "
            "lines so it is unique, or pass replace_all=true to replace every one")
    if replace_all and len(found.starts) >= MAX_PLACES:
        raise ToolError(f"old matches {MAX_PLACES} or more places in {rel} when "
                        f"{IGNORED[found.rung]}; replace_all changes at most {MAX_PLACES - 1} "
                        "loose matches (exact ones have no limit): copy old exactly")
    starts = _apart(found.starts, k)
    made = [adapt(body[s : s + k], want, repl, found.rung, found.indents.get(s)) for s in starts]
    spans, shift = [], 0
    for start, lines in zip(starts, made, strict=True):
        spans.append(trimmed(start + shift, body[start : start + k], lines))
        shift += len(lines) - k
    for start, lines in zip(reversed(starts), reversed(made), strict=True):
        body[start : start + k] = lines
    text = "\n".join(body) + ("\n" if ends_with_newline else "")
    return Landed(text, len(starts), found.rung, tuple(spans))


def _when(rung: int) -> str:
    return f" when {IGNORED[rung]}" if rung else ""


def _blocks(old: str, new: str) -> tuple[list[str], list[str]]:
    """``old`` and ``new`` as lists of whole lines: a newline both end (or start) with is
    the line's own, and an empty ``new`` for lines ending in a newline removes them."""
    if old.startswith("\n") and new.startswith("\n"):
        old, new = old[1:], new[1:]
    want, repl = old.split("\n"), new.split("\n")
    if old.endswith("\n"):
        want.pop()
        if new.endswith("\n") or not new:
            repl.pop()
    return want, repl


def _apart(starts: list[int], k: int) -> list[int]:
    """The places that do not overlap an earlier one (what replace_all replaces)."""
    kept: list[int] = []
    for start in starts:
        if not kept or start >= kept[-1] + k:
            kept.append(start)
    return kept


def _places(text: str, needle: str, most: int = 1000) -> list[str]:
    """Line numbers of the places ``needle`` starts, overlapping ones included."""
    found: list[str] = []
    line, last = 1, 0
    pos = text.find(needle)
    while pos >= 0 and len(found) < most:
        line += text.count("\n", last, pos)
        found.append(str(line))
        last, pos = pos, text.find(needle, pos + 1)
    return found


def _count(places: list[str]) -> str:
    return f"{len(places)}x" if len(places) < 1000 else "1000+ times"


def _more(places: list[str]) -> str:
    return f", ... {len(places) - _SHOW_PLACES} more" if len(places) > _SHOW_PLACES else ""


def edit_list(old: str, new: str, replace_all: bool,
              edits: list[dict[str, Any]] | None) -> list[Edit]:
    """The edits of one edit_file call: ``old``/``new`` first (when given), then ``edits``."""
    items = [Edit(old, new, replace_all)] if old or new else []
    for i, item in enumerate(edits or []):
        where = f"edits[{i}]"
        if not isinstance(item, dict):
            raise ToolError(f"{where} must be an object such as "
                            '{"old": "a = 1", "new": "a = 2"}')
        unknown = sorted(set(item) - {"old", "new", "replace_all"})
        if unknown:
            raise ToolError(f"{where} has no key {unknown[0]!r}; an edit takes old, new and "
                            "replace_all")
        if not isinstance(item.get("old"), str) or not isinstance(item.get("new"), str):
            raise ToolError(f"{where} needs old and new, both strings")
        every = item.get("replace_all", False)
        if isinstance(every, str) and every.lower() in ("true", "false"):
            every = every.lower() == "true"
        if not isinstance(every, bool):
            raise ToolError(f"{where}: replace_all must be true or false")
        items.append(Edit(item["old"], item["new"], every))
    if not items:
        raise ToolError('give old and new, or edits=[{"old": ..., "new": ...}, ...]')
    if len(items) > MAX_EDITS:
        raise ToolError(f"{len(items)} edits in one call; at most {MAX_EDITS} (split them, or "
                        "use apply_patch)")
    return items


def summary(rel: str, landed: list[Landed]) -> str:
    count = sum(done.count for done in landed)
    noun = "replacement" if count == 1 else "replacements"
    if len(landed) == 1:
        note = f"; {NOTES[landed[0].rung]}" if landed[0].rung else ""
        return f"edited {rel} ({count} {noun}{note})"
    notes = "".join(f"; edit {n} {NOTES[done.rung]}" for n, done in enumerate(landed, 1)
                    if done.rung)
    return f"edited {rel} ({len(landed)} edits, {count} {noun}{notes})"
