"""SQL over table files: ``SELECT city, avg(price) FROM 'sales.parquet' GROUP BY city``.

A quoted path in a FROM / JOIN position names a file. Each file is scanned lazily
(``scan_table``), registered in a polars SQLContext under a private table name, and the
query is rewritten to use those names; the result is collected with the streaming engine
and cut at ``rows``. polars' own table functions (``read_csv('...')``) are refused: they
would open any path, and every file must come in through the caller's ``sources``.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _render
from ._detect import EXTENSIONS
from ._errors import TableError, first_line, is_library_failure, known_problem
from .tables import scan_table

if TYPE_CHECKING:
    import polars as pl

MAX_RESULT_ROWS = 1000
MAX_FILES = 16  # distinct files one query may name
_TABLE = "__loki_table_{}"
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>'(?:[^']|'')*'?)
  | (?P<ident>"(?:[^"]|"")*"?)
  | (?P<word>[^\W\d]\w*)
  | (?P<other>.)
""", re.X | re.S)
# Keywords that open a clause: a comma right after FROM's tables continues the FROM list.
_CLAUSES = {"SELECT", "FROM", "WHERE", "GROUP", "ORDER", "HAVING", "LIMIT", "OFFSET", "ON",
            "USING", "UNION", "EXCEPT", "INTERSECT", "JOIN", "WINDOW", "QUALIFY", "VALUES", "WITH"}


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class TableRef:
    """A file named in a query: its path as written, and where the quoted token sits."""

    path: str
    start: int
    end: int


def _tokens(sql: str) -> list[_Token]:
    """The significant tokens of ``sql`` (no whitespace, no comments)."""
    found = (_Token(m.lastgroup or "other", m.group(), m.start(), m.end())
             for m in _TOKEN.finditer(sql))
    return [t for t in found if t.kind not in ("space", "comment")]


def _unquote(tok: _Token) -> str:
    quote = tok.text[0]
    body = tok.text[1:-1] if len(tok.text) > 1 and tok.text.endswith(quote) else tok.text[1:]
    return body.replace(quote * 2, quote)


def find_table_refs(sql: str) -> list[TableRef]:
    """Quoted paths in table position: after FROM or JOIN, or in FROM's comma list.

    A 'single-quoted' path there is always a file; a "double-quoted" name only when it
    ends in a table extension (otherwise it is a table or CTE name).
    """
    refs: list[TableRef] = []
    clause: dict[int, str] = {}
    depth, prev = 0, _Token("other", "", 0, 0)
    for tok in _tokens(sql):
        if tok.text == "(":
            depth += 1
        elif tok.text == ")":
            clause.pop(depth, None)
            depth -= 1
        elif tok.kind == "word" and tok.text.upper() in _CLAUSES:
            clause[depth] = tok.text.upper()
        elif tok.kind in ("string", "ident") and _in_table_position(prev, clause.get(depth)):
            path = _unquote(tok)
            if tok.kind == "string" or os.path.splitext(path)[1].lower() in EXTENSIONS:
                refs.append(TableRef(path, tok.start, tok.end))
        prev = tok
    return refs


def _in_table_position(prev: _Token, clause: str | None) -> bool:
    if prev.kind == "word" and prev.text.upper() in ("FROM", "JOIN"):
        return True
    return prev.text == "," and clause == "FROM"


def _refuse_table_functions(sql: str) -> None:
    tokens = _tokens(sql)
    for tok, nxt in itertools.pairwise(tokens):
        if nxt.text != "(" or tok.kind not in ("word", "ident"):
            continue
        name = (_unquote(tok) if tok.kind == "ident" else tok.text).lower()
        if name.startswith(("read_", "scan_")):
            raise TableError(f"query: {name}() is not allowed; name a file as a quoted path "
                             "instead, e.g. SELECT * FROM 'data.csv'")


@dataclass
class QueryResult:
    frame: Any  # the polars DataFrame of the rows kept
    cut: bool  # True when the query returned more than ``limit`` rows
    limit: int

    def render(self) -> str:
        df = self.frame
        names, dtypes = list(df.columns), [str(t) for t in df.dtypes]
        shape = f"({df.height}{'+' if self.cut else ''}, {df.width})"
        lines = [f"result  shape={shape}  columns={_render.name_list(names)}",
                 f"types: {_render.type_list(names, dtypes)}"]
        lines += _render.table_lines(names, dtypes, df.rows()) if df.height else ["(no rows)"]
        if self.cut:
            lines.append(f"[showing the first {self.limit} rows; the result has more; narrow it "
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
    _refuse_table_functions(sql)
    refs = find_table_refs(sql)
    if not refs:
        raise TableError("query: name at least one table file as a quoted path in FROM or "
                         "JOIN, e.g. SELECT * FROM 'data.csv'")
    tables = {ref.path: _TABLE.format(i) for i, ref in enumerate(_unique(refs), 1)}
    if len(tables) > MAX_FILES:
        raise TableError(f"query: names {len(tables)} files; at most {MAX_FILES} per query")
    frames = {tables[p]: _scan(p, (sources or {}).get(p)) for p in tables}
    labels = {tables[p]: (sources or {}).get(p, (p, p))[1] for p in tables}
    return _run(_rewrite(sql, refs, tables), frames, labels, rows)


def _unique(refs: list[TableRef]) -> list[TableRef]:
    seen: dict[str, TableRef] = {}
    for ref in refs:
        seen.setdefault(ref.path, ref)
    return list(seen.values())


def _scan(path: str, source: tuple[str | Path, str] | None) -> pl.LazyFrame:
    read, label = source or (path, path)
    return scan_table(read, label=label)


def _rewrite(sql: str, refs: list[TableRef], tables: Mapping[str, str]) -> str:
    out, last = [], 0
    for ref in refs:
        out += [sql[last:ref.start], tables[ref.path]]
        last = ref.end
    return "".join([*out, sql[last:]])


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
