"""read_table through the toolbox: the observation, confinement, and no traceback ever."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

import yggdrasil.io
from yggdrasil.loki.tools import Toolbox


def test_read_table_observation_shape(root: Path, box: Toolbox) -> None:
    (root / "data").mkdir()
    pl.DataFrame({"city": ["Oslo", "Rome"], "price": [1.5, 2.0]}).write_csv(root / "data/s.csv")
    out = box.call("read_table", {"path": "data/s.csv"})
    lines = out.splitlines()
    assert lines[0] == "data/s.csv  shape=(2, 2)  columns=['city', 'price']"
    assert lines[1].startswith("format: CSV, delimiter ','")
    assert lines[2] == "rows: 2 (counted by reading the whole file)"
    assert lines[3] == "types: city: String, price: Float64"
    assert lines[4:] == ["all 2 rows:", "city | price", "-----+------",
                         "Oslo |   1.5", "Rome |   2.0"]


def test_read_table_absolute_path_inside_root(root: Path, box: Toolbox) -> None:
    pl.DataFrame({"a": [1]}).write_parquet(root / "a.parquet")
    out = box.call("read_table", {"path": str(root / "a.parquet")})
    assert out.startswith("a.parquet  shape=(1, 1)")


def test_read_table_sheet_argument(root: Path, box: Toolbox) -> None:
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active.append(["x"])
    wb.create_sheet("Two").append(["y", "z"])
    wb.save(root / "b.xlsx")
    assert "columns=['y', 'z']" in box.call("read_table", {"path": "b.xlsx", "sheet": "Two"})


def test_wide_and_long_cells_are_clipped_and_output_bounded(root: Path, box: Toolbox) -> None:
    wide = pl.DataFrame({f"column_{i}": ["v" * 500] * 1000 for i in range(80)})
    wide.write_parquet(root / "wide.parquet")
    out = box.call("read_table", {"path": "wide.parquet", "rows": 1000})
    assert len(out) < 30_000
    assert "v" * 41 not in out  # a 500-char cell is clipped to 40
    assert "[... 50 more columns not shown (the first 30 are)" in out
    assert "more rows not shown: the preview is capped" in out
    assert "column_79" in out.splitlines()[0]  # the header still names every column


def test_cells_with_newlines_stay_on_one_line(root: Path, box: Toolbox) -> None:
    pl.DataFrame({"t": ["a\nb", "", None]}).write_parquet(root / "t.parquet")
    out = box.call("read_table", {"path": "t.parquet"})
    assert out.splitlines()[-3:] == ["a\\nb", '""', "null"]


@pytest.mark.parametrize("args", [
    {"path": "../outside/secret.txt"},
    {"path": "/etc/passwd"},
    {"path": "../root-secrets/key.txt"},
])
def test_read_table_refuses_paths_outside_the_root(box: Toolbox, args: dict[str, str]) -> None:
    out = box.call("read_table", args)
    assert out.startswith("ERROR: path ") and "escapes the agent root" in out


def test_read_table_refuses_a_symlink_out_of_the_root(root: Path, box: Toolbox) -> None:
    (root.parent / "outside" / "t.csv").write_text("secret\nTOP SECRET\n")
    (root / "link.csv").symlink_to(root.parent / "outside" / "t.csv")
    out = box.call("read_table", {"path": "link.csv"})
    assert out.startswith("ERROR:") and "escapes the agent root" in out
    assert "TOP SECRET" not in out


def test_read_table_refuses_a_fifo(root: Path, box: Toolbox) -> None:
    os.mkfifo(root / "pipe.csv")
    out = box.call("read_table", {"path": "pipe.csv"})
    assert out == "ERROR: pipe.csv is a FIFO; only regular files can be read"


def test_read_table_on_a_folder_and_a_missing_file(root: Path, box: Toolbox) -> None:
    (root / "d").mkdir()
    assert box.call("read_table", {"path": "d"}).startswith("ERROR: d ")
    assert box.call("read_table", {"path": "nope.csv"}) == "ERROR: nope.csv does not exist"


def test_a_symlink_swapped_in_after_the_check_is_not_followed(
        root: Path, box: Toolbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between Root's open and polars' read, data.csv becomes a link to a secret file."""
    (root.parent / "outside" / "s.csv").write_text("secret\nTOP SECRET\n")
    (root / "data.csv").write_text("n\n1\n")
    real_preview = yggdrasil.io.preview_table

    def swap_then_preview(path: str, *args: object, **kw: object) -> object:
        (root / "data.csv").unlink()
        (root / "data.csv").symlink_to(root.parent / "outside" / "s.csv")
        return real_preview(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(yggdrasil.io, "preview_table", swap_then_preview)
    out = box.call("read_table", {"path": "data.csv"})
    assert out.startswith("data.csv  shape=(1, 1)  columns=['n']")
    assert "TOP SECRET" not in out


def test_bad_rows_argument(root: Path, box: Toolbox) -> None:
    (root / "a.csv").write_text("a\n1\n")
    assert box.call("read_table", {"path": "a.csv", "rows": 5000}).startswith(
        "ERROR: argument 'rows' must be between 0 and 1000, got 5000 "
        "(how many rows to preview, 0-1000 (default 10))")


def test_bad_files_are_errors_not_tracebacks(root: Path, box: Toolbox) -> None:
    (root / "cut.parquet").write_bytes(b"PAR1" + bytes(50))
    (root / "r.csv").write_text("a,b\n1,2,3\n")
    assert box.call("read_table", {"path": "cut.parquet"}).startswith(
        "ERROR: cut.parquet: is a truncated Parquet file")
    assert box.call("read_table", {"path": "r.csv"}).startswith("ERROR: r.csv: has ragged rows")


def test_many_long_column_names_stay_bounded(root: Path, box: Toolbox) -> None:
    names = [f"{i:04d}_" + "n" * 2000 for i in range(500)]
    (root / "w.csv").write_text(",".join(names) + "\n" + ",".join("1" * 500) + "\n")
    out = box.call("read_table", {"path": "w.csv"})
    assert len(out) < 60_000
    assert "... 300 more]" in out.splitlines()[0]
    assert "n" * 100 not in out
