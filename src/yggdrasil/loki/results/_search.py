"""What find and grep answer: the paths or matches shown, what was cut, what was skipped.

The text is DESIGN.md's: one path per line (find), ``path:line: text`` (grep), a line
saying how many more there were and how to narrow, then ``[skipped: ...]``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._base import Result
from ._render import renders

__all__ = ["FoundFiles", "GrepMatches", "Match", "SearchSkips", "match_line", "skip_note"]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Match(_Data):
    """One line that matched: its root-relative path, 1-based line number and text (a
    long line cut, saying how much more it had)."""

    path: str
    line: int
    text: str


class SearchSkips(_Data):
    """What the walk skipped (a skipped folder counts once); ``before_cut``: counted only
    up to where counting stopped."""

    ignored: int = 0
    hidden: int = 0
    binary: int = 0
    protected: int = 0
    before_cut: bool = False


class _Search(Result):
    pattern: str
    start: str  # the root-relative file or folder searched ('.' for the root)
    more: int = 0  # rows found beyond those shown
    more_at_least: bool = False  # counting stopped at ``counted_to``: ``more`` is a floor
    counted_to: int = 0
    include_ignored: bool = False
    skipped: SearchSkips = Field(default_factory=SearchSkips)


class FoundFiles(_Search):
    """``find``: the root-relative paths that match, in walk order."""

    kind: Literal["find"] = "find"
    paths: list[str]


class GrepMatches(_Search):
    """``grep``: the matching lines, in walk order."""

    kind: Literal["grep"] = "grep"
    matches: list[Match]


def skip_note(skipped: SearchSkips, include_ignored: bool) -> str:
    """'[skipped: 12 ignored, 3 hidden, 2 binary, 1 protected; ...]', or '' when nothing was
    skipped."""
    counts = [(skipped.ignored, "ignored"), (skipped.hidden, "hidden"),
              (skipped.binary, "binary"), (skipped.protected, "protected")]
    parts = [f"{n} {kind}" for n, kind in counts if n]
    if not parts:
        return ""
    label = "skipped before the cut" if skipped.before_cut else "skipped"
    hint = ""
    if not include_ignored and (skipped.ignored or skipped.hidden):
        hint = "; include_ignored=true searches ignored and hidden files"
    return f"[{label}: {', '.join(parts)}{hint}]"


def match_line(match: Match) -> str:
    """``path:line: text``, grep's line for one match."""
    return f"{match.path}:{match.line}: {match.text}"


def _joined(rows: list[str]) -> str:
    return "\n".join(r for r in rows if r)


def _listed(result: _Search, rows: list[str], what: str, narrow: str) -> str:
    if result.more_at_least:
        rows.append(f"[... more than {result.more} more {what} not shown (counting stops at "
                    f"{result.counted_to}); {narrow}]")
    elif result.more:
        rows.append(f"[... {result.more} more {what} not shown; {narrow}]")
    return _joined([*rows, skip_note(result.skipped, result.include_ignored)])


@renders(FoundFiles)
def _find_text(result: FoundFiles) -> str:
    if not result.paths:
        return _joined([f"no files match {result.pattern!r} under {result.start}",
                        skip_note(result.skipped, result.include_ignored)])
    return _listed(result, list(result.paths), "paths", "use a narrower pattern or path")


@renders(GrepMatches)
def _grep_text(result: GrepMatches) -> str:
    if not result.matches:
        return _joined([f"no matches for {result.pattern!r} under {result.start}",
                        skip_note(result.skipped, result.include_ignored)])
    rows = [match_line(m) for m in result.matches]
    return _listed(result, rows, "matches", "narrow the pattern, path or glob")
