"""query_table through the toolbox: files confined to the root, results bounded."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


@pytest.fixture
def data(root: Path) -> Path:
    (root / "data").mkdir()
    pl.DataFrame({"city": ["Oslo", "Rome", "Oslo"], "price": [1.0, 2.0, 3.0]}).write_parquet(
        root / "data" / "sales.parquet")
    (root.parent / "outside" / "leak.csv").write_text("secret\nTOP SECRET\n")
    return root


def test_query_table_is_a_read_tool(root: Path) -> None:
    box = filesystem_toolbox(root, read_only=True)
    assert "query_table" in box.tools
    assert not box.tools["query_table"].mutates


def test_query_over_a_file_in_the_root(data: Path, box: Toolbox) -> None:
    out = box.call("query_table", {"sql": "SELECT city, sum(price) AS total "
                                          "FROM 'data/sales.parquet' GROUP BY city ORDER BY city"})
    assert out.splitlines()[0] == "result  shape=(2, 2)  columns=['city', 'total']"
    assert out.splitlines()[-2:] == ["Oslo |   4.0", "Rome |   2.0"]


def test_absolute_path_inside_the_root(data: Path, box: Toolbox) -> None:
    path = data / "data" / "sales.parquet"
    out = box.call("query_table", {"sql": f"SELECT count(*) AS n FROM '{path}'"})
    assert out.splitlines()[-1].strip() == "3"


@pytest.mark.parametrize("ref", ["../outside/leak.csv", "/etc/passwd", "../root-secrets/key.txt"])
def test_an_escaping_path_is_an_error(data: Path, box: Toolbox, ref: str) -> None:
    out = box.call("query_table", {"sql": f"SELECT * FROM 'data/sales.parquet' s, '{ref}'"})
    assert out.startswith("ERROR: path ") and "escapes the agent root" in out
    assert "TOP SECRET" not in out


def test_an_escape_hidden_in_a_join_is_an_error(data: Path, box: Toolbox) -> None:
    out = box.call("query_table", {"sql": "SELECT * FROM 'data/sales.parquet' a "
                                          "JOIN \"../outside/leak.csv\" b ON true"})
    assert "escapes the agent root" in out and "TOP SECRET" not in out


def test_a_symlink_out_of_the_root_is_an_error(data: Path, box: Toolbox) -> None:
    (data / "leak.csv").symlink_to(data.parent / "outside" / "leak.csv")
    out = box.call("query_table", {"sql": "SELECT * FROM 'leak.csv'"})
    assert out.startswith("ERROR:") and "TOP SECRET" not in out


def test_table_functions_cannot_reach_outside(data: Path, box: Toolbox) -> None:
    leak = data.parent / "outside" / "leak.csv"
    out = box.call("query_table", {"sql": f"SELECT * FROM read_csv('{leak}')"})
    assert out.startswith("ERROR: query: read_csv() is not allowed")
    assert "TOP SECRET" not in out


def test_result_is_cut(root: Path, box: Toolbox) -> None:
    pl.DataFrame({"n": range(5000)}).write_csv(root / "n.csv")
    out = box.call("query_table", {"sql": "SELECT * FROM 'n.csv'", "rows": 10})
    assert out.splitlines()[0] == "result  shape=(10+, 1)  columns=['n']"
    assert "[showing the first 10 rows; the result has more" in out


def test_missing_file_and_bad_rows(data: Path, box: Toolbox) -> None:
    assert box.call("query_table", {"sql": "SELECT * FROM 'nope.csv'"}) == (
        "ERROR: nope.csv does not exist")
    assert box.call("query_table", {"sql": "SELECT * FROM 'data/sales.parquet'",
                                    "rows": 0}).startswith("ERROR: argument 'rows' must be between 1")


def test_bad_sql_is_an_error(data: Path, box: Toolbox) -> None:
    out = box.call("query_table", {"sql": "SELECT nope FROM 'data/sales.parquet'"})
    assert out.startswith("ERROR: query failed: ") and "nope" in out


@pytest.mark.parametrize("template", [
    "SELECT * FROM 'data/sales.parquet' a CROSS JOIN `read_csv`('{leak}', has_header => false) k",
    "SELECT city FROM 'data/sales.parquet' UNION ALL SELECT * FROM READ_CSV('{leak}')",
    "SELECT (SELECT max(secret) FROM \"read_csv\"('{leak}')) FROM 'data/sales.parquet'",
])
def test_the_red_teams_table_function_bypasses_are_refused(
        data: Path, box: Toolbox, template: str) -> None:
    """Each read ~/.ssh/id_ed25519 through the old word list (and worked read-only too)."""
    leak = data.parent / "outside" / "leak.csv"
    for toolbox in (box, filesystem_toolbox(data, read_only=True)):
        out = toolbox.call("query_table", {"sql": template.format(leak=leak)})
        assert out.startswith("ERROR: query: ") and "TOP SECRET" not in out, out
