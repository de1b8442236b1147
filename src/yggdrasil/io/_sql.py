"""Which SQL a query may be: one SELECT over quoted files and WITH names, by allow-list.

The query is parsed by sqlglot (a maintained SQL parser), and the tree, not the text, is
checked: the statement is a SELECT (with WITH, joins, set operations, subqueries); every
table in FROM / JOIN is a quoted file path, a WITH name or a subquery, never a function
(polars' ``read_csv('/any/path')`` reads any file, however it is spelled or quoted); no
function anywhere is named ``read_*`` / ``scan_*``; and the tree is bounded in size and
depth (polars' planner recurses per term: a 10,000-term ``a+a+...`` overflows its stack,
a 1,500-term ``OR`` chain takes over 1 GB). polars then runs SQL generated from this
checked tree, with each file replaced by a private table name, never the text as sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from ._errors import TableError

if TYPE_CHECKING:
    from sqlglot import exp

MAX_SQL_CHARS = 20_000
MAX_NODES = 5_000  # nodes of the parsed tree (an IN list of 3,000 values is ~3,000)
MAX_DEPTH = 120  # nesting of the tree (a chain of n ORs or +s is n deep)
ALLOWED = ("query_table accepts one SELECT (WITH, JOIN, UNION / EXCEPT / INTERSECT and "
           "subqueries allowed) whose tables are quoted file paths ('data.csv' or "
           "\"data.csv\") or names defined in its WITH")
_TABLE_FUNCTION_PREFIXES = ("read_", "scan_")


@dataclass(frozen=True)
class TableRef:
    """A file named in a query: its path as written, and where its quoted token sits
    (``sql[start:end]``; -1 when the parser did not say)."""

    path: str
    start: int
    end: int


@dataclass
class CheckedQuery:
    tree: exp.Expression
    refs: list[TableRef]
    files: list[exp.Expression]  # the Table nodes that name files, in ``refs`` order


def check_query(sql: str) -> CheckedQuery:
    """Parse and check ``sql``; a TableError says what is wrong and what is allowed."""
    if len(sql) > MAX_SQL_CHARS:
        raise TableError(f"query: is {len(sql):,} characters long; at most {MAX_SQL_CHARS:,}")
    tree = _parse(sql)
    _check_size(tree)
    _check_shape(tree)
    ctes = {cte.alias_or_name for cte in _walk(tree) if _is(cte, "CTE")}
    files = [t for t in _walk(tree) if _is(t, "Table") and _table_name(t) not in ctes]
    files.sort(key=lambda t: _ref(t).start)  # in the order they are written
    for table in files:
        if not table.this.args.get("quoted"):
            raise TableError(f"query: table {table.name!r} is neither a quoted file path nor a "
                             f"WITH name; write it as a path in quotes, e.g. FROM "
                             f"'{table.name}.csv'. {ALLOWED}")
    return CheckedQuery(tree, [_ref(t) for t in files], files)


def bind_files(checked: CheckedQuery, tables: dict[str, str]) -> str:
    """The SQL polars runs: the checked tree, each file replaced by ``tables[path]``."""
    from sqlglot import exp

    originals = [t.this for t in checked.files]
    try:
        for table, ref in zip(checked.files, checked.refs, strict=True):
            table.set("this", exp.to_identifier(tables[ref.path]))
        return checked.tree.sql()
    finally:
        for table, original in zip(checked.files, originals, strict=True):
            table.set("this", original)


def _parse(sql: str) -> exp.Expression:
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        statements = [s for s in sqlglot.parse(sql) if s is not None]
    except RecursionError:
        raise TableError(f"query: is nested too deeply (at most {MAX_DEPTH} levels)") from None
    except SqlglotError as exc:
        raise TableError(f"query: cannot be parsed: {_parse_problem(exc)}. {ALLOWED}") from None
    if len(statements) != 1:
        raise TableError(f"query: holds {len(statements)} statements; {ALLOWED}")
    return cast("exp.Expression", statements[0])


def _parse_problem(exc: Exception) -> str:
    """sqlglot's first complaint, without its terminal colours."""
    errors = getattr(exc, "errors", None) or []
    if errors and isinstance(errors[0], dict):
        first = errors[0]
        near = str(first.get("highlight") or "").strip()
        where = f" at line {first.get('line')}, column {first.get('col')}"
        return f"{first.get('description')}{where}" + (f" (near {near!r})" if near else "")
    return re.sub(r"\x1b\[[0-9;]*m", "", " ".join(str(exc).split()))[:300]


def _walk(tree: exp.Expression) -> list[exp.Expression]:
    """Every node, without recursion (a deep tree must not overflow our stack)."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(node.iter_expressions())
    return out


def _is(node: exp.Expression, *names: str) -> bool:
    return any(cls.__name__ in names for cls in type(node).__mro__)


def _check_size(tree: exp.Expression) -> None:
    count, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise TableError(f"query: an expression is nested more than {MAX_DEPTH} levels "
                             "deep (e.g. a chain of that many OR / + terms); use IN (...) "
                             "or split the work into smaller queries")
        if count > MAX_NODES:
            raise TableError(f"query: is too large (more than {MAX_NODES:,} terms); "
                             "split it into smaller queries")
        stack.extend((child, depth + 1) for child in node.iter_expressions())


def _check_shape(tree: exp.Expression) -> None:
    if not _is(tree, "Query") or _is(tree, "Command"):
        kind = type(tree).__name__.upper()
        raise TableError(f"query: a {kind} statement is not allowed; {ALLOWED}")
    nodes = _walk(tree)
    for node in nodes:  # first, so that read_csv(...) is named as such wherever it is
        name = _function_name(node)
        if name is not None and name.lower().startswith(_TABLE_FUNCTION_PREFIXES):
            raise TableError(f"query: {name.lower()}() is not allowed; name a file as a quoted "
                             "path instead, e.g. SELECT * FROM 'data.csv'")
    for node in nodes:
        if _is(node, "From", "Join"):
            _check_source(node.this)
        elif _is(node, "Into", "Command", "DDL", "DML", "Lateral", "Pragma", "Set"):
            raise TableError(f"query: {type(node).__name__.upper()} is not allowed; {ALLOWED}")
        elif _is(node, "Table"):
            _check_table(node)


def _check_source(node: exp.Expression) -> None:
    """What FROM / JOIN may read: a table, a subquery or VALUES, never a function."""
    if not _is(node, "Table", "Subquery", "Values"):
        name = _function_name(node)
        what = f"{name.lower()}(...)" if name else type(node).__name__.upper()
        raise TableError(f"query: {what} in FROM / JOIN is not allowed; {ALLOWED}")


def _check_table(table: exp.Expression) -> None:
    inner = table.this
    if inner is None or not _is(inner, "Identifier"):
        name = _function_name(inner) if inner is not None else None
        what = f"{name.lower()}()" if name else type(inner).__name__.upper()
        raise TableError(f"query: {what} in FROM / JOIN is not allowed; {ALLOWED}")
    if table.args.get("db") or table.args.get("catalog"):
        raise TableError(f"query: table {table.sql()!r} has a schema prefix; {ALLOWED}")


def _function_name(node: exp.Expression) -> str | None:
    if not _is(node, "Func"):
        return None
    if _is(node, "Anonymous"):
        return str(node.name)
    return str(cast("exp.Func", node).sql_name())


def _table_name(table: exp.Expression) -> str:
    return str(table.name)


def _ref(table: exp.Expression) -> TableRef:
    meta = table.this.meta if table.this is not None else {}
    start, end = meta.get("start"), meta.get("end")
    if isinstance(start, int) and isinstance(end, int):
        return TableRef(table.name, start, end + 1)
    return TableRef(table.name, -1, -1)
