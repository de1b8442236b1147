"""Two slips of ``old`` that the per-line rungs of ``_match`` cannot see, because they
change which lines ``old`` has rather than how a line reads:

- line numbers copied from read_file's numbered view (``<n>\\t<text>``) in front of every
  line. The numbers say where the block is, so it is looked for there only, by the
  rungs of ``_match``: consecutive numbers and the file's text at exactly those lines,
  or no match. A ``new`` whose lines carry numbers too has them removed.
- blank lines of the file left out of ``old``: the block is looked for among the file's
  non-blank lines by the rungs of ``_match``, and must be found at one place. The file's
  blank lines are put back into ``new`` where ``new`` leaves the lines around them as
  they were (the same lines, or each rewritten in place); when ``new`` changes what
  surrounds a left-out blank line, where it belongs is unclear and the edit is refused.

Both are tried only when no rung matched ``old`` as written.
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass, field

from ...errors import ToolError
from ._match import Lines, Matched

__all__ = ["BLANKS", "NUMBERS", "Slipped", "unblanked", "unnumbered"]

NUMBERS = "line-number prefixes"
BLANKS = "blank lines"

_PREFIX = re.compile(r" *(\d{1,9})(?:\t|$)")


@dataclass
class Slipped:
    """Where a slipped ``old`` matched: ``found`` (its starts are lines of the file),
    the file lines each place spans, and ``old``/``new`` as they apply to each place."""

    slip: str
    found: Matched
    want: list[str]  # old without the slip's numbers
    new: list[str]  # new without them
    spans: dict[int, int] = field(default_factory=dict)  # start -> file lines it spans
    # start -> the file's blank lines old leaves out: (line of old they go before, lines)
    inserts: dict[int, list[tuple[int, list[str]]]] = field(default_factory=dict)

    def old_at(self, start: int) -> list[str]:
        """``old`` aligned one for one with the file's lines at ``start``."""
        return _put(self.want, self.inserts.get(start, []))

    def new_at(self, start: int, rel: str) -> list[str]:
        """``new`` with what the slip left out put back, for the place at ``start``."""
        inserts = self.inserts.get(start)
        if not inserts:
            return self.new
        return _put(self.new, _moved(inserts, self.want, self.new, rel, start))


def unnumbered(want: list[str], repl: list[str], doc: Lines) -> Slipped | None:
    """``old`` with line numbers, matched at the lines it names (None: not that slip).
    ToolError when the numbers name lines that hold other text."""
    numbers, bare = _numbers(want)
    if (numbers is None or numbers[0] < 1 or not any(line.strip() for line in bare)
            or any(b - a != 1 for a, b in itertools.pairwise(numbers))):
        return None
    first, k = numbers[0] - 1, len(want)
    found = doc.find(bare, lo=first, hi=first + k) if first + k <= len(doc.lines) else None
    if found is None:
        raise ToolError(
            f"old carries read_file's line numbers ({first + 1}-{first + k}), but those "
            "lines of the file hold other text (the file may have changed since it was "
            f"read): read_file lines {first + 1}-{first + k} again, and copy old without "
            "the numbers")
    new_numbers, new_bare = _numbers(repl, every=False)
    new = new_bare if new_numbers is not None else repl
    return Slipped(NUMBERS, found, bare, new, {first: k})


def _numbers(lines: list[str], *, every: bool = True) -> tuple[list[int] | None, list[str]]:
    """The numbers in front of the lines and the lines without them; (None, lines) when
    not every line carries one (with ``every=False``: when none does)."""
    numbers: list[int] = []
    bare: list[str] = []
    for line in lines:
        prefix = _PREFIX.match(line)
        if prefix is None:
            if every:
                return None, lines
            bare.append(line)
            continue
        numbers.append(int(prefix.group(1)))
        bare.append(line[prefix.end():])
    return (numbers or None), bare


def unblanked(want: list[str], repl: list[str], body: list[str]) -> Slipped | None:
    """``old`` matched among the file's non-blank lines, at places where the file has
    every blank line ``old`` has and more between its first and last non-blank lines, and
    the blank lines ``old`` has before and after them (None: no such place)."""
    mine = [i for i, line in enumerate(want) if line.strip()]
    if len(mine) < 2:
        return None
    lead, trail = mine[0], len(want) - 1 - mine[-1]
    filled = [i for i, line in enumerate(body) if line.strip()]
    if len(filled) == len(body):
        return None
    dense = [want[i] for i in mine]
    found = Lines([body[i] for i in filled]).find(dense)
    if found is None:
        return None
    slipped = Slipped(BLANKS, Matched(found.rung, []), want, repl)
    for s in found.starts:
        first, end = filled[s], filled[s + len(dense) - 1] + 1
        start = first - lead
        inserts = _left_out(body[first:end], want[lead : len(want) - trail])
        if (inserts is None or start < 0 or end + trail > len(body)
                or any(line.strip() for line in body[start:first] + body[end : end + trail])):
            continue
        slipped.found.starts.append(start)
        slipped.spans[start] = end + trail - start
        slipped.inserts[start] = [(pos + lead, run) for pos, run in inserts]
        if s in found.indents:
            slipped.found.indents[start] = found.indents[s]
    return slipped if slipped.found.starts else None


def _left_out(block: list[str], want: list[str]) -> list[tuple[int, list[str]]] | None:
    """The blank lines of ``block`` that ``want`` leaves out, as (line of want they go
    before, lines); None when ``want`` has blank lines ``block`` lacks."""
    have = [i for i, line in enumerate(block) if line.strip()]
    mine = [i for i, line in enumerate(want) if line.strip()]
    inserts: list[tuple[int, list[str]]] = []
    for g in range(len(mine) - 1):
        missing = (have[g + 1] - have[g]) - (mine[g + 1] - mine[g])
        if missing < 0:
            return None
        if missing:
            inserts.append((mine[g + 1], block[have[g + 1] - missing : have[g + 1]]))
    return inserts


def _put(lines: list[str], inserts: list[tuple[int, list[str]]]) -> list[str]:
    out = list(lines)
    for pos, run in reversed(inserts):
        out[pos:pos] = run
    return out


def _moved(inserts: list[tuple[int, list[str]]], want: list[str], new: list[str], rel: str,
           start: int) -> list[tuple[int, list[str]]]:
    """The same insertions into ``new``: between the lines that ``new`` keeps or rewrites
    in place of the two lines of ``want`` around each."""
    at = _mapping(want, new)
    moved: list[tuple[int, list[str]]] = []
    for pos, run in inserts:
        before, after = at.get(pos - 1), at.get(pos)
        if before is None or after is None or after != before + 1:
            raise ToolError(
                f"old leaves out {len(run)} blank line(s) that {rel} has near line "
                f"{start + pos + 1}, and new changes the lines around them, so where they "
                "belong is unclear; copy old with the file's blank lines")
        moved.append((after, run))
    return moved


def _mapping(want: list[str], new: list[str]) -> dict[int, int]:
    """Line of ``new`` for each line of ``want`` that new keeps or rewrites in place."""
    at: dict[int, int] = {}
    ops = difflib.SequenceMatcher(None, want, new, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            at.update({i: j1 + i - i1 for i in range(i1, i2)})
    return at
