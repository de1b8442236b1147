"""Which definitions matter most: a PageRank over the file -> file reference graph.

As in Aider's repository map: file A links to file B for each name A uses that B
defines, weighted by sqrt(uses), more for long descriptive names, less for private
ones (``_x``); names defined in many files (``__init__``, ``get``, ``run``) say nothing
about which file is meant and are left out. A file's rank then flows along its links to
the definitions it uses, and the definitions are ranked by what they receive. A file's
references to itself do not count. Pure Python: a few thousand files rank in well under
a second, so no graph library is needed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from ._extract import Symbol, shallow
from ._index import Entry

__all__ = ["MAX_DEFINERS", "Ranked", "rank"]

MAX_DEFINERS = 20  # a name defined in more files than this is too generic to link by
_OPEN_KINDS = frozenset({"namespace", "module"})
_DAMPING = 0.85
_ITERATIONS = 50
_TOLERANCE = 1e-6  # L1 change of the rank vector (sums to 1)

Ranked = tuple[float, int, int]  # (score, file index, symbol index)


def rank(files: Sequence[tuple[str, Entry]]) -> list[Ranked]:
    """Every mappable definition of ``files``, most important first."""
    definers = _definers(files)
    links = [_links_of(i, entry, definers) for i, (_, entry) in enumerate(files)]
    file_rank = _pagerank(len(files), links)
    received: dict[tuple[int, str], float] = defaultdict(float)
    for source, out in enumerate(links):
        total = sum(w for _, _, w in out)
        for target, name, weight in out:
            received[(target, name)] += file_rank[source] * weight / total
    ranked: list[Ranked] = []
    for i, (_, entry) in enumerate(files):
        symbols = _mappable(entry)
        base = file_rank[i] * 1e-3 / max(1, len(symbols))  # unreferenced: by their file
        for j, symbol in symbols:
            if symbol.kind in _OPEN_KINDS:
                continue  # shown only around what they hold
            ranked.append((received.get((i, symbol.name), 0.0) + base, i, j))
    ranked.sort(key=lambda r: (-r[0], r[1], r[2]))
    return ranked


def _mappable(entry: Entry) -> list[tuple[int, Symbol]]:
    """The file's API: what is not local to a function nor nested in a nested type."""
    symbols = entry.outline.symbols if entry.outline is not None else ()
    return [(j, s) for (j, s), keep in zip(enumerate(symbols), shallow(symbols), strict=True)
            if keep]


def _definers(files: Sequence[tuple[str, Entry]]) -> dict[str, tuple[list[int], float]]:
    """name -> (the files that define it, its weight per sqrt(use)). Namespaces and
    modules are left out: many files open the same one, and naming it says nothing
    about which file is meant."""
    found: dict[str, list[int]] = defaultdict(list)
    for i, (_, entry) in enumerate(files):
        for name in {s.name for _, s in _mappable(entry) if s.kind not in _OPEN_KINDS}:
            found[name].append(i)
    return {name: (where, _boost(name, len(where))) for name, where in found.items()
            if len(where) <= MAX_DEFINERS}


def _boost(name: str, definers: int) -> float:
    boost = 1.0
    if len(name) >= 8 and (name != name.lower() or "_" in name.strip("_")):
        boost *= 10  # CamelCase or snake_case: a descriptive, specific name
    if name.startswith("_"):
        boost *= 0.1
    if definers > 5:
        boost *= 0.1
    return boost


_SQRT = [math.sqrt(n) for n in range(256)]


def _links_of(source: int, entry: Entry,
              definers: dict[str, tuple[list[int], float]]) -> list[tuple[int, str, float]]:
    """(target file, name, weight) for each name this file uses that another defines."""
    out = []
    names = (entry.names or "\n").split("\n")[1:-1]
    for name, uses in zip(names, entry.counts, strict=True):
        found = definers.get(name)
        if found is None:
            continue
        targets, boost = found
        weight = boost * _SQRT[uses]
        out += [(target, name, weight) for target in targets if target != source]
    return out


def _pagerank(n: int, links: list[list[tuple[int, str, float]]]) -> list[float]:
    """Power iteration over the summed links; a file with no links spreads its rank
    evenly (a dangling node)."""
    if n == 0:
        return []
    edges: list[tuple[list[int], list[float]]] = []
    for out in links:
        summed: dict[int, float] = defaultdict(float)
        for target, _, weight in out:
            summed[target] += weight
        total = sum(summed.values())
        edges.append((list(summed), [w / total for w in summed.values()]))
    rank = [1.0 / n] * n
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
    return rank
