"""Text edits that land where the model meant, or nowhere, and help when they miss.

``replace`` finds ``old`` exactly (as a substring) first; when it is not there, as whole
lines by the looser rungs of ``_match`` (line endings, trailing whitespace, indentation,
typographic punctuation), then as one of the slips of ``_slips`` (read_file's line
numbers in front of every line, blank lines left out), writing ``new`` in the file's
conventions. Two or more places
at the first rung that matches are refused, listing them. When nothing matches, the error
points at the closest near-match. ``apply_edits`` runs several edits in order on the
evolving text, all or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Required

from pydantic import ConfigDict
from typing_extensions import TypedDict

from ...errors import ToolError
from ...results import LandedEdit
from .._text import printable
from ._diff import trimmed
from ._match import FORGIVEN, IGNORED, LOOSEST, MAX_PLACES, Lines, adapt
from ._nearmiss import near_miss
from ._slips import unblanked, unnumbered

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
    slip: str = ""  # a slip of _slips that was forgiven as well (NUMBERS, BLANKS)


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
                            f"{rel} is unchanged)", category=exc.category, hint=exc.hint,
                            rule=exc.rule) from exc
        landed.append(done)
        text = done.text
    return text, landed


def replace(text: str, old: str, new: str, rel: str, *, replace_all: bool = False) -> Landed:
    """``text`` with ``old`` replaced by ``new``; ToolError leaves no change."""
    if not old:
        raise ToolError("old must not be empty; to create or rewrite a whole file use write_file",
                        category="argument")
    if old == new:
        raise ToolError("old and new are the same; there is nothing to change",
                        category="argument")
    first = text.find(old)
    if first < 0:
        return _replace_lines(text, old, new, rel, replace_all=replace_all)
    if replace_all:
        return Landed(text.replace(old, new), text.count(old), 0, _exact_spans(text, old, new))
    if text.find(old, first + 1) >= 0:  # overlapping places count: "a\na" in "a\na\na" is two
        found = _places(text, old)
        raise ToolError(
            f"old appears {_count(found)} in {rel} (at lines {', '.join(found[:_SHOW_PLACES])}"
            f"{_more(found)}); include more surrounding lines so it is unique, or pass "
            "replace_all=true to replace every one")
    _no_other_place(text, old, first, rel)
    line = text.count("\n", 0, first)
    span = trimmed(line, text[first : first + len(old)].split("\n"), new.split("\n"))
    return Landed(text[:first] + new + text[first + len(old):], 1, 0, (span,))


def _no_other_place(text: str, old: str, first: int, rel: str) -> None:
    """Refuse a unique exact match of several lines when the loosest rung finds them at
    another place too: a slip (a block over-indented onto a deeper copy of itself, a first
    line dedented onto another block) can make ``old`` the exact text of a place that was
    not meant. One line is not checked: the same statement at another depth is common,
    and a substring match already finds every deeper copy."""
    want = old.strip("\n").split("\n")
    if len(want) < 2:
        return
    here = text.count("\n", 0, first + len(old) - len(old.lstrip("\n")))
    doc = Lines(_body(text)[0])
    loose = doc.at(want, LOOSEST)
    if loose is None or all(start == here for start in loose.starts):
        return
    rung = next(r for r in range(1, LOOSEST + 1)
                if (f := doc.at(want, r)) and any(start != here for start in f.starts))
    found = doc.at(want, rung)
    places = sorted({here, *(found.starts if found else [])})
    spans = [f"{s + 1}-{s + len(want)}" for s in places]
    raise ToolError(
        f"old appears {_count(spans)} in {rel}{_when(rung)} (at lines "
        f"{', '.join(spans[:_SHOW_PLACES])}{_more(spans)}; exactly at line {here + 1}); "
        "include more surrounding lines so it is unique, or pass replace_all=true to replace "
        "every one")


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


def _body(text: str) -> tuple[list[str], bool]:
    """The lines of ``text`` without the empty piece after a final newline, and whether
    there was one."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        return lines[:-1], True
    return lines, False


def _replace_lines(text: str, old: str, new: str, rel: str, *, replace_all: bool) -> Landed:
    """``old`` as whole lines, found by the looser rungs (exact was tried as a substring),
    else as one of the slips of ``_slips`` (line numbers in front, blank lines left out).

    Each place found is then replaced like a substring: the matched lines (with the line
    break after them when ``old`` ends with one) become ``new`` written in the file's
    conventions (with a line break when ``new`` ends with one), so a loose match changes
    the file exactly as the same edit would have had it matched exactly.
    """
    body, _ = _body(text)
    want, repl, old_nl, new_nl = _blocks(old, new)
    doc = Lines(body)
    found = doc.find(want, first_rung=1) if want else None
    slipped = None
    if found is None and want:
        slipped = unnumbered(want, repl, doc) or unblanked(want, repl, body)
        found = slipped.found if slipped else None
    if found is None:
        raise ToolError(f"old was not found in {rel}. {printable(near_miss(text, old))}")
    slip = slipped.slip if slipped else ""
    spans_of = slipped.spans if slipped else {}
    if len(found.starts) > 1 and not replace_all:
        where = [_lines(s, spans_of.get(s, len(want))) for s in found.starts]
        raise ToolError(
            f"old appears {_count(where)} in {rel}{_when(found.rung, slip)} (at lines "
            f"{', '.join(where[:_SHOW_PLACES])}{_more(where)}); include more surrounding "
            "lines so it is unique, or pass replace_all=true to replace every one")
    if replace_all and len(found.starts) >= MAX_PLACES:
        raise ToolError(f"old matches {MAX_PLACES} or more places in {rel} when "
                        f"{IGNORED[found.rung]}; replace_all changes at most {MAX_PLACES - 1} "
                        "loose matches (exact ones have no limit): copy old exactly")
    pieces: list[str] = []
    spans: list[tuple[int, int, int]] = []
    cursor = shift = 0
    for start in _apart(found.starts, spans_of, len(want)):
        k = spans_of.get(start, len(want))
        olds = slipped.old_at(start) if slipped else want
        news = slipped.new_at(start, rel) if slipped else repl
        made = adapt(body[start : start + k], olds, news, found.rung, found.indents.get(start))
        a = doc.offset(start)
        # up to the line break after the block (included when old ends with one)
        b = min(doc.offset(start + k) - (0 if old_nl else 1), len(text))
        rep = "\n".join(made) + ("\n" if new_nl else "")
        pieces += [text[cursor:a], rep]
        was = text[a:b]
        spans.append(trimmed(start + shift, was.split("\n"), rep.split("\n")))
        shift += rep.count("\n") - was.count("\n")
        cursor = b
    pieces.append(text[cursor:])
    return Landed("".join(pieces), len(spans), found.rung, tuple(spans), slip)


def _lines(start: int, k: int) -> str:
    return f"{start + 1}-{start + k}" if k > 1 else str(start + 1)


def _when(rung: int, slip: str = "") -> str:
    ignored = [f"{slip} are ignored"] if slip else []
    ignored += [IGNORED[rung]] if rung else []
    return f" when {' and '.join(ignored)}" if ignored else ""


def _blocks(old: str, new: str) -> tuple[list[str], list[str], bool, bool]:
    """``old`` and ``new`` as lists of whole lines, and whether each ends with a line break
    (a newline both start with is the previous line's, and is left out of both)."""
    if old.startswith("\n") and new.startswith("\n"):
        old, new = old[1:], new[1:]
    old_nl, new_nl = old.endswith("\n"), new.endswith("\n")
    want = (old[:-1] if old_nl else old).split("\n")
    repl = (new[:-1] if new_nl else new).split("\n")
    return want, repl, old_nl, new_nl


def _apart(starts: list[int], spans: dict[int, int], k: int) -> list[int]:
    """The places that do not overlap an earlier one (what replace_all replaces); a place
    spans ``spans[start]`` lines, else ``k``."""
    kept: list[int] = []
    for start in starts:
        if not kept or start >= kept[-1] + spans.get(kept[-1], k):
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


class EditItem(TypedDict, total=False):
    """One edit: replace old with new (every occurrence with replace_all)."""

    # edit_file's ``edits`` schema is made from this class: its docstring is what a model
    # reads, and unknown keys are refused (extra="forbid")

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    old: Required[str]
    new: Required[str]
    replace_all: bool


def edit_list(old: str, new: str, replace_all: bool,
              edits: list[EditItem] | list[dict[str, Any]] | None) -> list[Edit]:
    """The edits of one edit_file call: ``old``/``new`` first (when given), then ``edits``."""
    items = [Edit(old, new, replace_all)] if old or new else []
    for i, item in enumerate(edits or []):
        where = f"edits[{i}]"
        if not isinstance(item, dict):
            raise ToolError(f"{where} must be an object such as "
                            '{"old": "a = 1", "new": "a = 2"}', category="argument")
        unknown = sorted(set(item) - {"old", "new", "replace_all"})
        if unknown:
            raise ToolError(f"{where} has no key {unknown[0]!r}; an edit takes old, new and "
                            "replace_all", category="argument")
        if not isinstance(item.get("old"), str) or not isinstance(item.get("new"), str):
            raise ToolError(f"{where} needs old and new, both strings", category="argument")
        every = item.get("replace_all") or False  # null (strict schemas) is the default
        if isinstance(every, str) and every.lower() in ("true", "false"):
            every = every.lower() == "true"
        if not isinstance(every, bool):
            raise ToolError(f"{where}: replace_all must be true or false", category="argument")
        items.append(Edit(item["old"], item["new"], every))
    if not items:
        raise ToolError('give old and new, or edits=[{"old": ..., "new": ...}, ...]',
                        category="argument")
    if len(items) > MAX_EDITS:
        raise ToolError(f"{len(items)} edits in one call; at most {MAX_EDITS} (split them, or "
                        "use apply_patch)", category="argument")
    return items


def landed_edits(landed: list[Landed]) -> list[LandedEdit]:
    """How each edit landed, as data: its places, exact or loose, and what a loose match
    forgave (the slip first: ``line-number prefixes``, then the rung's ``indentation``)."""
    edits = []
    for done in landed:
        ignored = [what for what in (done.slip, FORGIVEN[done.rung]) if what]
        edits.append(LandedEdit(replacements=done.count, match="loose" if ignored else "exact",
                                ignored=ignored))
    return edits
