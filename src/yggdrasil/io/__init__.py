"""yggdrasil.io: table files (CSV/TSV, Parquet, Arrow IPC/Feather, JSON/NDJSON, XLSX).

Detect a file's format (by content when the extension is missing or wrong), open it
lazily with polars, preview its shape, types and first rows, and query files with SQL.
Importing this package does no work; polars (and fastexcel) are imported on first use.
"""

from __future__ import annotations

from ._detect import FORMATS
from ._render import Cell
from ._units import human_size
from .query import QueryData, QueryResult, TableRef, find_table_refs, query_tables, query_text
from .tables import (
    PreviewData,
    TableError,
    TablePreview,
    preview_table,
    preview_text,
    scan_table,
)

__all__ = [
    "FORMATS",
    "Cell",
    "PreviewData",
    "QueryData",
    "QueryResult",
    "TableError",
    "TablePreview",
    "TableRef",
    "find_table_refs",
    "human_size",
    "preview_table",
    "preview_text",
    "query_tables",
    "query_text",
    "scan_table",
]
