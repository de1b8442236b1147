"""Bad input: each gives a TableError that names the file and the problem, never a traceback."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import openpyxl
import polars as pl
import pytest

from yggdrasil.io import TableError, preview_table, query_tables, scan_table


def error_of(path: Path, **kw: object) -> str:
    with pytest.raises(TableError) as info:
        preview_table(path, label=path.name, **kw)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith(f"{path.name}: ")
    assert "Traceback" not in message and "\n" not in message
    return message


def xlsx(path: Path) -> Path:
    wb = openpyxl.Workbook()
    wb.active.append(["a", "b"])
    wb.active.append([1, 2])
    wb.save(path)
    return path


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_bytes(b"")
    assert "is empty (0 bytes)" in error_of(tmp_path / "empty.csv")


def test_whitespace_only_file(tmp_path: Path) -> None:
    (tmp_path / "blank.csv").write_text("\n\n  \n")
    assert "holds only whitespace" in error_of(tmp_path / "blank.csv")


def test_truncated_parquet(tmp_path: Path) -> None:
    pl.DataFrame({"n": range(1000)}).write_parquet(tmp_path / "full.parquet")
    data = (tmp_path / "full.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    assert "truncated Parquet file" in error_of(tmp_path / "cut.parquet")


def test_parquet_with_a_corrupt_footer(tmp_path: Path) -> None:
    pl.DataFrame({"n": range(1000)}).write_parquet(tmp_path / "full.parquet")
    data = bytearray((tmp_path / "full.parquet").read_bytes())
    data[-40:-8] = b"\xff" * 32  # the metadata, not the magic
    (tmp_path / "bad.parquet").write_bytes(bytes(data))
    message = error_of(tmp_path / "bad.parquet")
    assert "Parquet" in message


def test_ragged_csv(tmp_path: Path) -> None:
    (tmp_path / "ragged.csv").write_text("a,b\n1,2\n3,4,5\n6,7\n")
    assert "ragged rows" in error_of(tmp_path / "ragged.csv")


def test_latin1_csv(tmp_path: Path) -> None:
    (tmp_path / "latin.csv").write_bytes("name,city\nJosé,Zürich\n".encode("latin-1"))
    message = error_of(tmp_path / "latin.csv")
    assert "is not UTF-8" in message and "iconv" in message


def test_latin1_bytes_past_the_detection_sample(tmp_path: Path) -> None:
    rows = "".join(f"{i},plain\n" for i in range(20_000))
    (tmp_path / "late.csv").write_bytes(("n,s\n" + rows).encode() + "9,Zürich\n".encode("latin-1"))
    assert "is not UTF-8" in error_of(tmp_path / "late.csv")


def test_utf16_csv(tmp_path: Path) -> None:
    (tmp_path / "u16.csv").write_bytes("a,b\n1,2\n".encode("utf-16"))
    assert "UTF-16" in error_of(tmp_path / "u16.csv")


def test_password_protected_xlsx(tmp_path: Path) -> None:
    msoffcrypto = pytest.importorskip("msoffcrypto", reason="msoffcrypto-tool is in the dev extra")
    from msoffcrypto.format.ooxml import OOXMLFile

    out = io.BytesIO()
    with open(xlsx(tmp_path / "plain.xlsx"), "rb") as fh:
        OOXMLFile(fh).encrypt("secret", out)
    (tmp_path / "locked.xlsx").write_bytes(out.getvalue())
    assert msoffcrypto is not None
    assert "password-protected" in error_of(tmp_path / "locked.xlsx")


def test_truncated_xlsx(tmp_path: Path) -> None:
    data = xlsx(tmp_path / "ok.xlsx").read_bytes()
    (tmp_path / "cut.xlsx").write_bytes(data[: len(data) // 2])
    assert "not a valid XLSX workbook" in error_of(tmp_path / "cut.xlsx")


def test_xlsx_that_is_not_a_zip(tmp_path: Path) -> None:
    (tmp_path / "fake.xlsx").write_text("this is not a workbook\n")
    message = error_of(tmp_path / "fake.xlsx", fmt="xlsx")
    assert "XLSX" in message


def test_missing_sheet_lists_the_sheets(tmp_path: Path) -> None:
    message = error_of(xlsx(tmp_path / "b.xlsx"), sheet="Nope")
    assert "has no sheet 'Nope'" in message and "['Sheet']" in message


def test_sheet_on_a_csv_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("a\n1\n")
    assert "sheet applies only to XLSX" in error_of(tmp_path / "a.csv", sheet="x")


def test_unknown_binary_format(tmp_path: Path) -> None:
    (tmp_path / "blob.dat").write_bytes(bytes(range(256)) * 4)
    message = error_of(tmp_path / "blob.dat")
    assert "unknown table format" in message and "00 01 02 03" in message


@pytest.mark.parametrize(("data", "what"), [
    (gzip.compress(b"a,b\n1,2\n", mtime=0), "gzip archive"),  # same id in every xdist worker
    (b"%PDF-1.7\n...", "PDF document"),
    (b"SQLite format 3\x00" + bytes(100), "SQLite database"),
])
def test_known_non_tables_are_named(tmp_path: Path, data: bytes, what: str) -> None:
    (tmp_path / "x.csv").write_bytes(data)
    assert what in error_of(tmp_path / "x.csv")


def test_zip_that_is_not_a_workbook(tmp_path: Path) -> None:
    import zipfile

    with zipfile.ZipFile(tmp_path / "data.zip", "w") as z:
        z.writestr("a.csv", "a\n1\n")
    assert "zip archive, not an XLSX workbook" in error_of(tmp_path / "data.zip")


def test_truncated_arrow(tmp_path: Path) -> None:
    pl.DataFrame({"n": range(1000)}).write_ipc(tmp_path / "a.arrow")
    data = (tmp_path / "a.arrow").read_bytes()
    (tmp_path / "cut.arrow").write_bytes(data[: len(data) // 2])
    assert "Arrow" in error_of(tmp_path / "cut.arrow")


def test_json_array_of_scalars(tmp_path: Path) -> None:
    (tmp_path / "nums.json").write_text(json.dumps([1, 2, 3]))
    assert "nums.json: " in error_of(tmp_path / "nums.json")


def test_broken_json(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text('[{"a": 1}, {"a": ')
    assert "JSON" in error_of(tmp_path / "b.json")


def test_missing_file(tmp_path: Path) -> None:
    assert "does not exist" in error_of(tmp_path / "nope.csv")


def test_scan_table_fails_early_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "cut.parquet").write_bytes(b"PAR1" + bytes(100))
    with pytest.raises(TableError, match=r"^cut\.parquet: is a truncated Parquet file"):
        scan_table(tmp_path / "cut.parquet", label="cut.parquet")


def test_a_ragged_row_found_by_a_query_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("a,b\n1,2,3\n")
    with pytest.raises(TableError, match=r"^r\.csv: has ragged rows"):
        query_tables("SELECT * FROM 'r.csv'", {"r.csv": (tmp_path / "r.csv", "r.csv")})


def test_empty_xlsx_sheet(tmp_path: Path) -> None:
    openpyxl.Workbook().save(tmp_path / "blank.xlsx")
    assert "sheet 'Sheet' is empty" in error_of(tmp_path / "blank.xlsx")


def test_arrow_stream_is_named(tmp_path: Path) -> None:
    import pyarrow as pa

    with pa.ipc.new_stream(str(tmp_path / "s.arrows"), pa.schema([("a", pa.int64())])) as w:
        w.write_table(pa.table({"a": [1, 2]}))
    assert "is an Arrow IPC stream" in error_of(tmp_path / "s.arrows")
