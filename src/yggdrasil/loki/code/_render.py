"""What the code tools print: outline lines, find_symbol rows, the repo map, the notes.

    class Greeter(Base)  L3-20               outline: kind name(signature)  L<start>-<end>
      method greet(self, name) -> str  L9-20     members indented under their owner
    src/app.py:9: method Greeter.greet(self, name) -> str     find_symbol
"""

from __future__ import annotations

from collections.abc import Sequence

from ._extract import MAX_DEPTH, Outline, Symbol
from ._index import MAX_FILE_BYTES, Entry, Scan
from ._rank import Ranked

__all__ = ["MAX_OUTLINE", "find_row", "map_lines", "outline_lines", "outline_notes",
           "scan_notes", "symbol_line"]

MAX_OUTLINE = 500  # lines of one outline (a file or a folder)
MAX_INDENT = 8  # deeper members are indented no further


def symbol_line(symbol: Symbol, depth: int) -> str:
    """``kind name(signature)  L<start>-<end>``, indented ``depth`` levels (at most 8)."""
    indent = "  " * min(depth, MAX_INDENT)
    return f"{indent}{symbol.header()}  L{symbol.line}-{symbol.end}"


def outline_lines(outline: Outline) -> list[str]:
    """The definitions as lines; over ``MAX_OUTLINE``, the deepest levels are left out first."""
    limit = MAX_OUTLINE
    symbols = outline.symbols
    depth = max((s.depth for s in symbols), default=0)
    while depth > 0 and sum(s.depth <= depth for s in symbols) > limit:
        depth -= 1
    shown = [s for s in symbols if s.depth <= depth]
    lines = [symbol_line(s, s.depth) for s in shown[:limit]]
    hidden = len(symbols) - len(shown)
    if hidden:
        lines.append(f"[... {hidden} definitions nested deeper than {depth + 1} levels not "
                     "shown; find_symbol(name) finds them]")
    if len(shown) > limit:
        lines.append(f"[... {len(shown) - limit} more definitions not shown; outline is capped "
                     f"at {limit} lines: read_file(path, start=...) or find_symbol(name)]")
    return lines


def outline_notes(rel: str, outline: Outline) -> list[str]:
    notes = []
    if outline.errors:
        where = ", ".join(f"L{n}" for n in outline.errors)
        notes.append(f"[{rel}: syntax errors near {where}; definitions there may be missing "
                     "or cut short]")
    if outline.cut:
        notes.append(f"[{rel}: parsed up to L{outline.cut} only: the {outline.language} grammar "
                     "is too slow on this file; definitions below it are not listed]")
    if outline.dropped:
        notes.append(f"[{rel}: {outline.dropped} definitions not listed (nested deeper than "
                     f"{MAX_DEPTH} levels, or past the first 10,000)]")
    return notes


def find_row(rel: str, symbol: Symbol) -> str:
    return f"{rel}:{symbol.line}: {symbol.header(qualified=True)}"


def scan_notes(scan: Scan) -> list[str]:
    """Why some files were not read: the counts, and that grep reads them."""
    notes = []
    missed = []
    if scan.too_large:
        missed.append(f"{scan.too_large} over {MAX_FILE_BYTES >> 20} MB")
    if scan.unreadable:
        missed.append(f"{scan.unreadable} unreadable")
    if missed:
        notes.append(f"[not parsed: {', '.join(missed)}; grep searches them]")
    if scan.other:
        kinds = scan.other.most_common()
        shown = ", ".join(f"{ext} {n}" for ext, n in kinds[:5])
        more = f", {len(kinds) - 5} more kinds" if len(kinds) > 5 else ""
        total = sum(scan.other.values())
        notes.append(f"[no grammar for {total} files ({shown}{more}); grep searches them]")
    if scan.stopped:
        notes.append(f"[{scan.stopped}; give a narrower path]")
    if scan.built:
        notes.append(scan.built)
    return notes


def map_lines(files: Sequence[tuple[str, Entry]], ranked: Sequence[Ranked],
              budget: int) -> tuple[list[str], int, int]:
    """The ranked definitions that fit in ``budget`` characters, grouped by file (files in
    rank order, members under their owner); also how many definitions and files it kept."""
    kept: dict[int, set[int]] = {}
    used = 0
    for _, i, j in ranked:
        symbols = _symbols(files[i][1])
        symbol = symbols[j]  # a line costs at least its kind, name and line numbers
        if used + len(symbol.kind) + len(symbol.name) + 8 > budget and j not in kept.get(i, ()):
            continue
        chain = [k for k in _owners(symbols, j) if k not in kept.get(i, ())]
        cost = sum(len(symbol_line(symbols[k], symbols[k].depth + 1)) + 1 for k in chain)
        if i not in kept:
            cost += len(files[i][0]) + 2
        if used + cost > budget:
            continue
        kept.setdefault(i, set()).update(chain)
        used += cost
    lines: list[str] = []
    for i, chosen in kept.items():
        symbols = _symbols(files[i][1])
        lines.append(f"{files[i][0]}:")
        lines += [symbol_line(symbols[k], symbols[k].depth + 1) for k in sorted(chosen)]
    return lines, sum(len(c) for c in kept.values()), len(kept)


def _symbols(entry: Entry) -> tuple[Symbol, ...]:
    return entry.outline.symbols if entry.outline is not None else ()


def _owners(symbols: Sequence[Symbol], j: int) -> list[int]:
    """``j`` and the definitions it sits in (its class...), outermost first."""
    chain = [j]
    depth = symbols[j].depth
    for k in range(j - 1, -1, -1):
        if depth == 0:
            break
        if symbols[k].depth < depth:
            chain.append(k)
            depth = symbols[k].depth
    return chain[::-1]
