"""The web_* tools: read a page, preview a remote table, inspect an image.

Every request goes through ``_net``: http(s) only, each connection made to an address
the :class:`AddressPolicy` checked (after DNS, on every redirect hop), bodies streamed
under a size cap, time bounded. A ``save`` writes under the root through :class:`Root`,
asks Files' ``confirm`` gate before overwriting, and is recorded like write_file.
httpx, trafilatura and pillow (the ``web`` extra) are imported on first use.
"""

from __future__ import annotations

import io
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..errors import PathError, ToolError
from ..files import Files, Root
from ..results import (
    ImagePart,
    TableRead,
    WebImage,
    WebLink,
    WebPage,
    WebTable,
    cut_page_text,
    human_size,
    render_text,
)
from ._page import MAX_LINKS, looks_like_text, maybe_text, read_page
from ._policy import AddressPolicy, Limits, Resolver, resolve_host

if TYPE_CHECKING:
    from ._net import Download

__all__ = ["AddressPolicy", "Limits", "Web"]

ACCEPT_PAGE = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5"
ACCEPT_TABLE = ("text/csv,application/vnd.apache.parquet,application/json,application/x-ndjson,"
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet,*/*;q=0.5")
ACCEPT_IMAGE = "image/*,*/*;q=0.5"
PREVIEW_ROWS = 10

_TABLE_SUFFIXES = (".csv", ".tsv", ".tab", ".parquet", ".pq", ".json", ".jsonl", ".ndjson",
                   ".xlsx", ".xlsm", ".xls", ".arrow", ".feather", ".ipc")
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip")
_TABLE_TYPES = {
    "text/csv": ".csv", "application/csv": ".csv", "text/tab-separated-values": ".tsv",
    "application/json": ".json", "application/x-ndjson": ".ndjson",
    "application/ndjson": ".ndjson", "application/jsonl": ".jsonl",
    "application/vnd.apache.parquet": ".parquet", "application/x-parquet": ".parquet",
    "application/parquet": ".parquet", "application/vnd.apache.arrow.file": ".arrow",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/vnd.ms-excel": ".xls",
}
_FORMATS_HINT = "fmt='csv', 'tsv', 'parquet', 'json', 'ndjson' or 'xlsx'"


@dataclass
class Web:
    """The web tools bound to one root; ``files`` supplies the confirm gate and change hooks."""

    root: Root
    files: Files
    read_only: bool = False
    policy: AddressPolicy = field(default_factory=AddressPolicy)
    limits: Limits = field(default_factory=Limits)
    resolve: Resolver = resolve_host
    # (bytes, label, suffix, fmt, rows) -> the preview: the toolbox passes its fenced table
    # worker (``TableReader.preview_bytes``); None parses in this process (library use).
    preview_table: Callable[[bytes, str, str, str, int], TableRead] | None = None
    # (bytes, label) -> the picture fitted to the pixel budget: the toolbox passes its fenced
    # media worker (``MediaReader.picture``); None: web_image shows only the facts
    show_image: Callable[[bytes, str], ImagePart] | None = None

    # -- tools ----------------------------------------------------------------------------

    def web_fetch(self, url: str) -> WebPage:
        got = self._get(url, ACCEPT_PAGE, self.limits.max_page_bytes, keep_body=maybe_text)
        if not maybe_text(got.content_type) or not looks_like_text(got.body):
            return WebPage(**_fetched(got), content="binary")
        page = read_page(got.body, got.content_type, got.charset, got.final_url)
        text, chars = cut_page_text(page.text)
        links = [WebLink(text=label, url=target) for label, target in page.links[:MAX_LINKS]]
        return WebPage(**_fetched(got), content=page.kind, title=page.title, text=text,
                       text_chars=chars, links=links,
                       more_links=max(0, len(page.links) - MAX_LINKS))

    def web_table(self, url: str, fmt: str = "", save: str = "") -> WebTable:
        from yggdrasil.io import TableError

        target = self._save_target(save)
        suffix = _fmt_suffix(fmt)
        got = self._get(url, ACCEPT_TABLE, self.limits.max_file_bytes)
        if not fmt and got.content_type in ("text/html", "application/xhtml+xml"):
            raise ToolError(f"{got.final_url} is an HTML page, not a table; web_fetch reads "
                            f"pages (if it really is a table, pass {_FORMATS_HINT})")
        suffix = suffix or _table_suffix(got)
        try:
            preview = self._preview(got.body, suffix, url, fmt.lower().lstrip("."))
        except (TableError, ToolError) as exc:
            raise ToolError(f"{exc} (nothing was saved)" if target else str(exc)) from exc
        saved = self.files.write_bytes(target, got.body) if target is not None else None
        return WebTable(**_fetched(got), table=preview, saved=saved)

    def web_image(self, url: str, save: str = "") -> WebImage:
        target = self._save_target(save)
        got = self._get(url, ACCEPT_IMAGE, self.limits.max_file_bytes)
        facts = _image_facts(got)
        images: tuple[ImagePart, ...] = ()
        unshown = ""
        if self.show_image is not None and facts.startswith("pixels="):
            try:
                images = (self.show_image(got.body, got.final_url),)
            except ToolError as exc:
                unshown = str(exc)
        saved = self._save(target, got.body) if target is not None else ""
        return WebImage(url=got.final_url, summary=f"{_header(got)}  {facts}", saved=saved,
                        unshown=unshown, images=images)

    # -- parts ------------------------------------------------------------------------------

    def _preview(self, body: bytes, suffix: str, label: str, fmt: str) -> TableRead:
        if self.preview_table is not None:
            return self.preview_table(body, label, suffix, fmt, PREVIEW_ROWS)
        return _preview(body, suffix, label, fmt)

    def _get(self, url: str, accept: str, max_bytes: int,
             keep_body: Callable[[str], bool] = lambda media_type: True) -> Download:
        from ._net import download

        return download(url, policy=self.policy, limits=self.limits, max_bytes=max_bytes,
                        accept=accept, keep_body=keep_body, resolve=self.resolve)

    def _save_target(self, save: str) -> Path | None:
        """The resolved save path, checked before anything is downloaded."""
        if not save:
            return None
        if self.read_only:
            raise ToolError("this toolbox is read-only: save is not available; leave save empty")
        real = self.root.resolve(save)
        st = self.root.stat(real)
        if real == self.root.path or (st is not None and not stat.S_ISREG(st.st_mode)):
            raise PathError(f"{self.root.rel(real)} is not a file; give save a file path")
        return real

    def _save(self, real: Path, data: bytes) -> str:
        # the same confirm rule and journal as write_file, said as write_file says it
        return render_text(self.files.write_bytes(real, data))


def _header(got: Download) -> str:
    if not got.size_exact:
        size = f"more than {human_size(got.size)}"
    else:
        size = human_size(got.size) + (f" ({got.size} bytes)" if got.size >= 1024 else "")
    line = f"{got.final_url}  type={got.content_type or 'unknown'}  size={size}"
    return f"{line}\n(redirected from {got.url})" if got.redirects else line


def _fetched(got: Download) -> dict[str, Any]:
    """The fields of a result that say where it came from."""
    return {"url": got.url, "final_url": got.final_url, "redirects": list(got.redirects),
            "status": got.status, "content_type": got.content_type, "size": got.size,
            "size_exact": got.size_exact}


def _fmt_suffix(fmt: str) -> str:
    name = fmt.lower().lstrip(".")
    if fmt and not (name.isascii() and name.isalnum() and len(name) <= 10):
        raise ToolError(f"fmt {fmt!r} is not a format name; use {_FORMATS_HINT}")
    return f".{name}" if name else ""


def _table_suffix(got: Download) -> str:
    """The table format of a download: the URL's file extension, else its content type."""
    suffix = _url_suffix(got.final_url) or _url_suffix(got.url) or _TABLE_TYPES.get(
        got.content_type, "")
    if not suffix:
        raise ToolError(f"cannot tell the table format of {got.final_url} (type "
                        f"{got.content_type or 'unknown'}); pass {_FORMATS_HINT}")
    return suffix


def _url_suffix(address: str) -> str:
    """'.csv' for .../data.csv, '.csv.gz' for .../data.csv.gz; '' for other extensions."""
    suffixes = [s.lower() for s in PurePosixPath(urlsplit(address).path).suffixes]
    tail = suffixes.pop() if len(suffixes) > 1 and suffixes[-1] in _COMPRESSED else ""
    return suffixes[-1] + tail if suffixes and suffixes[-1] in _TABLE_SUFFIXES else ""


def _preview(body: bytes, suffix: str, label: str, fmt: str) -> TableRead:
    """Preview the bytes through yggdrasil.io from a private temp file named *<suffix>."""
    from yggdrasil.io import preview_table

    with tempfile.TemporaryDirectory(prefix="loki-web-") as folder:
        path = Path(folder) / f"download{suffix}"
        path.write_bytes(body)
        return TableRead.model_validate(
            preview_table(path, PREVIEW_ROWS, label=label, fmt=fmt or None).summary())


def _image_facts(got: Download) -> str:
    """'pixels=WxH  format=PNG  mode=RGBA', read from the header without decoding pixels."""
    from PIL import Image, UnidentifiedImageError

    if got.content_type == "image/svg+xml":
        return "format=SVG (a vector image: no pixel size)"
    try:
        with Image.open(io.BytesIO(got.body)) as image:
            width, height = image.size
            facts = f"pixels={width}x{height}  format={image.format}  mode={image.mode}"
            frames = getattr(image, "n_frames", 1)
    except Image.DecompressionBombError as exc:
        return f"pixels: refused by Pillow's decompression-bomb guard ({exc})"
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ToolError(f"{got.final_url} is not an image Pillow can read (type "
                        f"{got.content_type or 'unknown'}, {human_size(got.size)}); web_fetch "
                        "reads pages, web_table reads data tables") from exc
    return f"{facts}  frames={frames}" if frames > 1 else facts
