"""Which diagnostics a change introduced: the file's findings after it, less those it had.

Findings are matched by what they say, not where: the checker, its code, its message and
the text they point at (``symbol``), so a finding that moved because lines were added
above it is the same finding. When a key is found more often after the change than
before, the surplus is new; the ones in the changed lines are taken as the new ones
first (an edit that adds a second ``undefined name x`` added the one in its own lines).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence

from ..results import SEVERITIES, Diagnostic

__all__ = ["Key", "introduced", "key_of", "ranked"]

Key = tuple[str, str, str, str]


def key_of(d: Diagnostic) -> Key:
    return (d.source, d.code, " ".join(d.message.split()), d.symbol)


Spans = Iterable[tuple[int, int]]


def introduced(before: Sequence[Diagnostic], after: Sequence[Diagnostic],
               changed: Spans | Callable[[], Spans] = ()) -> tuple[list[Diagnostic], int]:
    """(the findings of ``after`` that ``before`` did not have, how many of ``after`` it
    had); ``changed``: the line ranges (1-based, inclusive) of the new text that the
    change wrote, which decide which of several alike findings are the new ones (or a
    function giving them, called only when a finding is found more often than before)."""
    had = Counter(key_of(d) for d in before)
    spans: list[tuple[int, int]] | None = None
    groups: dict[Key, list[Diagnostic]] = defaultdict(list)
    for d in after:
        groups[key_of(d)].append(d)
    new: list[Diagnostic] = []
    kept = 0
    for key, found in groups.items():
        surplus = len(found) - had[key]
        if surplus <= 0:
            kept += len(found)
            continue
        if spans is None:
            spans = list(changed() if callable(changed) else changed)
        # in the changed lines first, then the last ones (new code tends to be added below)
        order = sorted(range(len(found)), key=lambda i: (not _inside(found[i].line, spans), -i))
        chosen = set(order[:surplus])
        new += [d for i, d in enumerate(found) if i in chosen]
        kept += len(found) - surplus
    return ranked(new), kept


def _inside(line: int, spans: Sequence[tuple[int, int]]) -> bool:
    return any(first <= line <= last for first, last in spans)


def ranked(found: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Errors first, then warnings, infos and hints; each by file, line and column."""
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(found, key=lambda d: (order[d.severity], d.path, d.cell or 0, d.line,
                                        d.column))
