"""Which definitions matter most: a PageRank over the file -> file reference graph.

As in Aider's repository map: file A links to file B for each name A uses that B
defines, weighted by sqrt(uses), more for long descriptive names, less for private
ones (``_x``); names defined in many files (``__init__``, ``get``, ``run``) say nothing
about which file is meant and are left out. A file's rank then flows along its links to
the definitions it uses, and the definitions are ranked by what they receive. A file's
references to itself do not count. Each file keeps only its strongest links
(``MAX_LINKS`` shared out over the files): the weakest links of a file that names
hundreds of others move little rank, and the cap bounds the graph's memory. Pure
Python: a few thousand files rank in about a second, so no graph library is needed.

A :class:`Ranker` keeps its work between calls: a file's API and links are recomputed
only when the file changed or a name it uses gained or lost a definer, and the power
iteration starts from the previous ranks, so a map after a one-file edit costs a
fraction of the first.

What it keeps is packed, for a tree of 50,000 files and 1.4 million definitions: a
file's API as an array of symbol indices (the names it defines are read from its outline
when it changes), one table of name -> definers (one path, the common case; a tuple in
file order; only a count past ``MAX_DEFINERS``, the weight made from the name and that
count when linking), and the last ranking as three arrays instead of a tuple per
definition.
"""

from __future__ import annotations

import heapq
import math
import sys
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from ._extract import Outline, shallow
from ._index import Entry

__all__ = ["MAX_DEFINERS", "MAX_LINKS", "Ranked", "Ranker"]

MAX_DEFINERS = 20  # a name defined in more files than this is too generic to link by
MAX_LINKS = 200_000  # links kept over all files (the strongest of each file): the bound
#                      on the graph's memory, about 20 MB
_OPEN_KINDS = frozenset({"namespace", "module"})
_DAMPING = 0.85
_ITERATIONS = 50
_TOLERANCE = 1e-6  # L1 change of the rank vector (it sums to 1)
_SQRT = [math.sqrt(n) for n in range(256)]

Ranked = tuple[float, int, int]  # (score, file index, symbol index)
Link = tuple[str, str, float]  # (target file, name, weight)
Found = dict[str, str | tuple[str, ...] | int]  # name -> the files defining it (a count
#                                               past MAX_DEFINERS)
Links = tuple[tuple[str, ...], tuple[str, ...], "array[float]"]  # targets, names, weights
Edges = tuple[tuple[str, ...], "array[float]"]  # targets, shares summing to 1


class RankedList(Sequence[Ranked]):
    """Ranked definitions, most important first, in three arrays (16 bytes each)."""

    def __init__(self, scores: array[float], files: array[int], symbols: array[int]) -> None:
        """From definitions listed by (file, symbol): sorted by score, ties in that order
        (a stable sort of positions; no tuple per definition)."""
        order = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
        self.scores = array("d", (scores[k] for k in order))
        self.files = array("i", (files[k] for k in order))
        self.symbols = array("i", (symbols[k] for k in order))

    def __len__(self) -> int:
        return len(self.scores)

    def __getitem__(self, at: int) -> Ranked:  # type: ignore[override]
        return self.scores[at], self.files[at], self.symbols[at]

    def __iter__(self) -> Iterator[Ranked]:
        return zip(self.scores, self.files, self.symbols, strict=True)


@dataclass(slots=True)
class _File:
    entry: Entry  # the entry this was computed from: a new entry means the file changed
    api: array[int]  # indices of the symbols the map may show (the file's API)
    links: Links | None = None
    edges: Edges = ((), array("d"))  # the links summed per target
    cap: int = 0  # the links-per-file cap the links were cut to


@dataclass
class Ranker:
    """Ranks the definitions of one root's files; reuse it across calls."""

    files: dict[str, _File] = field(default_factory=dict)
    ranks: dict[str, float] = field(default_factory=dict)
    last: tuple[tuple[int, ...], RankedList] | None = None
    found: Found = field(default_factory=dict)  # name -> the files defining it
    _positions: tuple[dict[str, _File], dict[str, int]] | None = None

    def rank(self, files: Sequence[tuple[str, Entry]]) -> RankedList:
        """Every mappable definition of ``files``, most important first."""
        identity = tuple(id(entry) for _, entry in files)
        if self.last is not None and self.last[0] == identity:
            return self.last[1]  # nothing changed since the last map
        current = {rel: self._file(rel, entry) for rel, entry in files}
        changed = {rel for rel, known in current.items() if self.files.get(rel) is not known}
        changed |= self.files.keys() - current.keys()
        self._update_definers(current, changed)
        self._positions = None  # (a dict per file: made again by the next change)
        self.files = current
        rels = [rel for rel, _ in files]
        cap = _per_file_cap(len(rels))
        for rel in rels:
            known = current[rel]
            if known.links is None or known.cap != cap:
                known.links = _packed(_links_of(rel, known.entry, self.found, cap))
                known.edges, known.cap = _summed(known.links), cap
        self.ranks = _pagerank(rels, {rel: current[rel].edges for rel in rels}, self.ranks)
        ranked = self._ranked(rels)
        self.last = (identity, ranked)
        return ranked

    def _file(self, rel: str, entry: Entry) -> _File:
        known = self.files.get(rel)
        if known is not None and known.entry is entry:
            return known
        return _File(entry, array("i") if entry.outline is None else _api(entry.outline))

    def _update_definers(self, current: dict[str, _File], changed: set[str]) -> None:
        """Bring name -> definers up to date with the ``changed`` files; files that use a
        name whose definers changed lose their links (recomputed next), the others keep
        theirs."""
        was: dict[str, str | tuple[str, ...] | int | None] = {}  # before the change
        for rel in changed:
            for known, add in ((self.files.get(rel), False), (current.get(rel), True)):
                if known is None:
                    continue
                for name in _defined(known):
                    if name not in was:
                        was[name] = self.found.get(name)
                    _move(self.found, name, rel, add)
        touched = set()
        order = self._order(current)
        for name, before in was.items():
            where = self.found.get(name)
            if isinstance(where, int) and where <= MAX_DEFINERS:  # few again: which ones
                where = tuple(rel for rel, known in current.items()
                              if known.entry.outline is not None
                              and known.entry.outline.number(name) is not None
                              and name in _defined(known))
            if isinstance(where, tuple):  # linked in the order of the files given
                where = tuple(sorted(where, key=order))
                self.found[name] = where[0] if len(where) == 1 else where
            if _targets(self.found.get(name)) != _targets(before):
                touched.add(name)
        if not touched:
            return
        if len(touched) > 64:  # a large change: recompute every file's links
            for known in current.values():
                known.links = None
            return
        for known in current.values():
            names_of = known.entry.names or ""
            if known.links is not None and any(f"\n{n}\n" in names_of for n in touched):
                known.links = None

    def _order(self, current: dict[str, _File]) -> Callable[[str], int]:
        """Definers in the order of the files given (as a rebuild would list them)."""
        if self._positions is None or self._positions[0] is not current:
            self._positions = (current, {rel: i for i, rel in enumerate(current)})
        positions = self._positions[1]
        return lambda rel: positions.get(rel, len(positions))

    def _ranked(self, rels: list[str]) -> RankedList:
        received: dict[tuple[str, str], float] = defaultdict(float)
        for rel in rels:
            targets, names, weights = self.files[rel].links or ((), (), array("d"))
            total = sum(weights) or 1.0
            for target, name, weight in zip(targets, names, weights, strict=True):
                received[(target, name)] += self.ranks[rel] * weight / total
        scores, files, indices = array("d"), array("i"), array("i")
        for i, rel in enumerate(rels):
            known = self.files[rel]
            outline = known.entry.outline
            if outline is None:
                continue
            table, kinds, named = outline.table(), outline.column("kind"), outline.column("name")
            base = self.ranks[rel] * 1e-3 / max(1, len(known.api))  # unreferenced: by file
            for j in known.api:
                if table[kinds[j]] not in _OPEN_KINDS:  # namespaces: shown around what they hold
                    scores.append(received.get((rel, table[named[j]]), 0.0) + base)
                    files.append(i)
                    indices.append(j)
        return RankedList(scores, files, indices)


def _defined(known: _File) -> tuple[str, ...]:
    """The distinct names a file defines that can be linked to (its API less namespaces),
    made when needed: when the file changes, not kept."""
    outline = known.entry.outline
    if outline is None:
        return ()
    table, kinds, names = outline.table(), outline.column("kind"), outline.column("name")
    # one string per name across the files (the names of the outlines are made on demand)
    return tuple(dict.fromkeys(sys.intern(table[names[j]]) for j in known.api
                               if table[kinds[j]] not in _OPEN_KINDS))


def _api(outline: Outline) -> array[int]:
    """The file's API: what is not local to a function nor nested in a nested type."""
    return array("i", (j for j, keep in enumerate(shallow(outline)) if keep))


def _move(found: Found, name: str, rel: str, add: bool) -> None:
    """Add ``rel`` to the files defining ``name``, or take it away. Kept small: one file
    as its path, a few as a tuple, only their count past ``MAX_DEFINERS`` (a name too
    generic to link by; when it falls back to that many, the caller lists them again)."""
    have = found.get(name, ())
    if isinstance(have, int):
        found[name] = have + (1 if add else -1)
        return
    else:
        files = (have,) if isinstance(have, str) else have
        if add and rel not in files:
            files = (*files, rel)
        elif not add and rel in files:
            files = tuple(f for f in files if f != rel)
    if not files:
        found.pop(name, None)
    elif len(files) > MAX_DEFINERS:
        found[name] = len(files)
    else:
        found[name] = files[0] if len(files) == 1 else files


def _boost(name: str, definers: int) -> float:
    boost = 1.0
    if len(name) >= 8 and (name != name.lower() or "_" in name.strip("_")):
        boost *= 10  # CamelCase or snake_case: a descriptive, specific name
    if name.startswith("_"):
        boost *= 0.1
    if definers > 5:
        boost *= 0.1
    return boost


def _per_file_cap(files: int) -> int:
    """Links kept per file: MAX_LINKS shared out, rounded down to a power of two so that
    adding a file rarely changes it (a change recomputes every file's links)."""
    share = max(8, MAX_LINKS // max(1, files))
    return min(1 << 12, 1 << (share.bit_length() - 1))


def _targets(where: str | tuple[str, ...] | int | None) -> tuple[str, ...]:
    """The files a name links to: none past MAX_DEFINERS (a count) or when none defines it."""
    if where is None or isinstance(where, int):
        return ()
    return (where,) if isinstance(where, str) else where


def _links_of(source: str, entry: Entry, found: Found, cap: int) -> list[Link]:
    """(target file, name, weight) for each name this file uses that another defines;
    the ``cap`` strongest."""
    out: list[Link] = []
    names = (entry.names or "\n").split("\n")[1:-1]
    for name, uses in zip(names, entry.counts, strict=True):
        where = found.get(name)
        if where is None or isinstance(where, int):
            continue
        targets = (where,) if isinstance(where, str) else where
        weight = _boost(name, len(targets)) * _SQRT[uses]
        name = sys.intern(name)  # one string per name across all files' links
        out += [(target, name, weight) for target in targets if target != source]
    return heapq.nlargest(cap, out, key=lambda link: link[2]) if len(out) > cap else out


def _packed(links: list[Link]) -> Links:
    return (tuple(t for t, _, _ in links), tuple(n for _, n, _ in links),
            array("d", (w for _, _, w in links)))


def _summed(links: Links) -> Edges:
    """A file's links summed per target and normalized: (targets, shares summing to 1)."""
    summed: dict[str, float] = defaultdict(float)
    for target, weight in zip(links[0], links[2], strict=True):
        summed[target] += weight
    total = sum(summed.values())
    return tuple(summed), array("d", (w / total for w in summed.values()))


def _pagerank(rels: list[str], out: dict[str, Edges],
              start: dict[str, float]) -> dict[str, float]:
    """Power iteration, from ``start`` where it knows a file; a file with no links
    spreads its rank evenly (a dangling node)."""
    n = len(rels)
    if n == 0:
        return {}
    index = {rel: i for i, rel in enumerate(rels)}
    edges = [([index[t] for t in out[rel][0]], out[rel][1]) for rel in rels]
    rank = [start.get(rel, 1.0 / n) for rel in rels]
    norm = sum(rank)
    rank = [r / norm for r in rank]
    for _ in range(_ITERATIONS):
        dangling = sum(r for r, (targets, _) in zip(rank, edges, strict=True) if not targets)
        new = [(1 - _DAMPING) / n + _DAMPING * dangling / n] * n
        for r, (targets, weights) in zip(rank, edges, strict=True):
            share = _DAMPING * r
            for target, weight in zip(targets, weights, strict=True):
                new[target] += share * weight
        delta = sum(abs(a - b) for a, b in zip(new, rank, strict=True))
        rank = new
        if delta < _TOLERANCE:
            break
    return dict(zip(rels, rank, strict=True))
