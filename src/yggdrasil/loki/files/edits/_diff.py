"""Compact unified diffs of what an edit or a patch changed, capped, the cut announced.

The edit tools know which lines they replaced, so they record those spans (``Spans``)
instead of diffing whole files: the diff of one edit in a 50 MB file costs the edit, not
the file. A whole-file comparison (``whole``, for write_file) trims the common head and
tail first.
"""

from __future__ import annotations

import bisect
import difflib
from dataclasses import dataclass, field

from ...results import DIFF_LINE_CHARS, DiffHunk, UnifiedDiff, clip_line
from .._text import printable

__all__ = [
    "CONTEXT", "MAX_CONFIRM_LINES", "MAX_DIFF_LINES", "Change", "ConfirmAction", "Spans",
    "lines_of", "render", "trimmed", "whole",
]

CONTEXT = 2  # unchanged lines shown around a change
MAX_DIFF_LINES = 80  # diff lines in one observation
MAX_CONFIRM_LINES = 400  # diff lines shown with a confirm question
_EXACT_LIMIT = 5_000  # lines per side diffed without difflib's junk heuristic


class ConfirmAction(str):
    """A confirm question (``"edit cli.py"``) that also carries the diff it asks about.

    It is a ``str``, so ``confirm(action: str) -> bool`` callbacks keep working; a terminal
    prompt shows ``action.diff`` above the question. ``key`` is what an "always" answer
    covers (default: the question itself, i.e. this verb on this path).
    """

    diff: str
    key: str

    def __new__(cls, action: str, diff: str = "", key: str = "") -> ConfirmAction:
        made = super().__new__(cls, action)
        made.diff = diff
        made.key = key or action
        return made


@dataclass(frozen=True)
class Change:
    """Lines [a0, a1) of the text before became lines [b0, b1) of the text after."""

    a0: int
    a1: int
    b0: int
    b1: int

    @property
    def delta(self) -> int:
        return (self.b1 - self.b0) - (self.a1 - self.a0)


@dataclass
class Spans:
    """The changed spans of a text, kept in before- and after-line numbers as replacements
    pile up (each given in the line numbers of the text as it is at that moment)."""

    changes: list[Change] = field(default_factory=list)

    def replaced(self, start: int, end: int, count: int) -> None:
        """Lines [start, end) of the current text were replaced by ``count`` lines."""
        changes = self.changes
        i = bisect.bisect_left(changes, start, key=lambda c: c.b1)  # first touching
        j = bisect.bisect_right(changes, end, key=lambda c: c.b0)  # first after
        touching = changes[i:j]
        # after a change, before- and after-line numbers differ by a constant until the next
        shift = changes[i - 1].b1 - changes[i - 1].a1 if i else 0
        shift_all = touching[-1].b1 - touching[-1].a1 if touching else shift
        lo = min(start, touching[0].b0) if touching else start
        hi = max(end, touching[-1].b1) if touching else end
        a0 = touching[0].a0 if touching and touching[0].b0 <= start else start - shift
        a1 = touching[-1].a1 if touching and touching[-1].b1 >= end else end - shift_all
        step = count - (end - start)
        changes[i:j] = [Change(a0, a1, lo, hi + step)]
        for k in range(i + 1, len(changes)):  # usually none: edits mostly go down the file
            c = changes[k]
            changes[k] = Change(c.a0, c.a1, c.b0 + step, c.b1 + step)


def trimmed(start: int, old: list[str], new: list[str]) -> tuple[int, int, int]:
    """The span (start, end, count) of lines ``old`` at ``start`` replaced by ``new``,
    without the lines both begin and end with (context that did not change)."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return start + head, start + len(old) - tail, len(new) - head - tail


def lines_of(text: str) -> list[str]:
    """A text's lines as diffs show them: no empty piece after a final newline."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def whole(before: list[str], after: list[str]) -> list[Change]:
    """The one span between two texts once their common head and tail are set aside."""
    head = 0
    for x, y in zip(before, after, strict=False):
        if x != y:
            break
        head += 1
    tail = 0
    limit = min(len(before), len(after)) - head
    while tail < limit and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    if head == len(before) == len(after):
        return []
    return [Change(head, len(before) - tail, head, len(after) - tail)]


def render(before: list[str], after: list[str], changes: list[Change], name_a: str,
           name_b: str | None = None, *, limit: int = MAX_DIFF_LINES,
           see: str = "") -> UnifiedDiff | None:
    """The unified diff (``---``/``+++`` headers, then hunks) of the given spans, of at
    most about ``limit`` lines, what was cut counted (``see``: the file to read for it);
    None when nothing changed."""
    # a span may reach the empty piece after a final newline, which ``lines_of`` drops
    changes = [Change(min(c.a0, len(before)), min(c.a1, len(before)),
                      min(c.b0, len(after)), min(c.b1, len(after))) for c in changes]
    if not changes:
        return None
    groups: list[list[Change]] = [[changes[0]]]
    for change in changes[1:]:
        if change.a0 - groups[-1][-1].a1 <= 2 * CONTEXT:
            groups[-1].append(change)
        else:
            groups.append([change])
    hunks: list[DiffHunk] = []
    shown, more = 2, 0  # lines so far: the two headers
    for n, group in enumerate(groups):
        (a_lo, a_hi, b_lo, b_hi), body = _hunk(before, after, group)
        if shown + 1 + len(body) > limit and n:
            more = len(groups) - n
            break
        room = max(limit - shown, 3)  # lines of this hunk shown, its header one of them
        kept = body[: room - 1]
        hunks.append(DiffHunk(
            old_start=_start(a_lo, a_hi), old_lines=a_hi - a_lo,
            new_start=_start(b_lo, b_hi), new_lines=b_hi - b_lo, cut=len(body) - len(kept),
            lines=[clip_line(printable(line), DIFF_LINE_CHARS) for line in kept]))
        shown += 1 + len(kept) + (len(kept) < len(body))  # and the cut note
    return UnifiedDiff(old_path=name_a, new_path=name_b or name_a, hunks=hunks,
                       more_places=more, see=see)


def _hunk(before: list[str], after: list[str], group: list[Change]
          ) -> tuple[tuple[int, int, int, int], list[str]]:
    """A hunk's spans (before: lines [a_lo, a_hi), after: [b_lo, b_hi)) and its lines."""
    first, last = group[0], group[-1]
    a_lo = max(0, first.a0 - CONTEXT)
    a_hi = min(len(before), last.a1 + CONTEXT)
    b_lo = first.b0 - (first.a0 - a_lo)
    b_hi = last.b1 + (a_hi - last.a1)
    body: list[str] = []
    cursor = a_lo
    for change in group:
        body += [" " + line for line in before[cursor : change.a0]]
        body += _inside(before[change.a0 : change.a1], after[change.b0 : change.b1])
        cursor = change.a1
    body += [" " + line for line in before[cursor:a_hi]]
    return (a_lo, a_hi, b_lo, b_hi), body


def _start(lo: int, hi: int) -> int:
    """A span's start as a hunk header says it: 1-based, the line before when empty."""
    return lo + 1 if hi > lo else lo


def _inside(old: list[str], new: list[str]) -> list[str]:
    """The smallest diff of one changed span (its lines often match in part)."""
    junk = len(old) > _EXACT_LIMIT or len(new) > _EXACT_LIMIT  # keep it near-linear
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=junk)
    lines: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            lines += [" " + line for line in old[i1:i2]]
        else:
            lines += ["-" + line for line in old[i1:i2]]
            lines += ["+" + line for line in new[j1:j2]]
    return lines
