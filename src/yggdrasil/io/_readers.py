"""Open each format the cheapest way polars (or fastexcel) allows, and count rows when cheap.

CSV/TSV, NDJSON, Parquet and Arrow are scanned lazily: a preview reads the schema and the
first rows, not the file. The row count comes from metadata where the format has it
(the Parquet footer, the Arrow IPC footer, the sheet's dimensions); a text file has no
such thing, so it is counted by a full scan only up to COUNT_LIMIT bytes and otherwise
estimated from the average length of its first lines and reported as not counted.
A CSV preview parses only a bounded prefix of the file (see ``_csv_preview``).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ._detect import FORMAT_NAMES, Detected, Sample, estimate_rows
from ._errors import TableError, is_library_failure
from ._json import read_json_head
from ._units import human_size

if TYPE_CHECKING:
    import polars as pl

COUNT_LIMIT = 64 * 2**20  # CSV/TSV/NDJSON up to this size are counted by a full scan
JSON_WHOLE_LIMIT = 64 * 2**20  # JSON arrays up to this size are parsed whole
LOAD_LIMIT = 512 * 2**20  # JSON / XLSX loaded whole (for SQL) only up to this size
SCHEMA_ROWS = 10_000  # rows of a text file that column types are inferred from
PREFIX_CHUNK = 2**20  # a CSV preview reads its prefix in chunks of this many bytes ...
PREFIX_LIMIT = 16 * 2**20  # ... up to this many bytes
LAZY_FORMATS = ("csv", "tsv", "ndjson", "parquet", "arrow")

Source = str | Path


@dataclass
class Opened:
    """What a reader found: the first rows, the schema, and the row count or why not."""

    head: pl.DataFrame
    schema: pl.Schema
    rows: int | None
    rows_note: str
    detail: str = ""


def lazy_frame(path: Source, det: Detected) -> pl.LazyFrame:
    import polars as pl

    if det.fmt in ("csv", "tsv"):
        return pl.scan_csv(path, separator=det.separator, infer_schema_length=SCHEMA_ROWS,
                           glob=False)
    if det.fmt == "ndjson":
        return pl.scan_ndjson(path, infer_schema_length=SCHEMA_ROWS)
    if det.fmt == "parquet":
        return pl.scan_parquet(path, glob=False)
    if det.fmt == "arrow":
        return pl.scan_ipc(path, glob=False)
    raise ValueError(f"{det.fmt} is not scanned lazily")


def open_preview(path: Source, det: Detected, sample: Sample, rows: int, name: str,
                 sheet: str | None) -> Opened:
    if det.fmt == "xlsx":
        return _xlsx_preview(path, rows, name, sheet)
    if sheet:
        raise TableError(f"{name}: sheet applies only to XLSX workbooks; this file is "
                         f"{FORMAT_NAMES[det.fmt]}")
    if det.fmt == "json":
        return _json_preview(path, sample, rows, name)
    if det.fmt in ("csv", "tsv"):
        return _csv_preview(path, det, sample, rows, name)
    return _scan_preview(path, det, sample, rows, name)


def _scan_preview(path: Source, det: Detected, sample: Sample, rows: int, name: str) -> Opened:
    lf = lazy_frame(path, det)
    head = lf.head(rows).collect()  # carries the full schema, so no second schema pass
    return Opened(head, head.schema, *_count(lf, det, sample, name))


def _csv_preview(path: Source, det: Detected, sample: Sample, rows: int, name: str) -> Opened:
    """Parse a bounded prefix: polars' CSV scan maps the whole file even for head(10)."""
    import polars as pl

    prefix = read_prefix(path, SCHEMA_ROWS + rows + 1)
    if prefix is None:  # no whole rows in the prefix: let polars scan (and report) it
        return _scan_preview(path, det, sample, rows, name)
    data, whole = prefix
    try:
        df = pl.read_csv(io.BytesIO(data), separator=det.separator,
                         infer_schema_length=SCHEMA_ROWS)
    except BaseException as exc:
        if whole or not is_library_failure(exc):
            raise
        # The cut may split a quoted field that spans lines: let polars scan the file.
        return _scan_preview(path, det, sample, rows, name)
    if whole:
        return Opened(df.head(rows), df.schema, df.height, "counted by reading the whole file")
    count, note = _count(lazy_frame(path, det), det, sample, name)
    return Opened(df.head(rows), df.schema, count, note)


def read_prefix(path: Source, lines: int) -> tuple[bytes, bool] | None:
    """The first ``lines`` whole lines (or PREFIX_LIMIT bytes of them), and whether that
    is the whole file; None when even the first two lines do not fit."""
    chunks: list[bytes] = []
    seen = newlines = 0
    with open(path, "rb") as fh:
        while newlines < lines and seen < PREFIX_LIMIT:
            chunk = fh.read(PREFIX_CHUNK)
            if not chunk:
                return b"".join(chunks), True
            chunks.append(chunk)
            seen, newlines = seen + len(chunk), newlines + chunk.count(b"\n")
        more = fh.read(1) != b""
    data = b"".join(chunks)
    if not more:
        return data, True
    if newlines < 2:
        return None
    return data[: data.rfind(b"\n") + 1], False


def _count(lf: pl.LazyFrame, det: Detected, sample: Sample, name: str) -> tuple[int | None, str]:
    import polars as pl

    if det.fmt in ("parquet", "arrow"):
        where = "the Parquet footer" if det.fmt == "parquet" else "the Arrow IPC footer"
        return lf.select(pl.len()).collect().item(), f"from {where}, without reading the data"
    if sample.size <= COUNT_LIMIT:
        return lf.select(pl.len()).collect().item(), "counted by reading the whole file"
    guess = estimate_rows(sample, header=det.fmt != "ndjson")
    about = f"about {guess:,} estimated from the first 64 KB; " if guess is not None else ""
    return None, (f"not counted: the file is {human_size(sample.size)} and counting "
                  f"{FORMAT_NAMES[det.fmt]} rows means reading all of it (files up to "
                  f"{human_size(COUNT_LIMIT)} are counted); {about}"
                  f"SELECT count(*) FROM '{name}' (query_table) counts them exactly")


def _json_preview(path: Source, sample: Sample, rows: int, name: str) -> Opened:
    import polars as pl

    if sample.size <= JSON_WHOLE_LIMIT:
        df = pl.read_json(path)
        return Opened(df.head(rows), df.schema, df.height, "counted by reading the whole file")
    records, complete = read_json_head(path, max(rows, 1000), name)
    df = pl.from_dicts(records, infer_schema_length=None)
    if complete:
        return Opened(df.head(rows), df.schema, df.height, "counted by reading the whole file")
    return Opened(df.head(rows), df.schema, None, (
        f"not counted: a JSON array must be parsed whole to count it and the file is "
        f"{human_size(sample.size)} (parsed whole up to {human_size(JSON_WHOLE_LIMIT)}); "
        f"types come from the first {len(records):,} records; as NDJSON or Parquet it "
        "could be scanned"))


def _xlsx_preview(path: Source, rows: int, name: str, sheet: str | None) -> Opened:
    reader = fastexcel_module(name).read_excel(os.fspath(path))
    names: list[str] = list(reader.sheet_names)
    index = pick_sheet(names, sheet, name)
    # Types come from the loaded rows: load enough of them, the sheet is in memory anyway.
    loaded = reader.load_sheet(index, n_rows=max(rows, 1000))
    df = loaded.to_polars()
    if df.width == 0:  # (fastexcel then reports a total height of 2**64 - 1)
        raise TableError(f"{name}: sheet {names[index]!r} is empty: no header and no rows")
    return Opened(df.head(rows), df.schema, loaded.total_height, "from the sheet's dimensions",
                  detail=f"sheet {names[index]!r} of {names}")


def load_whole(path: Source, det: Detected, sample: Sample, name: str) -> pl.DataFrame:
    """A JSON array or an XLSX sheet, which cannot be scanned lazily, loaded for SQL."""
    import polars as pl

    if sample.size > LOAD_LIMIT:
        raise TableError(f"{name}: is {human_size(sample.size)}; {FORMAT_NAMES[det.fmt]} is "
                         f"loaded whole for SQL only up to {human_size(LOAD_LIMIT)}; "
                         "convert it to Parquet or NDJSON")
    if det.fmt == "json":
        return pl.read_json(path)
    reader = fastexcel_module(name).read_excel(os.fspath(path))
    return reader.load_sheet(0).to_polars()


def pick_sheet(names: list[str], sheet: str | None, name: str) -> int:
    if not sheet:
        if not names:
            raise TableError(f"{name}: the workbook has no sheets")
        return 0
    if sheet in names:
        return names.index(sheet)
    if sheet.isdigit() and int(sheet) < len(names):
        return int(sheet)
    raise TableError(f"{name}: has no sheet {sheet!r}; its sheets are {names} "
                     "(give a name or a 0-based index)")


def fastexcel_module(name: str) -> Any:
    try:
        import fastexcel
    except ImportError:
        raise TableError(f"{name}: reading XLSX needs fastexcel: "
                         "pip install 'yggdrasil-loki[xlsx]'") from None
    mod: ModuleType = fastexcel
    return mod
