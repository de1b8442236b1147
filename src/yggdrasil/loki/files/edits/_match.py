"""Where a block of lines is in a file: exactly, else by looser rungs that forgive slips
of form and never bridge a difference of content.

Rungs, tried in order on whole lines; the first rung at which the block matches anywhere
decides (a looser rung only finds more places, never fewer):

0. exact;
1. line endings: a CR at the end of a line is ignored;
2. trailing whitespace is ignored;
3. indentation: the block as a whole dedented, over-indented, or with spaces where the
   file has tabs. Leading whitespace is ignored line by line, but the indentation widths
   must map one to one and keep their order (a line deeper than another in the file is
   deeper in ``old`` too), so the block's structure is the file's;
4. typographic punctuation: curly quotes, dashes, non-breaking spaces and the ellipsis
   compare as their ASCII forms.

Nothing else is forgiven: another identifier, a changed number or operator, a missing
line is never a match. ``adapt`` then writes the replacement in the file's conventions.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import re
from dataclasses import dataclass, field

from ...errors import ToolError

__all__ = ["FORGIVEN", "IGNORED", "LOOSEST", "Indent", "Lines", "Matched", "adapt", "key"]

# what each rung forgives (a loose match says "matched ignoring <it>"); rung 0 is exact
FORGIVEN = ("", "line endings", "trailing whitespace", "indentation", "typographic punctuation")
IGNORED = ("", "line endings are ignored", "trailing whitespace is ignored",
           "indentation is ignored", "typographic punctuation is ignored")
LOOSEST = len(FORGIVEN) - 1
MAX_PLACES = 10_000  # places collected per search; enough to say "ambiguous" and list some
TAB = 4  # columns a tab counts for when widths are compared (any fixed value works)

_TYPOGRAPHIC = {
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000",
                    " "),
    "\u2026": "...",
}
_TO_ASCII = str.maketrans(_TYPOGRAPHIC)
_TYPOGRAPHIC_RE = re.compile("[" + "".join(_TYPOGRAPHIC) + "]")


def key(line: str, rung: int) -> str:
    """A line as rung ``rung`` compares it."""
    if rung == 0:
        return line
    if rung == 1:
        return line.removesuffix("\r")
    if rung == 2:
        return line.rstrip()
    if rung == 3:
        return line.strip()
    return line.translate(_TO_ASCII).strip()


def _keys(lines: list[str], rung: int) -> list[str]:
    """``key`` of every line, with the common rungs done by str methods at C speed."""
    if rung == 0:
        return lines
    if rung == 2:
        return list(map(str.rstrip, lines))
    if rung == 3:
        return list(map(str.strip, lines))
    return [key(line, rung) for line in lines]


def _width(line: str) -> int:
    return len(line[: len(line) - len(line.lstrip())].expandtabs(TAB))


def _lead(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


@dataclass
class Indent:
    """How the indentation of ``old`` maps onto the file's: old width -> file width, and
    the file's own leading whitespace for each width it uses."""

    widths: dict[int, int]
    leads: dict[int, str]
    tabs: bool

    @classmethod
    def between(cls, block: list[str], want: list[str]) -> Indent | None:
        """The map, or None when it is not one to one and in order (another structure)."""
        widths: dict[int, int] = {}
        leads: dict[int, str] = {}
        for have, line in zip(block, want, strict=True):
            if not line.strip():
                continue
            if widths.setdefault(_width(line), _width(have)) != _width(have):
                return None
            leads.setdefault(_width(line), _lead(have))
        ordered = [widths[w] for w in sorted(widths)]
        if any(b <= a for a, b in itertools.pairwise(ordered)):
            return None
        return cls(widths, leads, tabs=any("\t" in lead for lead in leads.values()))

    def lead(self, width: int) -> str | None:
        """The file's leading whitespace for a line ``old`` would indent by ``width``."""
        if width in self.leads:
            return self.leads[width]
        olds = sorted(self.widths)
        scale = 1.0
        if len(olds) >= 2:
            a, b = olds[0], olds[-1]
            scale = (self.widths[b] - self.widths[a]) / (b - a)
            if any(self.widths[w] != self.widths[a] + scale * (w - a) for w in olds):
                return None  # not a uniform shift or scale: a new width has no clear place
        mapped = self.widths[olds[0]] + scale * (width - olds[0]) if olds else width
        if mapped < 0 or mapped != int(mapped):
            return None
        cols = int(mapped)
        return "\t" * (cols // TAB) + " " * (cols % TAB) if self.tabs else " " * cols


@dataclass
class Matched:
    """The places a block matched at the first rung where it matched at all."""

    rung: int
    starts: list[int]
    indents: dict[int, Indent] = field(default_factory=dict)


class Lines:
    """Lines of a file, searchable per rung (each rung's keys are built once, on demand)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self._hay: dict[int, tuple[str, list[int]]] = {}
        self._has_typographic: bool | None = None

    def _haystack(self, rung: int) -> tuple[str, list[int]]:
        if rung == LOOSEST and not self._typographic():
            return self._haystack(LOOSEST - 1)  # the same keys: nothing to translate
        if rung not in self._hay:
            keys = _keys(self.lines, rung)
            # lengths[i] + i: where the "\n" before line i sits in the haystack
            lengths = list(itertools.accumulate(map(len, keys), initial=0))
            self._hay[rung] = ("\n" + "\n".join(keys) + "\n", lengths)
        return self._hay[rung]

    def _typographic(self) -> bool:
        if self._has_typographic is None:
            self._has_typographic = _TYPOGRAPHIC_RE.search("\n".join(self.lines)) is not None
        return self._has_typographic

    def places(self, want: list[str], rung: int, lo: int = 0, hi: int | None = None) -> list[int]:
        """Starts (>= lo, block ending <= hi) where ``want`` matches at ``rung``, overlapping
        ones included; rungs 3 and 4 keep only places whose indentation maps (Indent)."""
        hi = len(self.lines) if hi is None else hi
        if len(want) > hi - lo:
            return []
        hay, lengths = self._haystack(rung)
        pattern = "\n" + "\n".join(key(w, rung) for w in want) + "\n"
        found: list[int] = []
        pos = hay.find(pattern, lengths[lo] + lo)
        while pos >= 0 and len(found) < MAX_PLACES:
            start = bisect.bisect_left(range(len(lengths)), pos, key=lambda i: lengths[i] + i)
            if start + len(want) > hi:
                break
            found.append(start)
            pos = hay.find(pattern, pos + 1)
        return found

    def find(self, want: list[str], *, lo: int = 0, hi: int | None = None,
             first_rung: int = 0) -> Matched | None:
        """The first rung with any match, and its places; None when no rung matches.

        One place found at a strict rung is also looked for at the loosest: a slip can
        turn ``old`` into the exact text of another place (a block over-indented onto a
        deeper copy of itself). When the loosest rung finds more places, the first rung
        that does is returned, so the caller refuses and lists them.
        """
        for rung in range(first_rung, LOOSEST + 1):
            found = self.at(want, rung, lo, hi)
            if found is None:
                continue
            if len(found.starts) == 1 and rung < LOOSEST and len(want) > 1:
                loose = self.at(want, LOOSEST, lo, hi)
                if loose is not None and len(loose.starts) > 1:
                    return next(f for r in range(rung + 1, LOOSEST + 1)
                                if (f := self.at(want, r, lo, hi)) and len(f.starts) > 1)
            return found
        return None

    def offset(self, line: int) -> int:
        """Where line ``line`` starts in the text the lines were split from (on "\\n")."""
        lengths = self._haystack(0)[1]
        return lengths[line] + line

    def at(self, want: list[str], rung: int, lo: int = 0, hi: int | None = None) -> Matched | None:
        """The places ``want`` matches at ``rung`` alone (None: none)."""
        starts = self.places(want, rung, lo, hi)
        indents: dict[int, Indent] = {}
        if rung >= 3:
            for start in starts:
                indent = Indent.between(self.lines[start : start + len(want)], want)
                if indent is not None:
                    indents[start] = indent
            starts = list(indents)
        return Matched(rung, starts, indents) if starts else None


def adapt(block: list[str], want: list[str], new: list[str], rung: int,
          indent: Indent | None) -> list[str]:
    """``new`` written in the file's conventions, given that ``want`` matched ``block``.

    Lines of ``new`` equal to a line of ``want`` (aligned by a line diff) are taken from
    the file as they are. Changed and added lines get the file's line ending, with a loose
    match its indentation (mapped like the block's), no trailing whitespace where ``old``
    had some the file did not, where ``old`` had typographic punctuation the file did
    not, the ASCII forms, and where the file had typographic punctuation ``old`` wrote in
    ASCII, the file's characters wherever a changed line left that text as it was.
    """
    if rung == 0:
        return list(new)
    ends_cr = sum(line.endswith("\r") for line in block) * 2 > len(block)
    slipped = _slipped_punctuation(block, want) if rung >= 4 else ""
    # old had trailing whitespace the file's lines do not: the same slip is in new
    strip = rung >= 2 and any(_trailing(w) and not _trailing(b) for b, w in zip(block, want, strict=True))
    # the file's typographic characters that old wrote in ASCII: kept where new keeps them
    kept = "".join(sorted(_typographic(block) - _typographic(want))) if rung >= 4 else ""
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, want, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += block[i1:i2]
            continue
        for j in range(j1, j2):
            line = _convert(new[j], rung, indent, slipped)
            if kept and tag == "replace":
                source = _counterpart(block[i1:i2], new[j1:j2], j - j1)
                if source is not None:
                    line = _keep_typography(source.removesuffix("\r"), line, kept)
            out.append((line.rstrip() if strip else line) + ("\r" if ends_cr else ""))
    return out


def _counterpart(lines: list[str], news: list[str], k: int) -> str | None:
    """The file line that new line ``k`` of a replaced run rewrites: the one at the same
    place when the run keeps its length; else, of the lines up to two places away, the
    one that shares the most text with it at its start and end, if that is at least half
    of the longer of the two (None: no line is clearly its source)."""
    if len(lines) == len(news):
        return lines[k]
    target = news[k]
    best, most = None, 0
    for line in lines[max(0, k - 2) : k + 3]:
        shared = _shared(line.translate(_TO_ASCII), target)
        if shared > most:
            best, most = line, shared
    if best is None or most * 2 < max(len(best.translate(_TO_ASCII)), len(target)):
        return None
    return best


def _shared(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share at their start and their end."""
    most = min(len(a), len(b))
    head = next((i for i in range(most) if a[i] != b[i]), most)
    tail = next((i for i in range(most - head) if a[-1 - i] != b[-1 - i]), most - head)
    return head + tail


def _keep_typography(source: str, line: str, kept: str) -> str:
    """``line`` with the characters of ``kept`` put back where ``source`` (the file's line)
    had them, in the text ``line`` shares with it before and after what changed (in
    ASCII): 'a \u2014 b' edited through 'a - b' into 'a - B' stays 'a \u2014 B'. A
    character right next to a change that writes its ASCII form again ('a - b' into
    'a -- b') is the model's to decide: left as written. Linear in the line's length."""
    ascii_chars: list[str] = []
    origin: list[int] = []  # for each ASCII character, the index of the source's character
    for i, ch in enumerate(source):
        form = _TYPOGRAPHIC[ch] if ch in kept else ch
        ascii_chars += form
        origin += [i] * len(form)
    flat = "".join(ascii_chars)
    most = min(len(flat), len(line))
    head = next((i for i in range(most) if flat[i] != line[i]), most)
    tail = _shared(flat, line) - head
    changed = line[head : len(line) - tail]
    before = _typography_span(source, flat, origin, kept, 0, head, changed)
    after = _typography_span(source, flat, origin, kept, len(flat) - tail, len(flat), changed)
    return before + changed + after


def _typography_span(source: str, flat: str, origin: list[int], kept: str, lo: int, hi: int,
              changed: str) -> str:
    """flat[lo:hi] (text the line shares with the file) with the file's characters of
    ``kept`` in place of their ASCII forms, except one touching ``changed`` that
    ``changed`` writes again."""
    out: list[str] = []
    k = lo
    while k < hi:
        ch = source[origin[k]]
        form = _TYPOGRAPHIC.get(ch, ch)
        whole = (k == 0 or origin[k - 1] != origin[k]) and k + len(form) <= hi
        touching = (k + len(form) == hi and hi != len(flat)) or (k == lo and lo != 0)
        if ch in kept and whole and not (touching and form in changed):
            out.append(ch)
            k += len(form)
        else:
            out.append(flat[k])
            k += 1
    return "".join(out)


def _trailing(line: str) -> bool:
    line = line.removesuffix("\r")
    return line != line.rstrip()


def _convert(line: str, rung: int, indent: Indent | None, slipped: str) -> str:
    line = line.removesuffix("\r")
    if slipped:
        line = line.translate({ord(ch): _TYPOGRAPHIC[ch] for ch in slipped})
    if rung < 3 or indent is None:
        return line
    if not line.strip():
        return ""
    lead = indent.lead(_width(line))
    if lead is None:
        raise ToolError(
            f"new has a line indented in a way the matched block does not show how to map "
            f"onto the file ({line.strip()[:60]!r}); copy the file's indentation exactly")
    return lead + line.lstrip()


def _slipped_punctuation(block: list[str], want: list[str]) -> str:
    """Typographic characters to write as ASCII in changed lines: those ``old`` used that the
    matched lines of the file do not, and, once one of a kind slipped (quotes, dashes,
    spaces), every other of that kind the file's lines do not use either."""
    in_file, in_old = _typographic(block), _typographic(want)
    slipped = in_old - in_file
    kinds = {_TYPOGRAPHIC[ch].strip("'\"") or "quote" for ch in slipped}
    same_kind = {ch for ch in _TYPOGRAPHIC if (_TYPOGRAPHIC[ch].strip("'\"") or "quote") in kinds}
    return "".join(sorted(slipped | (same_kind - in_file)))


def _typographic(lines: list[str]) -> set[str]:
    return {ch for line in lines for ch in line if ch in _TYPOGRAPHIC}
