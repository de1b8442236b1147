"""Real media files made on the spot for the tests and the bench: PDFs with text (pypdfium2
writes them, with the standard Helvetica font), notebooks (nbformat), office documents.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as raw


def _text_object(doc: pdfium.PdfDocument, line: str, x: float, y: float, size: float) -> object:
    obj = raw.FPDFPageObj_NewTextObj(doc.raw, b"Helvetica", size)
    encoded = (line + "\0").encode("utf-16-le")
    buffer = ctypes.create_string_buffer(encoded, len(encoded))
    raw.FPDFText_SetText(obj, ctypes.cast(buffer, ctypes.POINTER(raw.FPDF_WCHAR)))
    raw.FPDFPageObj_Transform(obj, 1, 0, 0, 1, x, y)
    return obj


def write_pdf(path: Path, pages: Sequence[Sequence[str]], *, size: float = 11,
              drawing: bool = False) -> None:
    """A letter-size PDF, one list of lines a page (an empty list: a page without text,
    like a scan); ``drawing`` adds a filled box to each page."""
    doc = pdfium.PdfDocument.new()
    try:
        for lines in pages:
            page = doc.new_page(612, 792)
            for i, line in enumerate(lines):
                obj = _text_object(doc, line, 72, 720 - i * size * 1.5, size)
                raw.FPDFPage_InsertObject(page.raw, obj)
            if drawing:
                box = raw.FPDFPageObj_CreateNewRect(72, 72, 300, 200)
                raw.FPDFPageObj_SetFillColor(box, 40, 90, 200, 255)
                raw.FPDFPath_SetDrawMode(box, raw.FPDF_FILLMODE_ALTERNATE, 0)
                raw.FPDFPage_InsertObject(page.raw, box)
            raw.FPDFPage_GenerateContent(page.raw)
            page.close()
        doc.save(str(path))
    finally:
        doc.close()


def write_blank_pdf(path: Path, pages: int) -> None:
    """A PDF of ``pages`` empty pages, made quickly (100,000 pages in about 2 s): the pages
    are copied in doubling batches."""
    doc = pdfium.PdfDocument.new()
    try:
        doc.new_page(612, 792).close()
        while len(doc) < pages:
            doc.import_pages(doc, list(range(min(len(doc), pages - len(doc)))))
        doc.save(str(path))
    finally:
        doc.close()


def write_encrypted_pdf(path: Path) -> None:
    """A PDF whose standard security handler wants a user password (its /U entry matches
    no password, the empty one included), written by hand."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
               b"<< /Filter /Standard /V 1 /R 2 /Length 40 /P -4 /O <" + b"11" * 32
               + b"> /U <" + b"22" * 32 + b"> >>"]
    body, offsets = b"%PDF-1.4\n", []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(body))
        body += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(body)
    body += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    body += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    body += (b"trailer\n<< /Size %d /Root 1 0 R /Encrypt 4 0 R /ID [<%s> <%s>] >>\n"
             % (len(objects) + 1, b"ab" * 16, b"ab" * 16))
    body += b"startxref\n%d\n%%%%EOF\n" % xref
    path.write_bytes(body)


def write_notebook(path: Path, *, minor: int = 5, png: bytes = b"") -> list[str]:
    """A notebook: a markdown cell, a code cell with a stream output and a result, a code
    cell with an error, and (``png``) a cell whose output is that picture; its cell ids."""
    import base64

    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    cells = [new_markdown_cell("# Title"),
             new_code_cell("print('hi')\n1 + 1", execution_count=1, outputs=[
                 new_output("stream", name="stdout", text="hi\n"),
                 new_output("execute_result", data={"text/plain": "2"}, execution_count=1)]),
             new_code_cell("1/0", execution_count=2, outputs=[new_output(
                 "error", ename="ZeroDivisionError", evalue="division by zero",
                 traceback=["\x1b[31mZeroDivisionError\x1b[0m: division by zero"])])]
    if png:
        cells.append(new_code_cell("plot()", execution_count=3, outputs=[new_output(
            "display_data", data={"image/png": base64.b64encode(png).decode(),
                                  "text/plain": "<Figure>"})]))
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "custom": {"kept": True}})
    nb.nbformat_minor = minor
    if minor < 5:
        for cell in nb.cells:
            cell.pop("id", None)
    path.write_text(nbformat.writes(nb) + "\n")
    return [str(c.get("id", f"#{i}")) for i, c in enumerate(nb.cells)]
