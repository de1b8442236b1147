"""Detect a table's format, scan it lazily, and preview its first rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


class TableError(ValueError):
    """A file that cannot be read as a table; the message names the file and the problem."""


@dataclass
class TablePreview:
    path: str
    fmt: str
    rows: int | None
    columns: list[str]
    dtypes: list[str]
    head: Any  # a polars DataFrame of the first rows

    def render(self) -> str:
        rows = "?" if self.rows is None else str(self.rows)
        types = "  ".join(f"{c}: {t}" for c, t in zip(self.columns, self.dtypes, strict=True))
        return (f"{self.path}  shape=({rows}, {len(self.columns)})  columns={self.columns}\n"
                f"types: {types}\n{self.head}")


_FORMATS = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def preview_table(path: str | Path, rows: int = 10, *, label: str | None = None) -> TablePreview:
    import polars as pl

    path = Path(path)
    fmt = _FORMATS.get(path.suffix.lower())
    name = label or str(path)
    if fmt is None:
        raise TableError(f"{name}: unknown table format; read_table reads .csv, .tsv, .parquet")
    try:
        if fmt == "parquet":
            lf = pl.scan_parquet(path)
        else:
            sep = "\t" if path.suffix.lower() == ".tsv" else ","
            lf = pl.scan_csv(path, separator=sep)
        schema = lf.collect_schema()
        head = lf.head(rows).collect()
        count = lf.select(pl.len()).collect().item()
    except Exception as exc:
        raise TableError(f"{name}: cannot read as {fmt}: {exc}") from exc
    return TablePreview(name, fmt, count, list(schema.names()), [str(t) for t in schema.dtypes()],
                        head)
