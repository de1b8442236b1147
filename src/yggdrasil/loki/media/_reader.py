"""read_file for what is not text (images, PDFs, notebooks, office documents), and
edit_notebook: files opened through ``Root``, parsed in a fenced, limited worker.

The agent opens each file (no symlink followed, regular files only), sniffs its first
bytes, and hands the open descriptor, never the path, to the media worker
(``sandbox.FencedWorker`` running ``_worker_ops``): Landlock read-only to the root, at
most ``MediaLimits.memory`` of memory and ``wall_seconds`` a call, so a decompression
bomb, a crafted PDF or a 1 GB notebook costs an ``ERROR:`` naming the limit, never the
agent. What a file is comes from its content; the name only tells the zip-based office
formats apart (and a notebook, which is JSON).
"""

from __future__ import annotations

import os
import re
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from ..errors import ToolError
from ..files import Files, Root
from ..results import (
    DocumentRead,
    ImagePart,
    ImageRead,
    NotebookCell,
    NotebookEdited,
    NotebookRead,
    PdfPage,
    PdfRead,
)
from ..sandbox import FencedWorker, WorkerFailed, WorkerLimits

OPS = "yggdrasil.loki.media._worker_ops"
_SNIFF = 2048
IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8\xff", "jpeg"), (b"GIF87a", "gif"),
               (b"GIF89a", "gif"), (b"BM", "bmp"))
OFFICE = ("docx", "pptx", "xlsx")
HTML = ("html", "htm")
_PAGES = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d*)\s*)?$")


@dataclass(frozen=True)
class MediaLimits:
    """Caps of what read_file shows of a non-text file, and of the worker that parses it.

    ``max_width`` x ``max_height``: the pixel budget an image is fitted into (Codex's
    2048x768); ``max_pixels``: larger images are refused unread (decompression bombs);
    ``pdf_pages``: pages a call; ``html_bytes``: the largest page ``rendered=True``
    reads; ``memory``/``wall_seconds``: the worker's limits.
    """

    max_width: int = 2048
    max_height: int = 768
    max_pixels: int = 40_000_000
    pdf_pages: int = 20
    page_chars: int = 20_000
    notebook_bytes: int = 64 << 20
    notebook_cells: int = 500
    cell_chars: int = 20_000
    output_chars: int = 2_000
    max_images: int = 20
    document_chars: int = 200_000
    html_bytes: int = 8 << 20  # a 16 MB page of table cells peaks at ~480 MB in lxml
    unzipped_bytes: int = 256 << 20
    sheet_rows: int = 200
    memory: int = 480 << 20
    cpu_seconds: int = 30
    wall_seconds: float = 60.0


def kind_of(head: bytes, name: str) -> str | None:
    """What a file is, from its first bytes (and, for zip and JSON formats, its name):
    ``image``, ``pdf``, ``notebook``, ``docx``/``pptx``/``xlsx``; None: read it as text."""
    if any(head.startswith(magic) for magic, _ in IMAGE_MAGIC) or (
            head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        return "image"
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    at = head.find(b"%PDF-", 0, 1024)  # PDF readers allow junk before the header
    if at == 0 or (at > 0 and (suffix == "pdf" or b"\0" in head[:at])):
        return "pdf"  # not a text file that only mentions %PDF- (a sniffer, a page about PDF)
    if suffix == "ipynb" and head.lstrip()[:1] == b"{":
        return "notebook"
    if suffix in OFFICE and head.startswith(b"PK\x03\x04"):
        return suffix
    return None


def page_span(pages: str, max_pages: int) -> tuple[int, int]:
    """``"3-7"``, ``"4"``, ``"5-"`` or ``""`` as (first, last) 1-based; last 0: up to
    ``max_pages`` from first. More than ``max_pages`` is an argument error."""
    if not pages.strip():
        return 1, 0
    found = _PAGES.match(pages)
    if not found:
        raise ToolError(f"pages {pages!r}: give one page ('4') or a range ('3-7'), at most "
                        f"{max_pages} pages a call", category="argument")
    first = int(found[1])
    last = int(found[2]) if found[2] else (0 if found.group(0).strip().endswith("-") else first)
    if first < 1 or (last and last < first):
        raise ToolError(f"pages {pages!r}: pages start at 1 and a range goes up ('3-7')",
                        category="argument")
    if last and last - first + 1 > max_pages:
        raise ToolError(f"pages {pages!r} is {last - first + 1} pages; at most {max_pages} "
                        f"a call (e.g. pages='{first}-{first + max_pages - 1}')",
                        category="argument")
    return first, last


def cell_span(pages: str, max_cells: int) -> tuple[int, int]:
    """A notebook's cells by index as read_file shows them (0-based): ``"40-59"``,
    ``"7"``, ``"500-"`` or ``""`` (from the first); last -1: as many as the cap allows."""
    if not pages.strip():
        return 0, -1
    found = _PAGES.match(pages)
    if not found or (found[2] and int(found[2]) < int(found[1])):
        raise ToolError(f"pages {pages!r}: for a notebook, the cells by index as read_file "
                        f"shows them ('7', '40-59', '500-'), at most {max_cells} a call",
                        category="argument")
    first = int(found[1])
    last = int(found[2]) if found[2] else (-1 if found.group(0).strip().endswith("-") else first)
    return first, (min(last, first + max_cells - 1) if last >= 0 else -1)


@dataclass
class MediaReader:
    """The media tools of one root; ``sandbox=False`` skips the worker's Landlock fence."""

    root: Root
    limits: MediaLimits = field(default_factory=MediaLimits)
    sandbox: bool = True
    worker: FencedWorker = field(init=False, repr=False)

    def __post_init__(self) -> None:
        lim = self.limits
        self.worker = FencedWorker(OPS, [str(self.root.path)], name="media worker",
                                   limits=WorkerLimits(lim.memory, lim.cpu_seconds,
                                                       lim.wall_seconds),
                                   sandbox=self.sandbox)

    def status(self) -> str:
        return f"Images, PDFs, notebooks and office documents are parsed in a worker {self.worker.status()}."

    # -- reading ----------------------------------------------------------------------------

    def read(self, files: Files, path: str, pages: str = "", as_images: bool = False,
             rendered: bool = False,
             ) -> ImageRead | PdfRead | NotebookRead | DocumentRead | None:
        """What read_file shows of ``path`` when it is not text; None: read it as text.
        ``rendered``: an HTML page as Markdown instead of its source."""
        real = self.root.resolve(path)
        rel = self.root.rel(real)
        suffix = real.name.rsplit(".", 1)[-1].lower() if "." in real.name else ""
        if rendered and suffix not in HTML:
            raise ToolError(f"rendered applies to HTML pages (.html, .htm); {rel} is not one: "
                            "leave rendered out", category="argument")
        with ExitStack() as stack:
            fd = stack.enter_context(self.root.open_file(real))
            st = os.fstat(fd)
            head = os.pread(fd, _SNIFF, 0)
            kind = kind_of(head, real.name)
            if kind is None and rendered:  # an HTML page (by name; its bytes are not media)
                if pages.strip() or as_images:
                    raise ToolError(f"pages and as_images apply to PDFs and notebooks; {rel} "
                                    "is an HTML page", category="argument")
                return self._html(fd, rel)
            if kind is None:
                if pages.strip() or as_images:
                    raise ToolError(f"{rel} is not a PDF, an image or a notebook: pages and "
                                    "as_images apply to those; leave them out", category="argument")
                return None
            files.views.saw(rel, st)  # edit_notebook refuses a notebook changed since
            if kind == "image":
                if pages.strip() or as_images:
                    raise ToolError(f"{rel} is an image: it is shown as a picture; pages and "
                                    "as_images apply to PDFs and notebooks", category="argument")
                return self._image(fd, rel, st.st_size)
            if kind == "pdf":
                return self._pdf(fd, rel, pages, as_images)
            if kind == "notebook":
                return self._notebook(fd, rel, pages, as_images)
            if pages.strip():
                raise ToolError(f"pages apply to PDFs (and cells to notebooks); {rel} is a "
                                f".{kind} document", category="argument")
            if as_images:
                raise ToolError(f"as_images applies to PDFs and notebooks; {rel} is a "
                                f".{kind} document", category="argument")
            return self._document(fd, rel, kind)

    def _budget(self) -> dict[str, int]:
        return {"max_width": self.limits.max_width, "max_height": self.limits.max_height}

    def _image(self, fd: int, rel: str, size: int) -> ImageRead:
        got = self._run("image", {"label": rel, **self._budget(),
                                  "max_pixels": self.limits.max_pixels}, [fd], f"reading {rel}")
        return ImageRead(path=rel, format=got["format"], width=got["width"],
                         height=got["height"], size=size, frames=got["frames"],
                         images=(_image_part(got["image"]),))

    def _pdf(self, fd: int, rel: str, pages: str, as_images: bool) -> PdfRead:
        first, last = page_span(pages, self.limits.pdf_pages)
        got = self._run("pdf", {"label": rel, "first": first, "last": last,
                                "max_pages": self.limits.pdf_pages, "as_images": as_images,
                                "page_chars": self.limits.page_chars, **self._budget()},
                        [fd], f"reading {rel}")
        return PdfRead(path=rel, pages=got["pages"], first=got["first"], last=got["last"],
                       max_pages=self.limits.pdf_pages, as_images=as_images,
                       text=tuple(PdfPage(**p) for p in got["text"]),
                       images=tuple(_image_part(i) for i in got["images"]))

    def _notebook(self, fd: int, rel: str, pages: str, as_images: bool) -> NotebookRead:
        lim = self.limits
        first, last = cell_span(pages, lim.notebook_cells)
        got = self._run("notebook", {
            "label": rel, "first": first, "last": last, "max_bytes": lim.notebook_bytes, "max_cells": lim.notebook_cells,
            "cell_chars": lim.cell_chars, "output_chars": lim.output_chars,
            "as_images": as_images, "max_images": lim.max_images,
            "max_pixels": lim.max_pixels, **self._budget()}, [fd], f"reading {rel}")
        return NotebookRead(path=rel, language=got["language"], nbformat=got["nbformat"],
                            cells=tuple(NotebookCell(**c) for c in got["cells"]),
                            total=got["total"], max_cells=lim.notebook_cells,
                            as_images=as_images,
                            images=tuple(_image_part(i) for i in got["images"]))

    def _document(self, fd: int, rel: str, kind: str) -> DocumentRead:
        lim = self.limits
        got = self._run("document", {"label": rel, "kind": kind, "max_chars": lim.document_chars,
                                     "max_unzipped": lim.unzipped_bytes,
                                     "max_rows": lim.sheet_rows}, [fd], f"reading {rel}")
        return DocumentRead(path=rel, format=kind, text=got["text"], cut=got["cut"])

    def _html(self, fd: int, rel: str) -> DocumentRead:
        got = self._run("html", {"label": rel, "max_bytes": self.limits.html_bytes,
                                 "max_chars": self.limits.document_chars}, [fd],
                        f"reading {rel}")
        return DocumentRead(path=rel, format="html", text=got["text"], cut=got["cut"])

    def picture(self, data: bytes, label: str) -> ImagePart:
        """Downloaded image bytes (web_image) fitted to the budget, parsed in the worker."""
        fd = _anonymous_file(data)
        try:
            got = self._run("image", {"label": label, **self._budget(),
                                      "max_pixels": self.limits.max_pixels}, [fd],
                            f"reading {label}")
        finally:
            os.close(fd)
        return _image_part(got["image"])

    # -- edit_notebook ---------------------------------------------------------------------

    def edit_notebook(self, files: Files, path: str, cell_id: str, new_source: str,
                      cell_type: str, mode: str) -> NotebookEdited:
        real = self.root.resolve(path)
        rel = self.root.rel(real)
        if not rel.lower().endswith(".ipynb"):
            raise ToolError(f"{rel} is not a notebook (.ipynb); edit_file edits other files",
                            category="argument")
        st = self.root.stat(real)
        if st is None:
            raise ToolError(f"{rel} does not exist; write_file creates a notebook "
                            "(its JSON), edit_notebook changes one", category="path")
        files.views.check(rel, st)
        with ExitStack() as stack:
            fd = stack.enter_context(self.root.open_file(real))
            got = self._run("edit_notebook", {
                "label": rel, "max_bytes": self.limits.notebook_bytes, "cell_id": cell_id,
                "new_source": new_source, "cell_type": cell_type, "mode": mode},
                [fd], f"editing {rel}")
        files.views.check(rel, self.root.stat(real))  # changed while the worker read it
        files.write_bytes(real, got["text"].encode("utf-8"),
                          diff=lambda: f"{mode} cell {cell_id or '(start)'} of {rel}")
        return NotebookEdited(path=rel, mode=mode, cell_id=got["cell_id"], index=got["index"],
                              cell_type=got["cell_type"], cells=got["cells"],
                              cleared=got["cleared"])

    # -- the worker ------------------------------------------------------------------------

    def _run(self, op: str, args: dict[str, Any], fds: list[int], what: str) -> dict[str, Any]:
        try:
            reply = self.worker.call(op, args, fds)
        except WorkerFailed as exc:
            raise ToolError(f"{what} stopped: {exc}") from None
        if "error" in reply:
            message = str(reply["error"])
            if message.startswith("ModuleNotFoundError"):
                message = (f"{what} needs the media extra ({message.split(':', 1)[-1].strip()}"
                           "): pip install 'yggdrasil-loki[media]'")
            raise ToolError(message)
        result = reply.get("ok")
        if not isinstance(result, dict):
            raise ToolError(f"{what} stopped: the media worker sent a malformed reply")
        return result

    def close(self) -> None:
        self.worker.close()


def _anonymous_file(data: bytes) -> int:
    """A descriptor of a file without a name holding ``data``: a memfd on Linux, an
    unlinked temporary file elsewhere."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("loki-media", os.MFD_CLOEXEC)
    else:
        import tempfile

        fd, name = tempfile.mkstemp(prefix="loki-media-")
        os.unlink(name)
    with os.fdopen(os.dup(fd), "wb") as fh:
        fh.write(data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _image_part(got: dict[str, Any]) -> ImagePart:
    import base64

    return ImagePart(mime=got["mime"], data=base64.b64decode(got["data"]),
                     width=got["width"], height=got["height"])
