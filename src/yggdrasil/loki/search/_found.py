"""What a search asks and what it found, shared by the ripgrep and the Python engines.

Both engines feed the same collectors in the same order, so they agree to the byte:
results are ordered like a depth-first walk with the entries of each folder sorted by
name (ripgrep's ``--sort path``), which is sorting by the tuple of path components, or
(faster) by the path with '/' replaced by NUL, which sorts before any other character.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

Key = str
Accept = Callable[[str], object]  # find's test of a root-relative path (truthy: keep it)


def path_key(rel: str) -> Key:
    return rel.replace("/", "\0")


_PATH_KEY = operator.methodcaller("replace", "/", "\0")  # path_key, without a Python call


@dataclass(frozen=True)
class Query:
    """Where and how to walk; paths are root-relative POSIX strings."""

    root: Path  # resolved agent root; the engines run from here
    start: str  # '.' or a root-relative file or folder
    start_is_file: bool = False
    include_ignored: bool = False
    parent_rules: tuple[str, ...] = ()  # ignore lines from folders above start, rebased to root
    name_glob: str = ""  # grep: only files whose name matches
    literal: str = ""  # find: a text every path its pattern matches holds (a pre-filter)


@dataclass(frozen=True)
class Pattern:
    regex: str
    ignore_case: bool = False


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    text: str


@dataclass
class Skips:
    """Entries the walk skipped; a skipped folder counts once, not its contents."""

    seen: list[tuple[str, Key]] = field(default_factory=list)

    def add(self, kind: str, rel: str) -> None:
        self.seen.append((kind, path_key(rel)))

    def counts(self, before: Key | None = None) -> dict[str, int]:
        out = {"ignored": 0, "hidden": 0, "binary": 0, "protected": 0}
        for kind, key in self.seen:
            if before is None or key < before:
                out[kind] += 1
        return out


@dataclass
class Found:
    """A search's answer: the rows to show, how many more there were, what was skipped.

    ``over`` means counting stopped at the limit, so ``more`` is a lower bound; the
    skipped counts then cover only the part walked before the first row not shown.
    """

    rows: list[str] | list[Hit]  # find: root-relative paths; grep: the hits
    more: int
    over: bool
    skipped: dict[str, int]


class HitCollector:
    """Collects grep hits file by file; a file's hits count once it proved to be text.

    ``add`` returns True when the count passed ``limit`` and the engine may stop.
    When the count first passes ``keep`` the first ``keep`` hits and the file being
    read are remembered, which is the answer when hits arrive in walk order.
    """

    def __init__(self, keep: int, limit: int) -> None:
        self.keep, self.limit = keep, limit
        self.hits: list[Hit] = []
        self.pending: list[Hit] = []
        self.pending_count = 0
        self.count = 0
        self.first: list[Hit] | None = None
        self.cut: Key | None = None

    def add(self, hit: Hit) -> bool:
        self.count += 1
        self.pending_count += 1
        if self.count <= self.limit + 1:
            self.pending.append(hit)
        if self.count == self.keep + 1 and self.first is None:
            self.first = (self.hits + self.pending)[: self.keep]
            self.cut = path_key(hit.path)
        return self.count > self.limit

    def end_file(self, binary: bool) -> None:
        if binary:
            self.count -= self.pending_count
        else:
            self.hits += self.pending
        self.pending, self.pending_count = [], 0

    @property
    def over(self) -> bool:
        return self.count > self.limit

    def found(self, skips: Skips, limit: int | None = None) -> Found:
        """The answer; past the limit (``limit`` when counted elsewhere), the snapshot."""
        if self.over and self.first is not None:
            more = (limit or self.limit) - self.keep
            return Found(self.first, more, True, skips.counts(self.cut))
        hits = sorted(self.hits, key=lambda h: (path_key(h.path), h.line))
        more = max(0, len(hits) - self.keep)
        return Found(hits[: self.keep], more, False, skips.counts())


class PathCollector:
    """Keeps the first ``keep`` paths in walk order out of any number, in bounded memory."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.paths: list[str] = []
        self.total = 0

    def extend(self, rels: list[str]) -> None:
        self.total += len(rels)
        self.paths += rels
        if len(self.paths) > 100 * self.keep:
            self._trim()

    def _trim(self) -> None:
        # sorted by path_key: the keys themselves sorted (no key function; a path holds
        # no NUL, so a key turns back into its path)
        first = sorted(map(_PATH_KEY, self.paths))[: self.keep]
        self.paths = [key.replace("\0", "/") for key in first]

    def found(self, skips: Skips) -> Found:
        self._trim()
        return Found(list(self.paths), self.total - len(self.paths), False, skips.counts())
