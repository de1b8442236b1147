"""What read_file answers for files that are not text: an image, a PDF's pages, a
notebook's cells, an office document as Markdown, and what edit_notebook did.

Pictures ride in ``images`` (``ImagePart``: bytes, MIME type, pixel size) and are shown
as image parts after the text; they are left out of the JSON (``structured()``, events,
transcripts, MCP's structuredContent), where only their sizes are said.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from yggdrasil.io import human_size

from ._base import ImagePart, Result, TextPart
from ._diagnostics import diagnosis_lines
from ._files import _Checked
from ._render import renders, shows

__all__ = [
    "DocumentRead",
    "ImageRead",
    "NotebookCell",
    "NotebookEdited",
    "NotebookRead",
    "PdfPage",
    "PdfRead",
    "WebImage",
]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ImageRead(Result):
    """An image file: its format and pixel size, and the picture as shown (downscaled to
    the toolbox's pixel budget). ``images`` is empty when nothing could be shown."""

    kind: Literal["image"] = "image"
    path: str
    format: str  # PNG, JPEG, GIF, WEBP, BMP
    width: int
    height: int
    size: int  # bytes of the file
    frames: int = 1
    images: tuple[ImagePart, ...] = Field(default=(), exclude=True)


@renders(ImageRead)
def _image_text(r: ImageRead) -> str:
    frames = f", {r.frames} frames (the first shown)" if r.frames > 1 else ""
    line = (f"{r.path}: {r.format} image, {r.width}x{r.height} px, "
            f"{human_size(r.size)}{frames}")
    if r.images:
        shown = r.images[0]
        if (shown.width, shown.height) != (r.width, r.height):
            line += f"; shown downscaled to {shown.width}x{shown.height} px"
    return line


class PdfPage(_Data):
    """One page's text (``text`` empty: the page has no text layer, e.g. a scan)."""

    number: int  # 1-based
    text: str
    cut: int = 0  # characters of the page's text left out


class PdfRead(Result):
    """Pages ``first``-``last`` of a PDF of ``pages`` pages: their text, or their renders
    (``images``, one a page) when asked for."""

    kind: Literal["pdf"] = "pdf"
    path: str
    pages: int
    first: int
    last: int
    max_pages: int
    text: tuple[PdfPage, ...] = ()
    images: tuple[ImagePart, ...] = Field(default=(), exclude=True)
    as_images: bool = False


@renders(PdfRead)
def _pdf_text(r: PdfRead) -> str:
    return "\n".join(_pdf_lines(r))


def _pdf_lines(r: PdfRead) -> list[str]:
    span = f"page {r.first}" if r.first == r.last else f"pages {r.first}-{r.last}"  # shown
    lines = [f"{r.path}: PDF, {r.pages} page{'s' * (r.pages != 1)}; {span}"
             + (" as images" if r.as_images else "")]
    scans = []
    for page in r.text:
        if r.as_images:
            continue
        if not page.text.strip():
            scans.append(page.number)
            lines.append(f"--- page {page.number}: no text layer (a scan or a drawing) ---")
            continue
        lines.append(f"--- page {page.number} ---")
        lines.append(page.text.rstrip("\n"))
        if page.cut:
            lines.append(f"[page {page.number} cut: {page.cut} more characters]")
    if r.as_images:
        lines += [f"--- page {r.first + i}: image {img.width}x{img.height} px ---"
                  for i, img in enumerate(r.images)]
    if scans:
        lines.append(f"[pages without text: {', '.join(map(str, scans))}; read_file(path="
                     f"{r.path!r}, pages={_span(scans[0], scans[-1])!r}, as_images=true) "
                     "shows them as images]")
    if r.last < r.pages:
        more = r.pages - r.last
        lines.append(f"[{more} more page{'s' * (more != 1)}: read_file(path={r.path!r}, "
                     f"pages={_span(r.last + 1, min(r.pages, r.last + r.max_pages))!r}); at "
                     f"most {r.max_pages} pages a call]")
    return lines


def _span(first: int, last: int) -> str:
    return f"{first}-{last}" if last > first else str(first)


class NotebookCell(_Data):
    """One cell: its id (``#<index>`` when the notebook has no ids), type and source; a
    code cell's execution count and outputs (text, cut; ``images``: how many picture
    outputs it has)."""

    index: int
    id: str
    type: str  # code, markdown, raw
    source: str
    execution_count: int | None = None
    outputs: tuple[str, ...] = ()
    images: int = 0
    cut: int = 0  # characters of the outputs left out


class NotebookRead(Result):
    """Cells of a Jupyter notebook of ``total`` cells, in order (all of them, or the
    ``pages`` range asked for, at most ``max_cells``)."""

    kind: Literal["notebook"] = "notebook"
    path: str
    language: str
    nbformat: str
    total: int
    max_cells: int
    cells: tuple[NotebookCell, ...] = ()
    images: tuple[ImagePart, ...] = Field(default=(), exclude=True)
    as_images: bool = False


@renders(NotebookRead)
def _notebook_text(r: NotebookRead) -> str:
    first = r.cells[0].index if r.cells else 0
    last = r.cells[-1].index if r.cells else -1
    span = "" if (first, last) == (0, r.total - 1) else (
        f"; cells {_span(first, last)}" if r.cells else
        f"; none in the range asked (its cells are numbered 0-{r.total - 1})")
    lines = [f"{r.path}: Jupyter notebook (nbformat {r.nbformat}, {r.language or 'no kernel'}),"
             f" {r.total} cell{'s' * (r.total != 1)}{span}"]
    for cell in r.cells:
        count = f" [{cell.execution_count}]" if cell.execution_count is not None else ""
        lines.append(f"--- cell {cell.index} id={cell.id} {cell.type}{count} ---")
        lines.append(cell.source.rstrip("\n") if cell.source.strip() else "(empty)")
        for output in cell.outputs:
            lines.append("--- output ---")
            lines.append(output.rstrip("\n"))
        if cell.cut:
            lines.append(f"[outputs cut: {cell.cut} more characters]")
        if cell.images and not r.as_images:
            lines.append(f"[{cell.images} image output{'s' * (cell.images != 1)}: "
                         f"read_file(path={r.path!r}, as_images=true) shows {'them' if cell.images > 1 else 'it'}]")
    if r.cells and last < r.total - 1:
        more = r.total - 1 - last
        lines.append(f"[{more} more cell{'s' * (more != 1)}: read_file(path={r.path!r}, "
                     f"pages={_span(last + 1, min(r.total - 1, last + r.max_cells))!r}); at "
                     f"most {r.max_cells} cells a call]")
    return "\n".join(lines)


class DocumentRead(Result):
    """An office document (``docx``, ``pptx``, ``xlsx``), or an HTML page read with
    ``rendered=True`` (``html``), as Markdown text."""

    kind: Literal["document"] = "document"
    path: str
    format: str
    text: str
    cut: int = 0  # characters left out


@renders(DocumentRead)
def _document_text(r: DocumentRead) -> str:
    lines = [f"{r.path}: {r.format.upper()} document as Markdown", r.text.rstrip("\n")
             or "(no text)"]
    if r.cut:
        lines.append(f"[cut: {r.cut} more characters of text]")
    return "\n".join(lines)


class NotebookEdited(_Checked):
    """What edit_notebook did: ``mode`` (replace, insert, delete) on the cell ``cell_id``
    at ``index``; ``cleared``: a replaced code cell's outputs were cleared; the
    diagnostics the edit introduced, as for edit_file."""

    kind: Literal["notebook_edited"] = "notebook_edited"
    path: str
    mode: str
    cell_id: str
    index: int
    cell_type: str
    cells: int
    cleared: bool = False


@renders(NotebookEdited)
def _edited_text(r: NotebookEdited) -> str:
    verb = {"replace": "replaced", "insert": "inserted", "delete": "deleted"}[r.mode]
    cleared = "; its outputs and execution count cleared" if r.cleared else ""
    head = (f"edited {r.path}: {verb} {r.cell_type} cell {r.index} id={r.cell_id}{cleared} "
            f"({r.cells} cell{'s' * (r.cells != 1)} now)")
    return "\n".join([head, *r.warnings, *diagnosis_lines(r.diagnostics, r.diagnosis)])


def _with_images(text: str, images: tuple[ImagePart, ...]) -> list[TextPart | ImagePart]:
    return [TextPart(text=text), *images]


@shows(ImageRead)
def _image_parts(r: ImageRead) -> list[TextPart | ImagePart]:
    return _with_images(_image_text(r), r.images)


@shows(PdfRead)
def _pdf_parts(r: PdfRead) -> list[TextPart | ImagePart]:
    return _with_images(_pdf_text(r), r.images)


@shows(NotebookRead)
def _notebook_parts(r: NotebookRead) -> list[TextPart | ImagePart]:
    return _with_images(_notebook_text(r), r.images)


class WebImage(Result):
    """web_image's answer: ``summary`` (the download's address, type and size and the
    image's pixel facts, as the web tools say them), what ``save`` wrote, and the picture
    (fitted to the pixel budget) when the toolbox could show it; ``unshown``: why not."""

    kind: Literal["web_image"] = "web_image"
    url: str
    summary: str
    saved: str = ""
    unshown: str = ""
    images: tuple[ImagePart, ...] = Field(default=(), exclude=True)


@renders(WebImage)
def _web_image_text(r: WebImage) -> str:
    lines = r.summary.split("\n")
    if r.images:
        shown = r.images[0]
        lines[0] += f"  shown={shown.width}x{shown.height}"
    if r.unshown:
        lines.append(f"(not shown: {r.unshown})")
    return "\n".join([*lines, *([r.saved] if r.saved else [])])


@shows(WebImage)
def _web_image_parts(r: WebImage) -> list[TextPart | ImagePart]:
    return _with_images(_web_image_text(r), r.images)
