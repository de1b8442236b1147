"""SQL over table files: ``SELECT city, avg(price) FROM 'sales.parquet' GROUP BY city``.

A quoted path in a FROM / JOIN position names a file. The query is parsed and checked
by allow-list (``_sql``: one SELECT over quoted files and WITH names, no table functions,
bounded size); each file is scanned lazily (``scan_table``) and registered in a polars
SQLContext under a private table name, and polars runs SQL generated from the checked
tree with those names; the result is collected with the streaming engine and cut at
``rows``. Every file must come in through the caller's ``sources``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from . import _render
from ._errors import TableError, first_line, is_library_failure, known_problem
from ._sql import MAX_DEPTH, MAX_NODES, MAX_SQL_CHARS, TableRef, bind_files, check_query
from .tables import scan_table

if TYPE_CHECKING:
    import polars as pl

__all__ = ["MAX_DEPTH", "MAX_FILES", "MAX_NODES", "MAX_RESULT_ROWS", "MAX_SQL_CHARS",
           "QueryData", "QueryResult", "TableRef", "find_table_refs", "query_tables",
           "query_text"]

MAX_RESULT_ROWS = 1000
MAX_FILES = 16  # distinct files one query may name
_TABLE = "__loki_table_{}"


def find_table_refs(sql: str) -> list[TableRef]:
    """The files a query names, in order: quoted table names in FROM / JOIN that are not
    WITH names. Raises TableError when the query is not one that query_tables accepts."""
    return check_query(sql).refs


class QueryData(TypedDict):
    """A query's result as JSON-ready data (``QueryResult.summary``); ``query_text`` shows
    it. ``row_count``: the rows kept (at most ``limit``); ``cut``: the result had more;
    ``columns``/``dtypes`` as in ``PreviewData``; the rest is the ``Grid`` shown."""

    columns: list[str]
    column_count: int
    dtypes: list[str]
    row_count: int
    cut: bool
    limit: int
    rows: list[list[_render.Cell]]
    widths: list[int]
    more_columns: int
    more_rows: int


@dataclass
class QueryResult:
    """The rows of a query, cut at ``limit``; ``render()`` is the text ``query_table`` shows."""

    frame: Any  # the polars DataFrame of the rows kept
    cut: bool  # True when the query returned more than ``limit`` rows
    limit: int

    def render(self) -> str:
        """``result  shape=(rows, cols)  columns=[...]``, the types, the rows as a table."""
        return query_text(self.summary())

    def summary(self) -> QueryData:
        """What the result shows, as JSON-ready data (bounded like its text)."""
        df = self.frame
        names, dtypes = list(df.columns), [str(t) for t in df.dtypes]
        return QueryData(columns=_render.names_kept(names), column_count=len(names),
                         dtypes=_render.names_kept(dtypes), row_count=df.height, cut=self.cut,
                         limit=self.limit, **_render.grid(names, dtypes, df.rows()))


def query_text(data: QueryData) -> str:
    """A query result's text from its data: shape, columns, types, the rows as a table."""
    names, dtypes, total = data["columns"], data["dtypes"], data["column_count"]
    shape = f"({data['row_count']}{'+' if data['cut'] else ''}, {total})"
    lines = [f"result  shape={shape}  columns={_render.name_list(names, total=total)}",
             f"types: {_render.type_list(names, dtypes, total=total)}"]
    if data["row_count"]:
        lines += _render.grid_lines(names, dtypes, _render.Grid(
            rows=data["rows"], widths=data["widths"], more_columns=data["more_columns"],
            more_rows=data["more_rows"]))
    else:
        lines.append("(no rows)")
    if data["cut"]:
        lines.append(f"[showing the first {data['limit']} rows; the result has more; narrow it "
                     f"with WHERE / GROUP BY / LIMIT, or ask for more rows (up to "
                     f"{MAX_RESULT_ROWS})]")
    return "\n".join(lines)


Sources = Mapping[str, tuple[str | Path, str]]


def query_tables(sql: str, sources: Sources | None = None, rows: int = 50) -> QueryResult:
    """Run ``sql`` over the files it names; keep at most ``rows`` rows of the result.

    ``sources`` maps a path as written in the query to (the path to read, its label);
    a path missing from it is read as written. Raises TableError on any failure.
    """
    if not 1 <= rows <= MAX_RESULT_ROWS:
        raise TableError(f"query: rows must be between 1 and {MAX_RESULT_ROWS}")
    checked = check_query(sql)
    refs = checked.refs
    if not refs:
        raise TableError("query: name at least one table file as a quoted path in FROM or "
                         "JOIN, e.g. SELECT * FROM 'data.csv'")
    tables = {ref.path: _TABLE.format(i) for i, ref in enumerate(_unique(refs), 1)}
    if len(tables) > MAX_FILES:
        raise TableError(f"query: names {len(tables)} files; at most {MAX_FILES} per query")
    frames = {tables[p]: _scan(p, (sources or {}).get(p)) for p in tables}
    labels = {tables[p]: (sources or {}).get(p, (p, p))[1] for p in tables}
    return _run(bind_files(checked, tables), frames, labels, rows)


def _unique(refs: list[TableRef]) -> list[TableRef]:
    seen: dict[str, TableRef] = {}
    for ref in refs:
        seen.setdefault(ref.path, ref)
    return list(seen.values())


def _scan(path: str, source: tuple[str | Path, str] | None) -> pl.LazyFrame:
    read, label = source or (path, path)
    return scan_table(read, label=label)


def _run(sql: str, frames: Mapping[str, pl.LazyFrame], labels: Mapping[str, str],
         rows: int) -> QueryResult:
    import polars as pl

    try:
        lf = pl.SQLContext(frames).execute(sql, eager=False)
        df = lf.head(rows + 1).collect(engine="streaming")
    except BaseException as exc:
        if not is_library_failure(exc):
            raise
        raise _query_error(exc, labels) from exc
    return QueryResult(df.head(rows), df.height > rows, rows)


def _query_error(exc: BaseException, labels: Mapping[str, str]) -> TableError:
    problem = known_problem(exc, "CSV")
    if problem is not None:  # a problem of a (text) file found while scanning it
        return TableError(f"{', '.join(labels.values())}: {problem}")
    detail = first_line(str(exc))
    for table, label in labels.items():
        detail = detail.replace(table, repr(label))
    if "relation" in detail and "not found" in detail:
        detail += "; name a file as a quoted path, e.g. FROM 'data.csv'"
    return TableError(f"query failed: {detail}")
