"""read_table and query_table answer typed results (TableRead, QueryRows): what the table
holds and what was cut, as data; the text a model reads is rendered from that data, the
same text yggdrasil.io gives for the same file, whatever the file holds."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from yggdrasil.io import preview_table, query_tables
from yggdrasil.loki.results import QueryRows, TableRead
from yggdrasil.loki.tools import Toolbox


def odd_values() -> pl.DataFrame:
    """Every kind of cell the text shows differently: escapes, empty, null, NaN, infinity,
    dates, lists, decimals, bytes, structs, a long string."""
    return pl.DataFrame({
        "s": ["a\nb", "", None, "x" * 100], "i": [1, 2**40, None, -3],
        "f": [1.5, float("nan"), float("inf"), None], "b": [True, False, None, True],
        "d": [datetime.date(2024, 1, 2)] * 4, "l": [[1, 2], [], None, [3]],
        "dec": pl.Series([decimal.Decimal("1.5"), decimal.Decimal("2.25"), None,
                          decimal.Decimal("3")], dtype=pl.Decimal(10, 3)),
        "bin": [b"a\\n", b"", None, b"\x00"], "st": [{"a": 1, "b": "q\\z"}] * 4})


def test_read_table_answers_the_table_as_data(root: Path, box: Toolbox) -> None:
    odd_values().write_parquet(root / "odd.parquet")
    read = box.invoke("read_table", {"path": "odd.parquet"})
    data = read.data
    assert isinstance(data, TableRead) and not read.is_error
    assert (data.path, data.format, data.row_count, data.rows_read) == ("odd.parquet",
                                                                         "parquet", 4, 4)
    assert data.columns == ["s", "i", "f", "b", "d", "l", "dec", "bin", "st"]
    assert data.dtypes[:4] == ["String", "Int64", "Float64", "Boolean"]
    assert data.column_count == 9 and data.size == (root / "odd.parquet").stat().st_size
    # numbers, booleans and nulls as they are; any other cell as the text shown for it
    assert [row[1:4] for row in data.rows] == [[1, 1.5, True], [2**40, "nan", False],
                                               [None, "inf", None], [-3, None, True]]
    assert [row[0] for row in data.rows] == ["a\\nb", '""', None, "x" * 39 + "…"]
    assert data.rows[0][4:8] == ["2024-01-02", "[1, 2]", "1.500", "b'a\\\\n'"]
    assert (data.more_columns, data.more_rows) == (0, 0)
    # the text is yggdrasil.io's for the same file, byte for byte
    assert read.text == preview_table(root / "odd.parquet", label="odd.parquet").render()
    assert read.structured() == data.model_dump(mode="json")


def test_what_read_table_cut_is_counted(root: Path, box: Toolbox) -> None:
    wide = pl.DataFrame({f"column_{i}": ["v" * 500] * 1000 for i in range(250)})
    wide.write_parquet(root / "wide.parquet")
    read = box.invoke("read_table", {"path": "wide.parquet", "rows": 1000})
    data = read.data
    assert isinstance(data, TableRead)
    assert (data.column_count, len(data.columns), data.more_columns) == (250, 200, 220)
    assert data.columns[-1] == "column_199" and len(data.widths) == 30
    assert data.rows_read == 1000 and 0 < len(data.rows) < 1000
    assert data.more_rows == 1000 - len(data.rows)
    assert all(len(row) == 30 and row[0] == "v" * 39 + "…" for row in data.rows)
    assert read.text == preview_table(root / "wide.parquet", 1000, label="wide.parquet").render()
    assert "... 50 more]" in read.text.splitlines()[0]


def test_an_empty_preview(root: Path, box: Toolbox) -> None:
    (root / "t.csv").write_text("a,b\n1,2\n")
    data = box.invoke("read_table", {"path": "t.csv", "rows": 0}).data
    assert isinstance(data, TableRead)
    assert (data.rows_read, data.rows, data.row_count) == (0, [], 1)
    assert box.call("read_table", {"path": "t.csv", "rows": 0}).endswith("(no rows to show)")


def test_query_table_answers_its_rows_as_data(root: Path, box: Toolbox) -> None:
    odd_values().write_parquet(root / "odd.parquet")
    sql = "SELECT count(*) AS n, sum(i) AS total, max(s) AS top FROM 'odd.parquet'"
    got = box.invoke("query_table", {"sql": sql})
    data = got.data
    assert isinstance(data, QueryRows)
    assert (data.columns, data.dtypes[:2]) == (["n", "total", "top"], ["Int64", "Int64"])
    assert data.rows == [[4, 2**40 - 2, "x" * 39 + "…"]]
    assert (data.row_count, data.cut, data.limit) == (1, False, 50)
    cut = box.invoke("query_table", {"sql": "SELECT * FROM 'odd.parquet'", "rows": 2}).data
    assert isinstance(cut, QueryRows)
    assert (cut.row_count, cut.cut, cut.limit, len(cut.rows)) == (2, True, 2, 2)
    none = box.invoke("query_table", {"sql": "SELECT * FROM 'odd.parquet' WHERE i > 2e12"})
    assert isinstance(none.data, QueryRows) and (none.data.row_count, none.data.rows) == (0, [])
    # the text is yggdrasil.io's for the same query, byte for byte
    for query, rows in ((sql, 50), ("SELECT * FROM 'odd.parquet'", 2)):
        source = {"odd.parquet": (str(root / "odd.parquet"), "odd.parquet")}
        said = box.call("query_table", {"sql": query, "rows": rows})
        assert said == query_tables(query, source, rows).render()


def test_a_failed_read_is_an_error_result_not_a_table(root: Path, box: Toolbox) -> None:
    (root / "bad.parquet").write_bytes(b"PAR1 not really")
    got = box.invoke("read_table", {"path": "bad.parquet"})
    assert got.is_error and not isinstance(got.data, TableRead)
    got = box.invoke("query_table", {"sql": "DELETE FROM 'bad.parquet'"})
    assert got.is_error and not isinstance(got.data, QueryRows)


def test_mcp_answers_query_table_with_its_rows_as_structured_content(
        root: Path, mcp_python: str) -> None:
    """Over MCP (the official SDK's client, each SDK major): query_table's rows arrive as
    structuredContent beside the same text, checked against the tool's outputSchema; a
    failed query is isError with an error's data."""
    pytest.importorskip("mcp")
    from test_mcp import field, serve_and, text_of

    pl.DataFrame({"city": ["Oslo", "Rome", "Oslo"], "price": [1.5, None, 3.0]}).write_csv(
        root / "sales.csv")
    sql = "SELECT city, sum(price) AS total FROM 'sales.csv' GROUP BY city ORDER BY city"

    async def scenario(client: Any) -> Any:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        good = await client.call_tool("query_table", {"sql": sql})
        await client.validate_tool_result("query_table", good)
        bad = await client.call_tool("query_table", {"sql": "SELECT * FROM 'missing.csv'"})
        read = await client.call_tool("read_table", {"path": "sales.csv", "rows": 1})
        return tools, good, bad, read

    (tools, good, bad, read), _ = serve_and(mcp_python, root, scenario, "--read-only")
    schema = field(tools["query_table"], "output_schema")
    assert {"rows", "columns", "row_count", "cut"} <= set(schema["properties"])
    data = field(good, "structured_content")
    assert field(good, "is_error") is False
    assert (data["kind"], data["columns"], data["rows"]) == ("query", ["city", "total"],
                                                             [["Oslo", 4.5], ["Rome", None]])
    assert (data["row_count"], data["cut"], data["limit"]) == (2, False, 50)
    assert text_of(good).splitlines()[0] == "result  shape=(2, 2)  columns=['city', 'total']"
    assert field(bad, "is_error") is True
    assert field(bad, "structured_content")["kind"] == "error"
    table = field(read, "structured_content")
    assert (table["kind"], table["path"], table["row_count"], table["rows"]) == (
        "table", "sales.csv", 3, [["Oslo", 1.5]])


def test_a_worker_answer_of_the_wrong_shape_is_an_error(root: Path) -> None:
    """The worker parses what a model names: its answer is checked like any input, and one
    of the wrong shape is an error observation, not a traceback or a half-read table."""
    from yggdrasil.loki.files import Root
    from yggdrasil.loki.sandbox import FencedWorker
    from yggdrasil.loki.tables import TableReader
    from yggdrasil.loki.tools import Tool

    (root / "t.csv").write_text("a\n1\n")
    reader = TableReader(Root.at(root))
    reader.worker.close()
    reader.worker = FencedWorker("worker_probe", [str(root)], name="table worker")
    box = Toolbox()
    box.add(Tool("read_table", "r", {"path": "path"}, reader.read_table))
    try:
        got = box.invoke("read_table", {"path": "t.csv"})
    finally:
        reader.close()
    assert got.is_error and not isinstance(got.data, TableRead)
    assert got.text == "ERROR: reading t.csv stopped: the table worker sent a malformed reply"
