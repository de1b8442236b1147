"""What read_table, query_table and web_table's preview answer: a table's shape, types and
the rows shown, with what was cut.

The text is ``yggdrasil.io``'s (``preview_text``, ``query_text``): a ``path  shape=(rows,
cols)  columns=[...]`` line, the format, the row count and the types, then the rows as an
aligned table with a note for every column or row left out.
"""

from __future__ import annotations

from typing import Literal, cast

from yggdrasil.io import Cell, PreviewData, QueryData, preview_text, query_text

from ._base import Result
from ._render import renders

__all__ = ["QueryRows", "TableRead"]


class _Shown(Result):
    """The part of a table shown: ``columns``/``dtypes``, the first 200 names and polars
    types (each cut at 80 characters), of ``column_count``; ``rows``: the rows shown, each
    cell of the first 30 columns as data (None, a bool, an int or a finite float as it is;
    any other value as its shown text: escaped, cut at 40 characters with ``…``);
    ``widths``: each shown column's width in characters; ``more_columns``: columns left out
    of the rows; ``more_rows``: rows read but left out (the table's text is capped)."""

    columns: list[str]
    column_count: int
    dtypes: list[str]
    rows: list[list[Cell]]
    widths: list[int]
    more_columns: int = 0
    more_rows: int = 0


class TableRead(_Shown):
    """``read_table`` (and web_table's preview): a table file's shape, types and first rows.

    ``path``: the root-relative path (a URL for web_table); ``format``: ``csv``, ``tsv``,
    ``parquet``, ``arrow``, ``json``, ``ndjson`` or ``xlsx``, with ``detail`` (the CSV
    delimiter, the XLSX sheet) and ``note`` (e.g. named .parquet but the content is CSV);
    ``size``: the file's bytes; ``row_count``: the table's rows, None when counting would
    read the whole file (``rows_note`` says how they were counted, or why not);
    ``rows_read``: the rows the preview read (at most the ``rows`` asked for).
    """

    kind: Literal["table"] = "table"
    path: str
    format: str
    detail: str = ""
    note: str = ""
    size: int
    row_count: int | None
    rows_note: str = ""
    rows_read: int


class QueryRows(_Shown):
    """``query_table``: the rows of a query. ``row_count``: the rows kept (at most
    ``limit``, the ``rows`` asked for); ``cut``: the result had more than ``limit``."""

    kind: Literal["query"] = "query"
    row_count: int
    cut: bool = False
    limit: int


@renders(TableRead)
def _table_text(result: TableRead) -> str:
    return preview_text(cast(PreviewData, result.model_dump(exclude={"kind"})))


@renders(QueryRows)
def _query_text(result: QueryRows) -> str:
    return query_text(cast(QueryData, result.model_dump(exclude={"kind"})))
