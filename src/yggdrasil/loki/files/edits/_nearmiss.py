"""Where the file holds something close to an edit's ``old``, when it holds nothing that
matches: lines equal but for whitespace, or the most similar window, with what differs.

Every stage has a cap, so the search is bounded whatever the sizes of the file and of old.
"""

from __future__ import annotations

import difflib
import heapq
import itertools
from collections import Counter
from collections.abc import Callable

from ...results import clip_line

__all__ = ["near_miss"]

_NEAR_MIN_RATIO = 0.6  # mean line similarity below which nothing "resembles" old
_NEAR_GOOD = 0.8  # a window proposed by shared lines this close ends the search
_NEAR_SCAN_LINES = 50_000  # lines of the file searched
_NEAR_CLIP = 200  # chars of a line compared
_NEAR_SAMPLE = 100  # lines of old compared per window
_NEAR_VOTES = 200_000  # (file line, old line) pairs that vote for a window start
_NEAR_CANDIDATES = 40  # windows ranked by quick_ratio
_NEAR_FINALISTS = 5  # windows scored by ratio
_SHOW_LINES = 12


def _numbered(lines: list[str], first: int) -> str:
    shown = lines[:_SHOW_LINES]
    body = "\n".join(f"{first + i}\t{clip_line(line)}" for i, line in enumerate(shown))
    return body if len(lines) <= _SHOW_LINES else f"{body}\n[... {len(lines) - _SHOW_LINES} more lines]"


def near_miss(text: str, old: str) -> str:
    """Where the file holds something close to ``old``, and what differs."""
    lines = text.split("\n")[:_NEAR_SCAN_LINES]
    want = old.strip("\n").split("\n")
    k = len(want)
    i = _whitespace_twin(lines, want)
    if i is not None:
        return (
            f"Lines {i + 1}-{i + k} match it except for whitespace (inside lines, or an "
            "indentation whose structure differs from old's: lines deeper or shallower "
            f"relative to each other); copy them exactly:\n{_numbered(lines[i : i + k], i + 1)}"
        )
    best = _closest_window([_key(s) for s in lines], [_key(s) for s in want])
    if best is None:
        return "Nothing in the file resembles it; read_file the region you mean to edit first."
    ratio, i = best
    ratio = min(ratio, 0.99)  # lines are compared clipped and sampled; they do differ
    window = lines[i : i + k]
    diff = difflib.unified_diff(want, window, "old (yours)", "file", lineterm="", n=0)
    shown = [clip_line(d) for d in itertools.islice(diff, 2, 2 + _SHOW_LINES)]
    return (
        f"The closest match is lines {i + 1}-{i + k} ({ratio:.0%} similar):\n"
        f"{_numbered(window, i + 1)}\nWhat differs:\n" + "\n".join(shown)
    )


def _squash(s: str) -> str:
    return " ".join(s.split())


def _key(s: str) -> str:
    """A line as compared for closeness: whitespace runs squashed, clipped."""
    return _squash(s)[:_NEAR_CLIP]


def _whitespace_twin(lines: list[str], want: list[str]) -> int | None:
    """Start of the lines that equal ``want`` but for whitespace (a linear string search)."""
    target = [_squash(s) for s in want]
    hay = "\n" + "\n".join(_squash(s) for s in lines) + "\n"
    pos = hay.find("\n" + "\n".join(target) + "\n")
    return None if pos < 0 else hay.count("\n", 0, pos)


def _closest_window(keys: list[str], want: list[str]) -> tuple[float, int] | None:
    """(similarity, start) of the window of ``keys`` most like ``want``, if close enough.

    Similarity is the mean of per-line ratios over a sample of ``want``'s lines. Windows
    are proposed by lines that ``want`` shares with the file as they are (a typo leaves
    most lines intact), else by the file lines most like ``want``'s longest line. Every
    stage has a cap, so the work is bounded whatever the sizes of the file and of old.
    """
    if len(want) > len(keys):
        return None
    best = _best_of(keys, want, _voted_starts(keys, want))
    if best is None or best[0] < _NEAR_GOOD:
        scanned = _best_of(keys, want, _anchored_starts(keys, want))
        best = max((b for b in (best, scanned) if b is not None), default=None)
    return best if best and best[0] >= _NEAR_MIN_RATIO else None


def _voted_starts(keys: list[str], want: list[str]) -> list[int]:
    """Window starts that align the most lines of ``want`` with identical file lines."""
    last = len(keys) - len(want)
    offsets: dict[str, list[int]] = {}
    for j, w in enumerate(want):
        if w:
            offsets.setdefault(w, []).append(j)
    where: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        if key in offsets:
            where.setdefault(key, []).append(i)
    votes: Counter[int] = Counter()
    budget = _NEAR_VOTES
    # Rare lines first: a line repeated all over the file votes everywhere and says little.
    for key in sorted(where, key=lambda w: len(where[w]) * len(offsets[w])):
        budget -= len(where[key]) * len(offsets[key])
        if budget < 0:
            break
        votes.update(i - j for i in where[key] for j in offsets[key] if 0 <= i - j <= last)
    return [start for start, _ in votes.most_common(_NEAR_CANDIDATES)]


def _anchored_starts(keys: list[str], want: list[str]) -> list[int]:
    """Window starts whose line facing ``want``'s longest line looks most like it."""
    j, anchor = max(enumerate(want), key=lambda p: len(p[1]))
    if not anchor:
        return []
    matcher = difflib.SequenceMatcher(None, "", anchor, autojunk=False)

    def score(start: int) -> float:
        matcher.set_seq1(keys[start + j])
        return matcher.quick_ratio()

    starts = range(len(keys) - len(want) + 1)
    return heapq.nlargest(_NEAR_CANDIDATES, starts, key=score)


def _best_of(keys: list[str], want: list[str], starts: list[int]) -> tuple[float, int] | None:
    """The best (mean line ratio, start): ranked by quick_ratio, finalists by ratio."""
    if not starts:
        return None
    k = len(want)
    step = (k - 1) / (_NEAR_SAMPLE - 1)
    sample = sorted({round(n * step) for n in range(_NEAR_SAMPLE)}) if k > _NEAR_SAMPLE else range(k)
    matchers = {j: difflib.SequenceMatcher(None, "", want[j], autojunk=False) for j in sample}

    def mean(start: int, measure: Callable[[difflib.SequenceMatcher[str]], float]) -> float:
        total = 0.0
        for j in sample:
            key = keys[start + j]
            if key == want[j]:
                total += 1.0
            else:
                matchers[j].set_seq1(key)
                total += measure(matchers[j])
        return total / len(sample)

    ranked = sorted(starts, key=lambda s: mean(s, difflib.SequenceMatcher.quick_ratio), reverse=True)
    return max((mean(s, difflib.SequenceMatcher.ratio), s) for s in ranked[:_NEAR_FINALISTS])
