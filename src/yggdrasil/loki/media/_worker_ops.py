"""What the media worker runs, inside its fence: images, PDFs, notebooks, office documents.

Loaded by name in the worker process (``sandbox/_worker_main.py``), never in the agent.
Files arrive as descriptors the agent opened through ``Root``. Every parser is held to
caps the agent passes (pixels, pages, characters, unzipped bytes) on top of the worker's
own memory and time limits; pictures travel back as base64 PNG or JPEG, re-encoded here,
so nothing of the file's own bytes reaches the model's API unparsed.
"""

from __future__ import annotations

import contextlib
import os
import warnings
import zipfile
from typing import Any

from ._decode import MediaError, cut_text, fd_path, fitted_picture, open_image, read_all, size_text
from ._html import html_markdown
from ._notebooks import edit_notebook, notebook
from ._office import docx_markdown, pptx_markdown, xlsx_markdown

EXPECTED_ERRORS = (MediaError,)
_MAX_XML = 32 << 20  # bytes of one XML part of an office document
__all__ = ["EXPECTED_ERRORS", "document", "edit_notebook", "html", "image", "notebook", "pdf",
           "warm"]


def warm() -> None:
    """Import the parsers once, at start, so that the first call does not pay for it.
    mimetypes (openpyxl asks it) gets no files: the fence keeps /etc/mime.types out."""
    import mimetypes

    mimetypes.knownfiles = []
    mimetypes.init()
    # a library's warnings go to the worker's stderr, a file capped at 1 MB (nbformat warns
    # once per cell); what matters is said in the answer
    warnings.simplefilter("ignore")
    for name in ("PIL.Image", "PIL.PngImagePlugin", "PIL.JpegImagePlugin", "pypdfium2"):
        # nbformat (~0.3 s) and the office readers load on their first file
        with contextlib.suppress(ImportError):
            __import__(name)


# -- images --------------------------------------------------------------------------------


def image(fds: list[int], label: str, max_width: int, max_height: int,
          max_pixels: int) -> dict[str, Any]:
    """The image's format, size and frames, and its first frame fitted into the budget."""
    from PIL import Image

    (fd,) = fds
    with os.fdopen(os.dup(fd), "rb") as fh:
        fh.seek(0)
        img = open_image(fh, max_pixels, label)
        fmt, width, height = img.format or "?", img.width, img.height
        frames = int(getattr(img, "n_frames", 1) or 1)
        try:
            if fmt == "JPEG":
                img.draft("RGB", (max_width, max_height))  # decode at 1/2..1/8 scale
            img.load()
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
            raise MediaError(f"{label} is a damaged {fmt} image: {exc}") from None
        img.format = fmt
        return {"format": fmt, "width": width, "height": height, "frames": frames,
                "image": fitted_picture(img, max_width, max_height)}

# -- PDF -----------------------------------------------------------------------------------


def _pdf(fd: int, label: str) -> Any:
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(fd_path(fd))
    except pdfium.PdfiumError as exc:
        why = str(exc)
        if "password" in why.lower():
            raise MediaError(f"{label} is an encrypted PDF (it needs a password); it cannot "
                             "be read") from None
        raise MediaError(f"{label} is not a PDF that can be read ({why})") from None


def pdf(fds: list[int], label: str, first: int, last: int, max_pages: int, as_images: bool,
        max_width: int, max_height: int, page_chars: int) -> dict[str, Any]:
    """Pages ``first``-``last`` (1-based; ``last`` 0: ``max_pages`` from ``first``) as
    text, or rendered to images fitted into the budget."""
    (fd,) = fds
    doc = _pdf(fd, label)
    try:
        total = len(doc)
        if total == 0:
            raise MediaError(f"{label} is a PDF without pages")
        if first > total:
            raise MediaError(f"{label} has {total} page{'s' * (total != 1)}; pages start at "
                             f"1 and end at {total}")
        last = min(total, last or first + max_pages - 1, first + max_pages - 1)
        pages, images = [], []
        for number in range(first, last + 1):
            page = doc[number - 1]
            try:
                if as_images:
                    images.append(_render(page, max_width, max_height))
                pages.append(_page_text(page, number, page_chars))
            finally:
                page.close()
        return {"pages": total, "first": first, "last": last, "text": pages, "images": images}
    finally:
        doc.close()


def _page_text(page: Any, number: int, page_chars: int) -> dict[str, Any]:
    textpage = page.get_textpage()
    try:
        count = textpage.count_chars()
        text = textpage.get_text_range(0, min(count, page_chars)) if count > 0 else ""
    finally:
        textpage.close()
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return {"number": number, "text": text, "cut": max(0, count - page_chars)}


def _render(page: Any, max_width: int, max_height: int) -> dict[str, Any]:
    width, height = page.get_size()  # points
    if width <= 0 or height <= 0:
        raise MediaError("a page of the PDF has no size")
    scale = min(max_width / width, max_height / height, 4.0)
    bitmap = page.render(scale=scale, may_draw_forms=True)
    try:
        img = bitmap.to_pil()
        img.format = "PNG"
        return fitted_picture(img, max_width, max_height)
    finally:
        bitmap.close()

# -- office documents ----------------------------------------------------------------------


def _check_zip(fd: int, label: str, kind: str, max_unzipped: int) -> None:
    """Refuse a zip bomb before a parser opens it: Python's zipfile stops each member at
    its declared size, so the declared sizes bound what any parser can inflate."""
    with os.fdopen(os.dup(fd), "rb") as fh:
        fh.seek(0)
        try:
            with zipfile.ZipFile(fh) as zf:
                members = zf.infolist()
        except (zipfile.BadZipFile, OSError, ValueError):
            raise MediaError(f"{label} is not a .{kind} file (not a zip archive; damaged, "
                             "encrypted, or another format under its name)") from None
    total = sum(m.file_size for m in members)
    if len(members) > 10_000 or total > max_unzipped:
        raise MediaError(f"{label} unpacks to {size_text(total)} in {len(members)} parts; at "
                         f"most {size_text(max_unzipped)} are read (a zip bomb, or a document "
                         "too large)")
    xml = max((m for m in members if m.filename.endswith((".xml", ".rels"))),
              key=lambda m: m.file_size, default=None)
    if xml is not None and xml.file_size > _MAX_XML:  # parsed into a tree ~10x its size
        raise MediaError(f"{label}: its part {xml.filename} is {size_text(xml.file_size)} of "
                         f"XML; parts up to {size_text(_MAX_XML)} are read")


def document(fds: list[int], label: str, kind: str, max_chars: int, max_unzipped: int,
             max_rows: int) -> dict[str, Any]:
    """A .docx, .pptx or .xlsx as Markdown, cut at ``max_chars``."""
    (fd,) = fds
    _check_zip(fd, label, kind, max_unzipped)
    with os.fdopen(os.dup(fd), "rb") as fh:
        fh.seek(0)
        try:
            text = {"docx": docx_markdown, "pptx": pptx_markdown,
                    "xlsx": lambda f: xlsx_markdown(f, max_rows)}[kind](fh)
        except (KeyError, ValueError, zipfile.BadZipFile, OSError) as exc:
            raise MediaError(f"{label} is not a .{kind} document that can be read "
                             f"({type(exc).__name__}: {exc})"[:400]) from None
    kept, _ = cut_text(text, max_chars)
    return {"text": kept, "cut": max(0, len(text) - max_chars)}


# -- HTML ----------------------------------------------------------------------------------


def html(fds: list[int], label: str, max_bytes: int, max_chars: int) -> dict[str, Any]:
    """An HTML page as Markdown (scripts and styles left out), cut at ``max_chars``."""
    (fd,) = fds
    data = read_all(fd, max_bytes, label)
    text, left_out = html_markdown(data, max_chars)
    kept, _ = cut_text(text, max_chars)
    return {"text": kept, "cut": left_out + max(0, len(text) - max_chars)}
