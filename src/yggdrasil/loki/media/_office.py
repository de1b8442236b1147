"""Office documents as Markdown, in the media worker: .docx (python-docx), .pptx
(python-pptx), .xlsx (openpyxl, read-only and values only).

One library made for each format, each already the reference reader of its format in
Python and pure Python over the zip's XML; markitdown wraps these same three (and pulls
in many more for formats we do not read), so we call them directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Any

MAX_COLUMNS = 30
_CELL_CHARS = 200


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ").strip()[:_CELL_CHARS]


def _table(rows: Iterable[list[str]]) -> list[str]:
    lines: list[str] = []
    for i, row in enumerate(rows):
        lines.append("| " + " | ".join(row) + " |")
        if i == 0:
            lines.append("|" + "---|" * len(row))
    return lines


def docx_markdown(fh: IO[bytes]) -> str:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    doc = docx.Document(fh)
    lines: list[str] = []
    for block in doc.iter_inner_content():
        if isinstance(block, Paragraph):
            lines.append(_paragraph(block))
        elif isinstance(block, Table):
            rows = [[_cell(c.text) for c in row.cells[:MAX_COLUMNS]] for row in block.rows]
            lines += ["", *_table(rows), ""]
    return "\n".join(lines).strip() + "\n"


def _paragraph(p: Any) -> str:
    text = p.text.strip()
    style = (p.style.name if p.style is not None else "") or ""
    if not text:
        return ""
    if style == "Title":
        return f"# {text}"
    if style.startswith("Heading"):
        level = style.removeprefix("Heading").strip()
        return f"{'#' * (int(level) + 1 if level.isdigit() else 2)} {text}"
    if "List" in style:
        return f"- {text}"
    return text + "\n"


def pptx_markdown(fh: IO[bytes]) -> str:
    from pptx import Presentation

    deck = Presentation(fh)
    lines: list[str] = []
    for number, slide in enumerate(deck.slides, 1):
        lines.append(f"## Slide {number}")
        for shape in slide.shapes:
            lines += list(_shape_lines(shape))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                lines += ["", f"Notes: {notes.text.strip()}"]
        lines.append("")
    return "\n".join(lines)


def _shape_lines(shape: Any) -> Iterator[str]:
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = [[_cell(c.text) for c in list(row.cells)[:MAX_COLUMNS]]
                for row in shape.table.rows]
        yield from ["", *_table(rows), ""]
    elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        for paragraph in shape.text_frame.paragraphs:
            text = "".join(run.text for run in paragraph.runs).strip()
            if text:
                yield f"{'  ' * paragraph.level}- {text}" if paragraph.level else text
    elif hasattr(shape, "shapes"):  # a group
        for inner in shape.shapes:
            yield from _shape_lines(inner)


def xlsx_markdown(fh: IO[bytes], max_rows: int) -> str:
    from openpyxl import load_workbook

    book = load_workbook(fh, read_only=True, data_only=True)
    lines: list[str] = []
    try:
        for sheet in book.worksheets:
            lines.append(f"## Sheet {sheet.title}")
            rows: list[list[str]] = []
            for row in sheet.iter_rows(values_only=True):  # stops past the cap: no full scan
                rows.append([_cell(v) for v in row[:MAX_COLUMNS]])
                if len(rows) > max_rows + 1:
                    break
            more = len(rows) > max_rows + 1
            rows = rows[:max_rows + 1]  # the header row and max_rows rows
            width = max((len(r) for r in rows), default=0)
            lines += _table([r + [""] * (width - len(r)) for r in rows]) if width else ["(empty)"]
            if more:
                said = sheet.max_row  # the sheet's own dimension, when it states one
                total = f" of about {said - 1}" if isinstance(said, int) and said > 0 else ""
                lines.append(f"[the first {max_rows}{total} rows shown: read_table or "
                             "query_table read them all]")
            lines.append("")
    finally:
        book.close()
    return "\n".join(lines)
