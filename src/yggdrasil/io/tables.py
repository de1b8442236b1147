"""Detect a table's format, scan it lazily, and preview its shape, types and first rows.

``preview_table`` reads what a preview needs and no more: the first 64 KB to detect the
format, the schema, the first rows, and the row count only where it is cheap (see
``_readers``). ``scan_table`` gives the same file as a polars LazyFrame, for SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from . import _render
from ._detect import EXTENSIONS, FORMAT_NAMES, Detected, Sample, detect_format
from ._errors import TableError, translating
from ._guards import check_parquet, check_xlsx
from ._readers import LAZY_FORMATS, lazy_frame, load_whole, open_preview
from ._units import human_size

if TYPE_CHECKING:
    import polars as pl

MAX_PREVIEW_ROWS = 1000


class PreviewData(TypedDict):
    """A preview as JSON-ready data (``TablePreview.summary``); ``preview_text`` shows it.

    ``columns``/``dtypes``: the first MAX_NAMES names and types, each cut at MAX_NAME
    characters (``column_count`` says how many there are); ``row_count``: the table's rows
    (None when not counted, ``rows_note`` says why or how they were counted); ``rows_read``:
    the rows the preview read; the rest is the ``Grid`` of what is shown.
    """

    path: str
    format: str
    detail: str
    note: str
    size: int
    row_count: int | None
    rows_note: str
    columns: list[str]
    column_count: int
    dtypes: list[str]
    rows_read: int
    rows: list[list[_render.Cell]]
    widths: list[int]
    more_columns: int
    more_rows: int


@dataclass
class TablePreview:
    """A table's shape, types and first rows; ``render()`` is what a model reads."""

    path: str
    fmt: str
    rows: int | None  # None when counting would mean reading the whole file
    columns: list[str]
    dtypes: list[str]
    head: Any  # a polars DataFrame of the first rows
    rows_note: str = ""  # how the rows were counted, or why they were not
    detail: str = ""  # e.g. "delimiter ';'" or "sheet 'Data' of ['Data', 'Notes']"
    note: str = ""  # e.g. "named .parquet, but the content is CSV"
    size: int = 0

    def render(self) -> str:
        """The preview as ``read_table`` shows it: shape, format, row count, types, rows."""
        return preview_text(self.summary())

    def summary(self) -> PreviewData:
        """What the preview shows, as JSON-ready data (bounded like its text)."""
        shown = _render.grid(self.columns, self.dtypes, self.head.rows())
        return PreviewData(
            path=self.path, format=self.fmt, detail=self.detail, note=self.note, size=self.size,
            row_count=self.rows, rows_note=self.rows_note,
            columns=_render.names_kept(self.columns), column_count=len(self.columns),
            dtypes=_render.names_kept(self.dtypes), rows_read=self.head.height, **shown)


def preview_text(data: PreviewData) -> str:
    """A preview's text from its data: shape, format, row count, types, rows."""
    count, columns, total = data["row_count"], data["columns"], data["column_count"]
    rows = "?" if count is None else str(count)
    fmt = ", ".join(p for p in (FORMAT_NAMES.get(data["format"], data["format"]),
                                data["detail"]) if p)
    lines = [f"{data['path']}  shape=({rows}, {total})  "
             f"columns={_render.name_list(columns, total=total)}",
             f"format: {fmt}, {human_size(data['size'])}"
             + (f"; {data['note']}" if data["note"] else ""),
             f"rows: {data['rows_note']}" if count is None
             else f"rows: {count:,} ({data['rows_note']})",
             f"types: {_render.type_list(columns, data['dtypes'], total=total)}"]
    shown = data["rows_read"]
    if shown == 0:
        return "\n".join([*lines, "(no rows to show)"])
    noun = "row" if shown == 1 else "rows"
    lines.append(f"all {shown} {noun}:" if shown == count else f"first {shown} {noun}:")
    lines += _render.grid_lines(columns, data["dtypes"], _render.Grid(
        rows=data["rows"], widths=data["widths"], more_columns=data["more_columns"],
        more_rows=data["more_rows"]))
    return "\n".join(lines)


def preview_table(path: str | Path, rows: int = 10, *, label: str | None = None,
                  fmt: str | None = None, sheet: str | None = None,
                  suffix: str | None = None) -> TablePreview:
    """Shape, types and the first ``rows`` rows of the table file at ``path``.

    ``label`` is the name shown (and used for the extension when ``path`` has none, e.g.
    a ``/proc/self/fd/N`` path); ``fmt`` overrides detection; ``sheet`` picks an XLSX
    sheet by name or 0-based index; ``suffix`` is the extension to weigh when neither
    ``path`` nor ``label`` shows it (a download). Raises TableError naming the file and
    the problem.
    """
    name = label or str(path)
    if not 0 <= rows <= MAX_PREVIEW_ROWS:
        raise TableError(f"{name}: rows must be between 0 and {MAX_PREVIEW_ROWS}")
    sample, det = _detect(path, name, fmt, suffix)
    with translating(name, FORMAT_NAMES[det.fmt]):
        check_structure(path, det.fmt, name)
        found = open_preview(path, det, sample, rows, name, sheet)
    detail = found.detail or (f"delimiter {det.separator!r}" if det.fmt in ("csv", "tsv") else "")
    return TablePreview(name, det.fmt, found.rows, list(found.schema.names()),
                        [str(t) for t in found.schema.dtypes()], found.head,
                        found.rows_note, detail, det.note, sample.size)


def scan_table(path: str | Path, *, label: str | None = None, fmt: str | None = None) -> pl.LazyFrame:
    """The table at ``path`` as a LazyFrame (JSON arrays and XLSX are loaded whole, bounded).

    The schema is read here, so a file that cannot be read fails now, naming the file.
    """
    name = label or str(path)
    sample, det = _detect(path, name, fmt)
    with translating(name, FORMAT_NAMES[det.fmt]):
        check_structure(path, det.fmt, name)
        if det.fmt in LAZY_FORMATS:
            lf = lazy_frame(path, det)
            lf.collect_schema()
            return lf
        return load_whole(path, det, sample, name).lazy()


def check_structure(path: str | Path, fmt: str, name: str) -> None:
    """Refuse up front the workbooks and Parquet files built to swamp their parser."""
    if fmt == "xlsx":
        check_xlsx(path, name)
    elif fmt == "parquet":
        check_parquet(path, name)


def _detect(path: str | Path, name: str, fmt: str | None,
            suffix: str | None = None) -> tuple[Sample, Detected]:
    with translating(name, "a table"):
        sample = Sample.of(path)
    # The path's extension when it has a known one, else the label's (a /proc/self/fd path).
    if suffix is None:
        known = Path(path).suffix.lower() in EXTENSIONS
        suffix = Path(path).suffix if known else Path(name).suffix
    return sample, detect_format(name, sample, fmt, suffix=suffix)
