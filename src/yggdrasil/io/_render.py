"""A frame as bounded plain text: aligned columns, clipped cells, and a note for every cut.

polars' own repr draws boxes and hides middle columns without saying how to see them;
a model reads this one more cheaply, and every cut says what was left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypedDict

MAX_CELL = 40  # characters of one cell
MAX_COLUMNS = 30  # columns of the preview table (the header still names them all)
MAX_NAMES = 200  # column names listed in the header and types lines
MAX_NAME = 80  # characters of one column name or type there
MAX_CHARS = 20_000  # characters of the whole preview table
_NUMERIC = ("Int", "UInt", "Float", "Decimal")

# A cell of a shown table as data: None, a bool, an int or a finite float as it is; any
# other value (a string, a date, a list, NaN...) as the text shown for it (escaped, cut).
Cell = str | int | float | bool | None


class Grid(TypedDict):
    """The part of a table a preview shows: ``rows`` (the cells of the first MAX_COLUMNS
    columns, for the rows that fit in MAX_CHARS), the width of each column shown (over all
    the rows given, shown or not), and how many columns and rows were left out."""

    rows: list[list[Cell]]
    widths: list[int]
    more_columns: int
    more_rows: int


def cell(value: Any, limit: int = MAX_CELL) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        text = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        text = text.replace("\t", "\\t") if text else '""'
    else:
        text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def value_cell(value: Any) -> Cell:
    """``value`` as a cell of data: kept when JSON holds it as it is, else its shown text."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return cell(value)


def cell_text(value: Cell) -> str:
    """What a cell of data shows (a text cell is already its shown text)."""
    return value if isinstance(value, str) else cell(value)


def _clip(text: str, limit: int = MAX_NAME) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def names_kept(names: Sequence[str]) -> list[str]:
    """The names (or types) a preview's data keeps: the first MAX_NAMES, each cut at
    MAX_NAME characters; what they show is what the whole list shows."""
    return [_clip(n) for n in names[:MAX_NAMES]]


def name_list(names: Sequence[str], limit: int = MAX_NAMES, total: int | None = None) -> str:
    """``['a', 'b', ... 3 more]``; ``total``: how many names there are when ``names`` is
    the kept part of them."""
    total = len(names) if total is None else total
    shown = repr([_clip(n) for n in names[:limit]])
    return shown if total <= limit else f"{shown[:-1]}, ... {total - limit} more]"


def type_list(names: Sequence[str], dtypes: Sequence[str], limit: int = MAX_NAMES,
              total: int | None = None) -> str:
    total = len(names) if total is None else total
    pairs = [f"{_clip(n)}: {_clip(t)}" for n, t in zip(names[:limit], dtypes[:limit], strict=False)]
    more = f", ... {total - limit} more" if total > limit else ""
    return ", ".join(pairs) + more


def grid(columns: Sequence[str], dtypes: Sequence[str], rows: Sequence[Sequence[Any]],
         *, max_chars: int = MAX_CHARS) -> Grid:
    """What of ``rows`` a preview shows (see ``Grid``)."""
    ncols = min(len(columns), MAX_COLUMNS)
    values = [[value_cell(v) for v in row[:ncols]] for row in rows]
    texts = [[cell(name) for name in columns[:ncols]]]
    texts += [[cell_text(v) for v in row] for row in values]
    widths = [max(len(r[i]) for r in texts) for i in range(ncols)]
    right = [dtypes[i].startswith(_NUMERIC) for i in range(ncols)]
    used, shown = sum(map(len, _head(texts[0], widths))), 0
    for row in texts[1:]:
        line = _line(row, widths, right)
        if used + len(line) > max_chars:
            break
        used, shown = used + len(line) + 1, shown + 1
    return Grid(rows=values[:shown], widths=widths, more_columns=len(columns) - ncols,
                more_rows=len(rows) - shown)


def grid_lines(columns: Sequence[str], dtypes: Sequence[str], shown: Grid) -> list[str]:
    """Header, rule and one line per row shown; trailing notes say which columns/rows were
    cut."""
    widths = shown["widths"]
    ncols = len(widths)
    right = [dtypes[i].startswith(_NUMERIC) for i in range(ncols)]
    lines = _head([cell(name) for name in columns[:ncols]], widths)
    lines += [_line([cell_text(v) for v in row], widths, right) for row in shown["rows"]]
    return lines + _cut_notes(ncols, shown["more_columns"], shown["more_rows"])


def table_lines(columns: Sequence[str], dtypes: Sequence[str], rows: Sequence[Sequence[Any]],
                *, max_chars: int = MAX_CHARS) -> list[str]:
    """Header, rule and one line per row; trailing notes say which columns/rows were cut."""
    return grid_lines(columns, dtypes, grid(columns, dtypes, rows, max_chars=max_chars))


def _head(names: Sequence[str], widths: Sequence[int]) -> list[str]:
    return [_line(names, widths, [False] * len(widths)), "-+-".join("-" * w for w in widths)]


def _line(cells: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)]
    return " | ".join(parts).rstrip()


def _cut_notes(shown_cols: int, more_cols: int, more_rows: int) -> list[str]:
    notes = []
    if more_cols:
        notes.append(f"[... {more_cols} more columns not shown (the first {shown_cols} "
                     "are); select the columns you need with query_table / SQL]")
    if more_rows:
        notes.append(f"[... {more_rows} more rows not shown: the preview is capped at "
                     f"{MAX_CHARS} characters; ask for fewer rows or select fewer columns]")
    return notes
