"""yggdrasil.io on real files written by real writers: every format, detection, counting."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from yggdrasil.io import FORMATS, TableError, _readers, preview_table

SALES = pl.DataFrame({
    "city": ["Oslo", "Rome", "Lima", "Oslo", "Rome"],
    "price": [10.5, 20.0, 7.25, 11.0, 19.5],
    "qty": [1, 2, 3, 4, 5],
})


def write(fmt: str, path: Path, df: pl.DataFrame = SALES) -> Path:
    """``df`` written to ``path`` as ``fmt`` by a real writer."""
    if fmt == "csv":
        df.write_csv(path)
    elif fmt == "tsv":
        df.write_csv(path, separator="\t")
    elif fmt == "parquet":
        pq.write_table(df.to_arrow(), path)
    elif fmt == "arrow":
        feather.write_feather(df.to_arrow(), str(path))
    elif fmt == "json":
        path.write_text(json.dumps(df.to_dicts()))
    elif fmt == "ndjson":
        df.write_ndjson(path)
    elif fmt == "xlsx":
        wb = openpyxl.Workbook()
        ws = wb.active
        ws.append(df.columns)
        for row in df.rows():
            ws.append(list(row))
        wb.save(path)
    return path


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_previews_shape_types_and_rows(tmp_path: Path, fmt: str) -> None:
    path = write(fmt, tmp_path / f"sales.{fmt}")
    preview = preview_table(path, 3, label=f"sales.{fmt}")
    out = preview.render()
    assert preview.fmt == fmt
    assert preview.rows == 5
    assert preview.columns == ["city", "price", "qty"]
    assert out.splitlines()[0] == f"sales.{fmt}  shape=(5, 3)  columns=['city', 'price', 'qty']"
    assert "price: Float64" in out
    assert "first 3 rows:" in out
    assert "Oslo" in out and "Lima" in out and "Rome" in out
    assert "19.5" not in out  # row 5 is past the preview


@pytest.mark.parametrize("fmt", ["parquet", "arrow", "xlsx", "json", "ndjson", "tsv"])
@pytest.mark.parametrize("name", ["data", "data.csv", "data.bin"])
def test_format_found_by_content_when_the_extension_is_missing_or_wrong(
        tmp_path: Path, fmt: str, name: str) -> None:
    path = write(fmt, tmp_path / f"real.{fmt}").rename(tmp_path / name)
    preview = preview_table(path)
    assert preview.fmt == fmt
    assert preview.rows == 5
    if name.endswith(".csv") and fmt != "tsv":
        assert "named .csv, but the content is" in preview.render()


def test_csv_named_parquet_is_read_as_csv_and_says_so(tmp_path: Path) -> None:
    path = write("csv", tmp_path / "sales.parquet")
    out = preview_table(path, label="sales.parquet").render()
    assert "format: CSV" in out
    assert "named .parquet, but the content is CSV" in out


@pytest.mark.parametrize("sep", [";", "|", "\t", ","])
def test_delimiter_is_detected(tmp_path: Path, sep: str) -> None:
    path = tmp_path / "prices.csv"
    SALES.write_csv(path, separator=sep)
    preview = preview_table(path)
    assert preview.columns == ["city", "price", "qty"]
    assert f"delimiter {sep!r}" in preview.render()


def test_quoted_delimiters_do_not_fool_detection(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    pl.DataFrame({"name": ["a;b", "c;d;e"], "n": [1, 2]}).write_csv(path)  # quoted ';'
    assert preview_table(path).columns == ["name", "n"]


def test_fmt_overrides_detection(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("a\tb\n1\t2\n")
    assert preview_table(path, fmt="tsv").columns == ["a", "b"]
    with pytest.raises(TableError, match="unknown format 'xml'"):
        preview_table(path, fmt="xml")


def test_parquet_count_comes_from_the_footer(tmp_path: Path) -> None:
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"n": list(range(100_000))}), path, row_group_size=10_000)
    preview = preview_table(path, 2)
    assert preview.rows == 100_000
    assert "from the Parquet footer" in preview.render()


def test_arrow_count_comes_from_the_footer(tmp_path: Path) -> None:
    path = tmp_path / "t.feather"
    feather.write_feather(pa.table({"n": list(range(5000))}), str(path), chunksize=1000)
    preview = preview_table(path, 1)
    assert preview.rows == 5000
    assert "from the Arrow IPC footer" in preview.render()


def test_big_csv_is_not_counted_and_says_how_to_count(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.csv"
    pl.DataFrame({"n": range(50_000), "s": ["x" * 10] * 50_000}).write_csv(path)
    monkeypatch.setattr(_readers, "COUNT_LIMIT", 1000)
    monkeypatch.setattr(_readers, "PREFIX_CHUNK", 4096)  # make the prefix smaller than the file
    monkeypatch.setattr(_readers, "SCHEMA_ROWS", 100)
    preview = preview_table(path, 3, label="big.csv")
    out = preview.render()
    assert preview.rows is None
    assert out.splitlines()[0].startswith("big.csv  shape=(?, 2)")
    assert "not counted" in out and "SELECT count(*) FROM 'big.csv'" in out
    estimate = int(out.split("about ")[1].split(" estimated")[0].replace(",", ""))
    assert 45_000 < estimate < 55_000
    assert preview.head["n"].to_list() == [0, 1, 2]


def test_csv_under_the_limit_is_counted_by_a_full_scan(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mid.csv"
    pl.DataFrame({"n": range(30_000)}).write_csv(path)
    monkeypatch.setattr(_readers, "PREFIX_CHUNK", 4096)
    monkeypatch.setattr(_readers, "SCHEMA_ROWS", 100)
    preview = preview_table(path, 2)
    assert preview.rows == 30_000
    assert "counted by reading the whole file" in preview.render()


def test_big_json_array_is_read_by_the_bounded_reader(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.json"
    records = [{"id": i, "name": f"n{i}", "score": i / 2} for i in range(5000)]
    path.write_text(json.dumps(records, indent=1))
    monkeypatch.setattr(_readers, "JSON_WHOLE_LIMIT", 1000)
    preview = preview_table(path, 4)
    assert preview.rows is None
    assert preview.head.to_dicts() == records[:4]
    assert "not counted: a JSON array must be parsed whole" in preview.render()


def test_small_json_array_read_by_the_bounded_reader_is_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "small.json"
    path.write_text(json.dumps([{"a": 1}, {"a": 2}, {"a": 3}]))
    monkeypatch.setattr(_readers, "JSON_WHOLE_LIMIT", 10)
    preview = preview_table(path, 10)
    assert preview.rows == 3
    assert preview.head["a"].to_list() == [1, 2, 3]


def test_xlsx_sheet_by_name_and_index(tmp_path: Path) -> None:
    wb = openpyxl.Workbook()
    wb.active.title = "Summary"
    wb.active.append(["total"])
    wb.active.append([42])
    detail = wb.create_sheet("Detail")
    detail.append(["item", "cost"])
    for i in range(7):
        detail.append([f"item{i}", i * 1.5])
    wb.save(tmp_path / "book.xlsx")
    first = preview_table(tmp_path / "book.xlsx")
    by_name = preview_table(tmp_path / "book.xlsx", 2, sheet="Detail")
    by_index = preview_table(tmp_path / "book.xlsx", 2, sheet="1")
    assert first.columns == ["total"] and first.rows == 1
    assert by_name.columns == ["item", "cost"] and by_name.rows == 7
    assert by_index.rows == 7
    assert "sheet 'Detail' of ['Summary', 'Detail']" in by_name.render()


def test_rows_zero_shows_the_schema_only(tmp_path: Path) -> None:
    out = preview_table(write("parquet", tmp_path / "s.parquet"), 0).render()
    assert "shape=(5, 3)" in out and "(no rows to show)" in out


def test_header_only_csv_has_zero_rows(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("a,b,c\n")
    preview = preview_table(path)
    assert preview.rows == 0 and preview.columns == ["a", "b", "c"]


def test_utf8_bom_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffname,n\nJosé,1\n".encode())
    preview = preview_table(path)
    assert preview.columns == ["name", "n"]
    assert "José" in preview.render()


def test_bounded_json_reader_survives_tiny_chunks(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from yggdrasil.io import _json

    records = [{"n": 12345 * i, "s": "ü,]}\"x", "f": [1.5, None]} for i in range(50)]
    path = tmp_path / "r.json"
    path.write_text(" \n[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n")
    monkeypatch.setattr(_json, "CHUNK", 7)  # numbers, strings and UTF-8 cut across reads
    assert _json.read_json_head(path, 10, "r.json") == (records[:10], False)
    assert _json.read_json_head(path, 50, "r.json") == (records, True)
    assert _json.read_json_head(path, 99, "r.json") == (records, True)
