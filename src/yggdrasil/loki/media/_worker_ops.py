"""What the media worker runs, inside its fence: images, PDFs, notebooks, office documents.

Loaded by name in the worker process (``sandbox/_worker_main.py``), never in the agent.
Files arrive as descriptors the agent opened through ``Root``. Every parser is held to
caps the agent passes (pixels, pages, characters, unzipped bytes) on top of the worker's
own memory and time limits; pictures travel back as base64 PNG or JPEG, re-encoded here,
so nothing of the file's own bytes reaches the model's API unparsed.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import re
import warnings
import zipfile
from typing import Any

from ._office import docx_markdown, pptx_markdown, xlsx_markdown


class MediaError(ValueError):
    """The file cannot be read as asked; the message says why and what is allowed."""


EXPECTED_ERRORS = (MediaError,)


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


def _fd_path(fd: int) -> str:
    proc = f"/proc/self/fd/{fd}"
    return proc if os.path.exists(proc) else f"/dev/fd/{fd}"


def _read_all(fd: int, limit: int, what: str) -> bytes:
    size = os.fstat(fd).st_size
    if size > limit:
        raise MediaError(f"{what} is {_size(size)}; at most {_size(limit)} are read")
    with os.fdopen(os.dup(fd), "rb") as fh:
        fh.seek(0)
        return fh.read(limit + 1)[:limit]


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


# -- images --------------------------------------------------------------------------------


def _picture(img: Any, max_width: int, max_height: int) -> dict[str, Any]:
    """``img`` fitted into the budget and encoded: JPEG for photos, PNG otherwise."""
    from PIL import Image

    if img.width > max_width or img.height > max_height:
        img.thumbnail((max_width, max_height), Image.Resampling.LANCZOS, reducing_gap=3.0)
    alpha = img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info)
    if img.mode not in ("RGB", "RGBA", "L", "LA"):
        img = img.convert("RGBA" if alpha else "RGB")
    out = io.BytesIO()
    if img.mode in ("RGB", "L") and img.format == "JPEG":
        img.save(out, "JPEG", quality=85)
        mime = "image/jpeg"
    else:
        img.save(out, "PNG", optimize=False)
        mime = "image/png"
    return {"mime": mime, "data": base64.b64encode(out.getvalue()).decode("ascii"),
            "width": img.width, "height": img.height}


def _open_image(source: Any, max_pixels: int, what: str) -> Any:
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(source)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        found = re.search(r"(\d+) pixels", str(exc))
        many = f"{int(found[1]):,} pixels" if found else "too many pixels"
        raise MediaError(f"{what} has {many}; images up to {max_pixels:,} pixels are read "
                         "(a decompression bomb, or an image too large to show)") from None
    except UnidentifiedImageError:
        raise MediaError(f"{what} is not an image Pillow can read (damaged, or another "
                         "format under an image's name)") from None


def image(fds: list[int], label: str, max_width: int, max_height: int,
          max_pixels: int) -> dict[str, Any]:
    """The image's format, size and frames, and its first frame fitted into the budget."""
    from PIL import Image

    (fd,) = fds
    with os.fdopen(os.dup(fd), "rb") as fh:
        fh.seek(0)
        img = _open_image(fh, max_pixels, label)
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
                "image": _picture(img, max_width, max_height)}


# -- PDF -----------------------------------------------------------------------------------


def _pdf(fd: int, label: str) -> Any:
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(_fd_path(fd))
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
        return _picture(img, max_width, max_height)
    finally:
        bitmap.close()


# -- notebooks -----------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _text_of(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _load_notebook(fd: int, label: str, max_bytes: int, *, node: bool = False) -> Any:
    """The notebook as nbformat's dict (v4; an older one converted), read as plain JSON:
    nbformat.reads would validate it (slow on a big notebook) and quietly give new ids to
    cells whose ids repeat, where the file's own ids must stay as they are."""
    import json

    import nbformat

    data = _read_all(fd, max_bytes, label)
    try:
        raw = json.loads(data)
    except UnicodeDecodeError:
        raise MediaError(f"{label} is not a notebook: it is not UTF-8 text") from None
    except ValueError as exc:
        raise MediaError(f"{label} is not a notebook: it is not JSON ({exc})"[:400]) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("cells", raw.get("worksheets")),
                                                    list):
        raise MediaError(f"{label} is not a notebook: its JSON has no list of cells")
    major = raw.get("nbformat")
    if major != 4:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return nbformat.reads(data.decode("utf-8"), as_version=4)  # v3 and older
        except Exception as exc:
            raise MediaError(f"{label} is a notebook of nbformat {major!r}, which cannot be "
                             f"read ({type(exc).__name__}: {exc})"[:400]) from None
    return nbformat.from_dict(raw) if node else raw  # NotebookNodes copy every dict


def _outputs(cell: Any, output_chars: int, as_images: bool, budget: list[int],
             max_width: int, max_height: int, max_pixels: int) -> dict[str, Any]:
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    pictures = 0
    for out in cell.get("outputs", []) or []:
        out = _dict(out)
        kind = out.get("output_type", "")
        if kind == "stream":
            texts.append(_text_of(out.get("text")))
        elif kind == "error":
            trace = "\n".join(_text_of(t) for t in out.get("traceback", []) or [])
            texts.append(_ANSI.sub("", trace) or f"{out.get('ename')}: {out.get('evalue')}")
        elif kind in ("execute_result", "display_data"):
            data = _dict(out.get("data"))
            picture = next((m for m in ("image/png", "image/jpeg", "image/gif")
                            if m in data), None)
            if picture:
                pictures += 1
                if as_images and budget[0] > 0:
                    budget[0] -= 1
                    try:
                        images.append(_output_image(data[picture], max_width, max_height,
                                                    max_pixels))
                    except MediaError as exc:
                        texts.append(f"[{picture} output not shown: {exc}]")
            if "text/plain" in data and not picture:
                texts.append(_text_of(data["text/plain"]))
            elif "text/markdown" in data:
                texts.append(_text_of(data["text/markdown"]))
    whole = "\n".join(t.rstrip("\n") for t in texts)
    joined, _ = _cut(whole, output_chars)
    return {"outputs": [joined] if joined else [], "cut": len(whole) - len(joined),
            "images": pictures, "pictures": images}


def _cut(text: str, limit: int) -> tuple[str, int]:
    return (text, len(text)) if len(text) <= limit else (text[:limit], limit)


def _output_image(data: Any, max_width: int, max_height: int, max_pixels: int) -> dict[str, Any]:
    try:
        raw = base64.b64decode(_text_of(data), validate=False)
    except ValueError:
        raise MediaError("an image output of the notebook is not base64") from None
    img = _open_image(io.BytesIO(raw), max_pixels, "an image output")
    fmt = img.format
    img.load()
    img.format = fmt
    return _picture(img, max_width, max_height)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def notebook(fds: list[int], label: str, first: int, last: int, max_bytes: int,
             max_cells: int, cell_chars: int, output_chars: int, as_images: bool,
             max_images: int, max_width: int, max_height: int, max_pixels: int,
             ) -> dict[str, Any]:
    """Cells ``first``-``last`` (0-based; ``last`` -1: up to ``max_cells``) with ids, types,
    sources and outputs (text cut per cell; picture outputs counted, or shown when
    ``as_images``)."""
    (fd,) = fds
    nb = _load_notebook(fd, label, max_bytes)
    meta = _dict(nb.get("metadata"))
    kernel = _dict(meta.get("kernelspec"))
    language = str(kernel.get("language") or kernel.get("name") or
                   _dict(meta.get("language_info")).get("name") or "")
    budget = [max_images]
    cells, images = [], []
    end = min(len(nb["cells"]), first + max_cells, last + 1 if last >= 0 else len(nb["cells"]))
    for index in range(first, end):
        cell = _dict(nb["cells"][index])
        source, _ = _cut(_text_of(cell.get("source")), cell_chars)
        shown: dict[str, Any] = {"index": index, "id": str(cell.get("id") or f"#{index}"),
                                 "type": str(cell.get("cell_type", "?")), "source": source}
        if shown["type"] == "code":
            got = _outputs(cell, output_chars, as_images, budget, max_width, max_height,
                           max_pixels)
            images += got.pop("pictures")
            count = cell.get("execution_count")
            shown.update(got, execution_count=count if isinstance(count, int) else None)
        cells.append(shown)
    return {"language": language,
            "nbformat": f"{nb.get('nbformat')}.{nb.get('nbformat_minor', 0)}",
            "cells": cells, "total": len(nb["cells"]), "images": images}


def edit_notebook(fds: list[int], label: str, max_bytes: int, cell_id: str, new_source: str,
                  cell_type: str, mode: str) -> dict[str, Any]:
    """The notebook's new text after one cell edit, validated by nbformat; the agent writes
    it (this worker writes nothing)."""
    import nbformat

    (fd,) = fds
    nb = _load_notebook(fd, label, max_bytes, node=True)
    _unique_ids(nb, label)  # nbformat.validate would quietly rename a repeated id
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        raise MediaError(f"{label} is not a valid notebook ({str(exc).splitlines()[0][:300]}): "
                         "edit_notebook changes valid notebooks; write_file can rewrite it"
                         ) from None
    original = nbformat.writes(nb)
    index = _cell_index(nb, cell_id, label, allow_start=mode == "insert")
    cleared = False
    if mode == "delete":
        cell = nb.cells.pop(index)
    elif mode == "insert":
        kind = cell_type or "code"
        cell = _new_cell(nbformat, kind, new_source, nb)
        index += 1
        nb.cells.insert(index, cell)
    else:
        cell = nb.cells[index]
        cleared = _replace(cell, new_source, cell_type or cell.cell_type)
    try:
        _unique_ids(nb, label)
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        raise MediaError(f"the edit would leave {label} an invalid notebook: "
                         f"{str(exc).splitlines()[0][:300]}; nothing was written") from None
    text = nbformat.writes(nb) + "\n"
    return {"text": text, "index": index, "cell_id": str(cell.get("id") or f"#{index}"),
            "cell_type": str(cell.get("cell_type")), "cells": len(nb.cells),
            "cleared": cleared, "same": text.rstrip("\n") == original.rstrip("\n")}


def _unique_ids(nb: Any, label: str) -> None:
    seen: set[str] = set()
    for cell in nb.cells:
        found = cell.get("id") if isinstance(cell, dict) else None
        if isinstance(found, str) and found in seen:
            raise MediaError(f"{label} is not a valid notebook (two cells have the id "
                             f"{found!r}): edit_notebook changes valid notebooks; write_file "
                             "can rewrite it")
        seen.add(str(found))


def _cell_index(nb: Any, cell_id: str, label: str, *, allow_start: bool) -> int:
    wanted = cell_id.strip()
    if not wanted and allow_start:
        return -1  # insert at the start
    for index, cell in enumerate(nb.cells):
        if str(cell.get("id") or "") == wanted or wanted == f"#{index}":
            return index
    known = ", ".join(str(c.get("id") or f"#{i}") for i, c in enumerate(nb.cells[:30]))
    raise MediaError(f"{label} has no cell with id {wanted!r}; its cells: {known or 'none'}"
                     + (" (cell_id '' inserts at the start)" if allow_start else ""))


def _new_cell(nbformat: Any, kind: str, source: str, nb: Any) -> Any:
    made = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
            "raw": nbformat.v4.new_raw_cell}[kind](source)
    if (nb.nbformat, nb.nbformat_minor) < (4, 5):
        made.pop("id", None)  # ids came with nbformat 4.5: an older notebook stays valid
    return made


def _replace(cell: Any, source: str, kind: str) -> bool:
    """Set the cell's source and type; a code cell's outputs and count are cleared."""
    cell.source = source
    if kind != cell.cell_type:
        if cell.cell_type == "code":
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
        cell.cell_type = kind
        if kind == "code":
            cell.outputs, cell.execution_count = [], None
            return False
        cell.pop("attachments", None) if kind != "markdown" else None
        return False
    if kind == "code":
        had = bool(cell.get("outputs")) or cell.get("execution_count") is not None
        cell.outputs, cell.execution_count = [], None
        return had
    return False


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
        raise MediaError(f"{label} unpacks to {_size(total)} in {len(members)} parts; at most "
                         f"{_size(max_unzipped)} are read (a zip bomb, or a document too large)")


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
    kept, _ = _cut(text, max_chars)
    return {"text": kept, "cut": max(0, len(text) - max_chars)}
