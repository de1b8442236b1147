"""Crafted hostile table files, built byte by byte (the attacks of issue #11)."""

from __future__ import annotations

import zipfile
from pathlib import Path

_CONTENT_TYPES = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>
<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>
<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>
</Types>"""
_RELS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/>
</Relationships>"""
_WORKBOOK = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">
<sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>"""
_WORKBOOK_RELS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>
<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/>
</Relationships>"""
_SHEET = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">
{dimension}<sheetData>{rows}</sheetData></worksheet>"""


def workbook(path: Path, rows: str, *, dimension: str = "", shared: str = "") -> Path:
    """A minimal XLSX whose only sheet holds ``rows`` (``<row>`` XML) and whose shared
    strings part is ``shared`` (the ``<si>`` elements)."""
    dim = f'<dimension ref="{dimension}"/>' if dimension else ""
    sst = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<sst xmlns="http://'
           f'schemas.openxmlformats.org/spreadsheetml/2006/main">{shared}</sst>')
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("[Content_Types].xml", _CONTENT_TYPES)
        zf.writestr("_rels/.rels", _RELS)
        zf.writestr("xl/workbook.xml", _WORKBOOK)
        zf.writestr("xl/_rels/workbook.xml.rels", _WORKBOOK_RELS)
        zf.writestr("xl/worksheets/sheet1.xml", _SHEET.format(dimension=dim, rows=rows))
        zf.writestr("xl/sharedStrings.xml", sst)
    return path


def far_corners_xlsx(path: Path) -> Path:
    """Cells at A1 and XFD1048576: calamine sizes the sheet from them (17 G cells)."""
    rows = ('<row r="1"><c r="A1" t="inlineStr"><is><t>a</t></is></c></row>'
            '<row r="1048576"><c r="XFD1048576"><v>1</v></c></row>')
    return workbook(path, rows)


def shared_strings_bomb(path: Path, count: int = 30_000_000) -> Path:
    """A few cells over a shared-strings table of ``count`` empty strings (tiny zipped)."""
    rows = '<row r="1"><c r="A1" t="s"><v>0</v></c></row><row r="2"><c r="A2" t="s"><v>1</v></c></row>'
    return workbook(path, rows, shared="<si><t/></si>" * count)


def small_xlsx(path: Path) -> Path:
    rows = ('<row r="1"><c r="A1" t="inlineStr"><is><t>city</t></is></c>'
            '<c r="B1" t="inlineStr"><is><t>qty</t></is></c></row>'
            '<row r="2"><c r="A2" t="inlineStr"><is><t>Oslo</t></is></c><c r="B2"><v>3</v></c></row>')
    return workbook(path, rows, dimension="A1:B2")


def deep_parquet(path: Path, depth: int = 500) -> Path:
    """A column nested ``depth`` lists deep (polars overflows its stack reading it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kind = pa.int64()
    for _ in range(depth):
        kind = pa.list_(kind)
    pq.write_table(pa.table({"deep": pa.array([None, None], type=kind)}), path)
    return path
