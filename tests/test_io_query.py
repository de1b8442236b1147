"""Finding the files a SQL query names, and running it over them (yggdrasil.io.query)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from test_io_formats import write
from yggdrasil.io import FORMATS, TableError, find_table_refs, query_tables


def paths(sql: str) -> list[str]:
    return [ref.path for ref in find_table_refs(sql)]


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT * FROM 'a.csv'", ["a.csv"]),
    ("select * from 'a.csv' as x join 'dir/b.parquet' y on x.id = y.id", ["a.csv", "dir/b.parquet"]),
    ("SELECT * FROM 'a.csv', 'b.csv' WHERE a = 'c.csv'", ["a.csv", "b.csv"]),
    # A quoted name is a file unless WITH defines it.
    ("SELECT * FROM \"a.csv\" LEFT JOIN \"t\" USING (id)", ["a.csv", "t"]),
    ("WITH \"t\" AS (SELECT 1 AS id) SELECT * FROM \"a.csv\" JOIN \"t\" USING (id)", ["a.csv"]),
    ("WITH t AS (SELECT * FROM 'x.json') SELECT * FROM t, 'y.csv'", ["x.json", "y.csv"]),
    ("SELECT * FROM (SELECT * FROM 'in.csv') s WHERE s.k IN (SELECT k FROM 'k.csv')",
     ["in.csv", "k.csv"]),
    ("SELECT 'a.csv' AS name FROM 'b.csv'", ["b.csv"]),  # a literal in SELECT is a value
    ("SELECT * FROM 'it''s.csv'", ["it's.csv"]),
    ("SELECT * FROM /* 'no.csv' */ 'yes.csv' -- FROM 'no2.csv'", ["yes.csv"]),
    ("SELECT 1", []),
])
def test_find_table_refs(sql: str, expected: list[str]) -> None:
    assert paths(sql) == expected


def test_ref_spans_cover_the_quoted_token() -> None:
    sql = "SELECT * FROM 'a.csv' t"
    (ref,) = find_table_refs(sql)
    assert sql[ref.start:ref.end] == "'a.csv'"


@pytest.fixture
def sales(tmp_path: Path) -> Path:
    pl.DataFrame({"city": ["Oslo", "Rome", "Oslo", "Lima"], "price": [10.0, 20.0, 30.0, 5.0],
                  "shop": [1, 2, 1, 3]}).write_parquet(tmp_path / "sales.parquet")
    (tmp_path / "shops.csv").write_text("shop;name\n1;North\n2;South\n3;East\n")
    return tmp_path


def run(sql: str, where: Path, rows: int = 50) -> str:
    sources = {ref.path: (where / ref.path, ref.path) for ref in find_table_refs(sql)}
    return query_tables(sql, sources, rows).render()


def test_group_by_over_parquet(sales: Path) -> None:
    out = run("SELECT city, avg(price) AS avg_price FROM 'sales.parquet' "
              "GROUP BY city ORDER BY city", sales)
    assert out.splitlines() == [
        "result  shape=(3, 2)  columns=['city', 'avg_price']",
        "types: city: String, avg_price: Float64",
        "city | avg_price",
        "-----+----------",
        "Lima |       5.0",
        "Oslo |      20.0",
        "Rome |      20.0",
    ]


def test_join_across_formats_with_a_sniffed_delimiter(sales: Path) -> None:
    out = run("SELECT n.name, sum(s.price) AS total FROM 'sales.parquet' s "
              "JOIN 'shops.csv' n ON s.shop = n.shop GROUP BY n.name ORDER BY total DESC", sales)
    assert out.splitlines()[-3:] == ["North |  40.0", "South |  20.0", "East  |   5.0"]


def test_the_same_file_twice_is_registered_once(sales: Path) -> None:
    out = run("SELECT count(*) AS n FROM 'sales.parquet' a JOIN 'sales.parquet' b "
              "ON a.city = b.city", sales)
    assert out.splitlines()[-1].strip() == "6"


def test_result_is_cut_and_says_so(tmp_path: Path) -> None:
    pl.DataFrame({"n": range(10_000)}).write_parquet(tmp_path / "n.parquet")
    out = run("SELECT n FROM 'n.parquet' ORDER BY n", tmp_path, rows=5)
    assert out.splitlines()[0] == "result  shape=(5+, 1)  columns=['n']"
    assert out.splitlines()[-1].startswith("[showing the first 5 rows; the result has more")
    assert out.splitlines()[2:-1] == ["n", "-", "0", "1", "2", "3", "4"]


def test_table_functions_are_refused() -> None:
    for sql in ("SELECT * FROM read_csv('/etc/passwd')",
                "SELECT * FROM READ_PARQUET ('/x.parquet')",
                'SELECT * FROM "read_csv"(\'/etc/passwd\')',
                "SELECT * FROM read_json /* hi */ ('/x.json')"):
        with pytest.raises(TableError, match=r"is not allowed; name a file as a quoted path"):
            query_tables(sql)


def test_a_query_without_files(tmp_path: Path) -> None:
    with pytest.raises(TableError, match="'sales' is neither a quoted file path nor a WITH"):
        query_tables("SELECT * FROM sales")
    with pytest.raises(TableError, match="name at least one table file as a quoted path"):
        query_tables("SELECT 1 AS one")


def test_sql_errors_name_the_file_not_the_private_table(sales: Path) -> None:
    with pytest.raises(TableError) as info:
        run("SELECT nope FROM 'sales.parquet'", sales)
    assert str(info.value).startswith("query failed: ")
    assert "__loki" not in str(info.value)
    with pytest.raises(TableError, match=r"query: cannot be parsed: .* line 1, column 15"):
        run("SELEC city FROM 'sales.parquet'", sales)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_can_be_queried(tmp_path: Path, fmt: str) -> None:
    write(fmt, tmp_path / f"sales.{fmt}")
    out = run(f"SELECT city, sum(qty) AS q FROM 'sales.{fmt}' GROUP BY city ORDER BY q DESC",
              tmp_path)
    cells = [[c.strip() for c in line.split("|")] for line in out.splitlines()[-3:]]
    assert [(city, float(q)) for city, q in cells] == [("Rome", 7), ("Oslo", 5), ("Lima", 3)]


def test_too_many_files_in_one_query() -> None:
    sql = "SELECT * FROM " + ", ".join(f"'f{i}.csv'" for i in range(17))
    with pytest.raises(TableError, match="names 17 files; at most 16"):
        query_tables(sql)


# -- attacks: table functions by any spelling, statements other than SELECT, bombs -------------

SECRET = "/home/u/.ssh/id_ed25519"


@pytest.mark.parametrize("sql", [
    # The red team's bypasses of the old word list:
    f"SELECT * FROM 'a.csv' a CROSS JOIN `read_csv`('{SECRET}', has_header => false) k",
    f"SELECT * FROM 'a.csv' a CROSS JOIN `READ_CSV`('{SECRET}') k",
    f"SELECT * FROM 'a.csv' UNION ALL SELECT * FROM read_csv('{SECRET}')",
    f"SELECT (SELECT max(column_1) FROM read_csv('{SECRET}')) AS x FROM 'a.csv'",
    f"SELECT * FROM 'a.csv' WHERE EXISTS (SELECT 1 FROM Read_Parquet('{SECRET}'))",
    f'SELECT * FROM "read_csv"(\'{SECRET}\')',
    f"WITH k AS (SELECT * FROM scan_csv('{SECRET}')) SELECT * FROM 'a.csv', k",
    f"SELECT * FROM read_ndjson('{SECRET}')",
    f"SELECT * FROM 'a.csv' JOIN read_ipc('{SECRET}') USING (id)",
    f"SELECT read_csv('{SECRET}') FROM 'a.csv'",
])
def test_table_functions_by_any_spelling_are_refused(sql: str) -> None:
    with pytest.raises(TableError) as info:
        query_tables(sql)
    message = str(info.value)
    assert message.startswith("query: ")
    assert "is not allowed" in message or "cannot be parsed" in message, message


@pytest.mark.parametrize(("sql", "why"), [
    ("CREATE TABLE t AS SELECT * FROM 'a.csv'", "CREATE statement is not allowed"),
    ("DROP TABLE t", "DROP statement is not allowed"),
    ("SHOW TABLES", "COMMAND statement is not allowed"),
    ("SELECT * FROM 'a.csv'; SELECT * FROM 'b.csv'", "holds 2 statements"),
    ("SELECT * INTO t FROM 'a.csv'", "INTO is not allowed"),
    ("SELECT * FROM other.schema_table", "has a schema prefix"),
    ("SELECT * FROM unnest([1, 2])", r"unnest\(\.\.\.\) in FROM / JOIN is not allowed"),
    ("SELECT * FROM 'a.csv', LATERAL (SELECT 1)", "LATERAL in FROM / JOIN is not allowed"),
])
def test_only_one_select_is_accepted(sql: str, why: str) -> None:
    with pytest.raises(TableError, match=why) as info:
        query_tables(sql)
    assert "query_table accepts one SELECT" in str(info.value) or "statements" in why


def test_expression_bombs_are_refused_before_polars_sees_them() -> None:
    """10,000 ``a+a+...`` terms segfaulted polars; a 1,500-term OR chain took over 1 GB."""
    plus = "SELECT " + "+".join(["a"] * 9000) + " FROM 'a.csv'"
    ors = "SELECT * FROM 'a.csv' WHERE " + " OR ".join(f"a = {i}" for i in range(1500))
    parens = "SELECT " + "(" * 3000 + "1" + ")" * 3000 + " FROM 'a.csv'"
    huge = "SELECT * FROM 'a.csv' WHERE a IN (" + ",".join(["1"] * 6000) + ")"
    for sql in (plus, ors, parens):
        with pytest.raises(TableError, match="nested"):
            query_tables(sql)
    with pytest.raises(TableError, match="characters long; at most 20,000"):
        query_tables("SELECT " + "+".join(["a"] * 10_000) + " FROM 'a.csv'")
    with pytest.raises(TableError, match="too large"):
        query_tables(huge)


def test_what_is_allowed_still_runs(sales: Path) -> None:
    out = run("WITH big AS (SELECT city, price FROM 'sales.parquet' WHERE price > 6) "
              "SELECT city FROM big UNION ALL SELECT city FROM 'sales.parquet' "
              "WHERE city IN (SELECT city FROM big) AND price < 100 ORDER BY city", sales)
    assert out.splitlines()[0] == "result  shape=(6, 1)  columns=['city']"
    chain = " OR ".join(f"price = {i}" for i in range(100))
    assert run(f"SELECT count(*) AS n FROM 'sales.parquet' WHERE {chain}",
               sales).splitlines()[-1].strip() == "4"
