"""A frame as bounded plain text: aligned columns, clipped cells, and a note for every cut.

polars' own repr draws boxes and hides middle columns without saying how to see them;
a model reads this one more cheaply, and every cut says what was left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_CELL = 40  # characters of one cell
MAX_COLUMNS = 30  # columns of the preview table (the header still names them all)
MAX_NAMES = 200  # column names listed in the header and types lines
MAX_NAME = 80  # characters of one column name or type there
MAX_CHARS = 20_000  # characters of the whole preview table
_NUMERIC = ("Int", "UInt", "Float", "Decimal")


def cell(value: Any, limit: int = MAX_CELL) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        text = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        text = text.replace("\t", "\\t") if text else '""'
    else:
        text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip(text: str, limit: int = MAX_NAME) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def name_list(names: Sequence[str], limit: int = MAX_NAMES) -> str:
    shown = repr([_clip(n) for n in names[:limit]])
    return shown if len(names) <= limit else f"{shown[:-1]}, ... {len(names) - limit} more]"


def type_list(names: Sequence[str], dtypes: Sequence[str], limit: int = MAX_NAMES) -> str:
    pairs = [f"{_clip(n)}: {_clip(t)}" for n, t in zip(names[:limit], dtypes[:limit], strict=False)]
    more = f", ... {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(pairs) + more


def table_lines(columns: Sequence[str], dtypes: Sequence[str], rows: Sequence[Sequence[Any]],
                *, max_chars: int = MAX_CHARS) -> list[str]:
    """Header, rule and one line per row; trailing notes say which columns/rows were cut."""
    ncols = min(len(columns), MAX_COLUMNS)
    grid = [[cell(name) for name in columns[:ncols]]]
    grid += [[cell(v) for v in row[:ncols]] for row in rows]
    widths = [max(len(r[i]) for r in grid) for i in range(ncols)]
    right = [dtypes[i].startswith(_NUMERIC) for i in range(ncols)]
    lines = [_line(grid[0], widths, [False] * ncols), "-+-".join("-" * w for w in widths)]
    used, shown = sum(map(len, lines)), 0
    for row in grid[1:]:
        line = _line(row, widths, right)
        if used + len(line) > max_chars:
            break
        lines.append(line)
        used, shown = used + len(line) + 1, shown + 1
    return lines + _cut_notes(len(columns), ncols, len(rows), shown)


def _line(cells: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)]
    return " | ".join(parts).rstrip()


def _cut_notes(ncols: int, shown_cols: int, nrows: int, shown_rows: int) -> list[str]:
    notes = []
    if shown_cols < ncols:
        notes.append(f"[... {ncols - shown_cols} more columns not shown (the first {shown_cols} "
                     "are); select the columns you need with query_table / SQL]")
    if shown_rows < nrows:
        notes.append(f"[... {nrows - shown_rows} more rows not shown: the preview is capped at "
                     f"{MAX_CHARS} characters; ask for fewer rows or select fewer columns]")
    return notes
