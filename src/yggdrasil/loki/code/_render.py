"""The code tools' answers as data: outlines, found definitions, the repo map's files.

What is shown is chosen here (the deepest levels of a long outline left out first, the
ranked definitions that fit a map's budget); the text is rendered in ``results._code``:

    class Greeter(Base)  L3-20               outline: kind name(signature)  L<start>-<end>
      method greet(self, name) -> str  L9-20     members indented under their owner
    src/app.py:9: method Greeter.greet(self, name) -> str     find_symbol
"""

from __future__ import annotations

from collections.abc import Sequence

from ..results import (
    CodeScan,
    Definition,
    FileOutline,
    FoundDefinition,
    OutlinedFile,
    definition_line,
)
from ._extract import MAX_DEPTH, Outline, Symbol, Tables
from ._index import MAX_FILE_BYTES, Entry, Scan
from ._rank import Ranked

__all__ = ["MAX_OUTLINE", "code_scan", "definition", "file_outline", "found_definition",
           "map_files"]

MAX_OUTLINE = 500  # lines of one outline (a file or a folder)


def definition(symbol: Symbol) -> Definition:
    return Definition(kind=symbol.kind, name=symbol.name, scope=symbol.scope,
                      signature=symbol.signature, line=symbol.line, end=symbol.end,
                      first=symbol.first, depth=symbol.depth)


def found_definition(rel: str, symbol: Symbol) -> FoundDefinition:
    return FoundDefinition(path=rel, kind=symbol.kind, name=symbol.name, scope=symbol.scope,
                           signature=symbol.signature, line=symbol.line, end=symbol.end,
                           first=symbol.first, depth=symbol.depth)


def file_outline(rel: str, outline: Outline) -> FileOutline:
    """The definitions shown; over ``MAX_OUTLINE``, the deepest levels are left out first."""
    limit = MAX_OUTLINE
    symbols = list(outline.symbols)
    depth = max((s.depth for s in symbols), default=0)
    while depth > 0 and sum(s.depth <= depth for s in symbols) > limit:
        depth -= 1
    shown = [s for s in symbols if s.depth <= depth]
    return FileOutline(path=rel, language=outline.language, lines=outline.lines,
                       found=len(symbols), definitions=[definition(s) for s in shown[:limit]],
                       shown_depth=depth, nested_hidden=len(symbols) - len(shown),
                       more=max(0, len(shown) - limit), limit=limit,
                       syntax_errors=list(outline.errors), parsed_to=outline.cut,
                       dropped=outline.dropped, max_depth=MAX_DEPTH)


def code_scan(scan: Scan) -> CodeScan:
    """What the walk could not read as code, as data."""
    return CodeScan(too_large=scan.too_large, size_cap=MAX_FILE_BYTES, unreadable=scan.unreadable,
                    no_grammar=scan.other.most_common(), stopped=scan.stopped, built=scan.built)


def map_files(files: Sequence[tuple[str, Entry]], ranked: Sequence[Ranked],
              budget: int) -> list[OutlinedFile]:
    """The ranked definitions that fit in ``budget`` characters, grouped by file (files in
    rank order, members under their owner)."""
    kept: dict[int, set[int]] = {}
    strings: dict[int, Tables] = {}  # of the files kept (their scopes are compressed)
    used = 0
    for _, i, j in ranked:
        outline = files[i][1].outline
        if outline is None:
            continue
        # a line costs at least its kind, name and line numbers; a new file, its path
        least = outline.least(j) + 8 + (0 if i in kept else len(files[i][0]) + 2)
        if used + least > budget and j not in kept.get(i, ()):
            continue
        tables = strings.get(i) or outline.tables()
        chain = [k for k in _owners(outline, j) if k not in kept.get(i, ())]
        symbols = [outline.symbol(k, tables) for k in chain]
        cost = sum(len(definition_line(s, s.depth + 1)) + 1 for s in symbols)
        if i not in kept:
            cost += len(files[i][0]) + 2
        if used + cost > budget:
            continue
        kept.setdefault(i, set()).update(chain)
        strings[i] = tables
        used += cost
    shown: list[OutlinedFile] = []
    for i, chosen in kept.items():
        outline = files[i][1].outline
        assert outline is not None
        shown.append(OutlinedFile(path=files[i][0], definitions=[
            definition(outline.symbol(k, strings[i])) for k in sorted(chosen)]))
    return shown


def _owners(outline: Outline, j: int) -> list[int]:
    """``j`` and the definitions it sits in (its class...), outermost first."""
    chain = [j]
    depths = outline.depths()
    depth = depths[j]
    for k in range(j - 1, -1, -1):
        if depth == 0:
            break
        if depths[k] < depth:
            chain.append(k)
            depth = depths[k]
    return chain[::-1]
