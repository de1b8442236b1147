"""Office documents read as Markdown: .docx, .pptx, .xlsx, made here with python-docx,
python-pptx and openpyxl; a zip bomb and a zip that is no document are clear errors."""

from __future__ import annotations

import zipfile
from pathlib import Path

import docx
import openpyxl
from pptx import Presentation
from pptx.util import Inches

from yggdrasil.loki.results import DocumentRead
from yggdrasil.loki.tools import Toolbox


def test_a_docx_reads_as_markdown(root: Path, box: Toolbox) -> None:
    doc = docx.Document()
    doc.add_heading("Design", level=1)
    doc.add_paragraph("The agent reads documents.")
    doc.add_paragraph("first point", style="List Bullet")
    table = doc.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "name", (0, 1): "size", (1, 0): "a|b", (1, 1): "3"}.items():
        table.cell(r, c).text = text
    doc.save(str(root / "spec.docx"))
    out = box.call("read_file", {"path": "spec.docx"})
    assert out == ("spec.docx: DOCX document as Markdown\n## Design\nThe agent reads documents."
                   "\n\n- first point\n\n| name | size |\n|---|---|\n| a\\|b | 3 |")
    assert isinstance(box.invoke("read_file", {"path": "spec.docx"}).data, DocumentRead)


def test_a_pptx_reads_as_markdown_per_slide(root: Path, box: Toolbox) -> None:
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Roadmap"
    slide.placeholders[1].text_frame.text = "ship images"
    slide.notes_slide.notes_text_frame.text = "say it slowly"
    shape = deck.slides.add_slide(deck.slide_layouts[6]).shapes.add_table(
        2, 2, Inches(1), Inches(1), Inches(4), Inches(1))
    shape.table.cell(0, 0).text, shape.table.cell(1, 1).text = "q", "42"
    deck.save(str(root / "deck.pptx"))
    out = box.call("read_file", {"path": "deck.pptx"})
    assert "## Slide 1\nRoadmap\nship images\n\nNotes: say it slowly" in out
    assert "## Slide 2\n\n| q |  |\n|---|---|\n|  | 42 |" in out


def test_an_xlsx_reads_as_markdown_tables_beside_read_table(root: Path, box: Toolbox) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "sales"
    sheet.append(["city", "qty"])
    for i in range(300):
        sheet.append([f"c{i}", i])
    book.create_sheet("empty")
    book.save(root / "sales.xlsx")
    out = box.call("read_file", {"path": "sales.xlsx"})
    assert out.startswith("sales.xlsx: XLSX document as Markdown\n## Sheet sales\n| city | qty |")
    assert "| c199 | 199 |" in out and "| c200 |" not in out
    assert "[the first 200 of about 300 rows shown: read_table or query_table read them all]" \
        in out
    assert "## Sheet empty\n(empty)" in out


def test_a_zip_bomb_docx_is_refused_before_it_is_unpacked(root: Path, box: Toolbox) -> None:
    with zipfile.ZipFile(root / "bomb.docx", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        with zf.open("word/document.xml", "w", force_zip64=True) as member:
            block = b"\0" * (1 << 20)
            for _ in range(300):
                member.write(block)
    assert (root / "bomb.docx").stat().st_size < 2 << 20
    result = box.invoke("read_file", {"path": "bomb.docx"})
    assert result.is_error
    assert "bomb.docx unpacks to 300.0 MB in 2 parts; at most 256.0 MB are read" in result.text


def test_a_document_that_is_not_one_is_a_clear_error(root: Path, box: Toolbox) -> None:
    with zipfile.ZipFile(root / "fake.docx", "w") as zf:
        zf.writestr("hello.txt", "not a document")
    result = box.invoke("read_file", {"path": "fake.docx"})
    assert result.is_error and "fake.docx is not a .docx document that can be read" in result.text
    (root / "plain.pptx").write_text("just text\n")  # read as the text it is
    assert box.call("read_file", {"path": "plain.pptx"}) == "1\tjust text"


def test_an_xml_part_too_large_to_parse_is_refused(root: Path, box: Toolbox) -> None:
    with zipfile.ZipFile(root / "wide.xlsx", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("xl/worksheets/sheet1.xml", b"<sheetData>" + b" " * (40 << 20))
    result = box.invoke("read_file", {"path": "wide.xlsx"})
    assert result.is_error and ("wide.xlsx: its part xl/worksheets/sheet1.xml is 40.0 MB of "
                                "XML; parts up to 32.0 MB are read") in result.text
