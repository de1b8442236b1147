"""What web_fetch and web_table answer: the page or table fetched, where it came from, and
what was cut.

The text is DESIGN.md's: a header line ``<final url>  type=<media type>  size=<size>``
(with ``(redirected from <url>)``), then web_fetch's title, main text and links, or
web_table's read_table preview and what a ``save`` wrote.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._base import Result
from ._bounds import MAX_READ_CHARS, human_size, more_note
from ._files import FileWritten
from ._render import render_text, renders
from ._tables import TableRead

__all__ = ["WebLink", "WebPage", "WebTable"]

BINARY_NOTE = ("binary content, not shown; web_image reads images, web_table reads data "
               "tables (CSV, Parquet, JSON, XLSX)")


class WebLink(BaseModel):
    """A link of a page: its text (cut at 80 characters) and its absolute http(s) URL."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    url: str


class _Fetched(Result):
    """Where an answer came from: ``url`` as asked, ``final_url`` after the ``redirects``
    (the hops before it, in order), the HTTP ``status`` (a 2xx: any other is an error),
    the media ``content_type`` ('' when the server sent none) and ``size``: the response's
    bytes, or with ``size_exact`` false a floor (a body not read past the cap)."""

    url: str
    final_url: str
    redirects: list[str] = Field(default_factory=list)
    status: int = 200
    content_type: str = ""
    size: int
    size_exact: bool = True


class WebPage(_Fetched):
    """``web_fetch``: a page's main text. ``content``: how the body was read (``html``: the
    main text found by trafilatura, as markdown, with its ``title`` and ``links``; ``json``:
    pretty-printed; ``text`` as sent; ``binary``: not text, not shown). ``text``: what is
    shown (stripped, the first MAX_READ_CHARS characters) of ``text_chars``; ``links``: the
    first 100 links, ``more_links`` the rest."""

    kind: Literal["web_page"] = "web_page"
    content: Literal["html", "json", "text", "binary"]
    title: str = ""
    text: str = ""
    text_chars: int = 0
    links: list[WebLink] = Field(default_factory=list)
    more_links: int = 0


class WebTable(_Fetched):
    """``web_table``: a remote table's preview (``table``, as read_table's, its ``path`` the
    URL asked for) and, with ``save``, the file written (``saved``)."""

    kind: Literal["web_table"] = "web_table"
    table: TableRead
    saved: FileWritten | None = None


def fetched_header(result: _Fetched) -> str:
    """``<final url>  type=<type>  size=<size>``, and where a redirect came from."""
    if not result.size_exact:
        size = f"more than {human_size(result.size)}"
    else:
        size = human_size(result.size) + (f" ({result.size} bytes)" if result.size >= 1024
                                          else "")
    line = f"{result.final_url}  type={result.content_type or 'unknown'}  size={size}"
    return f"{line}\n(redirected from {result.url})" if result.redirects else line


@renders(WebPage)
def _page_text(result: WebPage) -> str:
    if result.content == "binary":
        return f"{fetched_header(result)}\n{BINARY_NOTE}"
    lines = [fetched_header(result)]
    if result.title:
        lines.append(f"title: {result.title}")
    text = result.text
    if result.text_chars > len(text):
        text += (f"\n[... text cut at {len(result.text)} of {result.text_chars} characters; "
                 "fetch a more specific page (a section, a raw file) for the rest]")
    lines += ["", text or "(no readable text)"]
    if result.links:
        lines += ["", f"links ({len(result.links) + result.more_links}):"]
        lines += [f"[{link.text}]({link.url})" for link in result.links]
        if result.more_links:
            lines.append(more_note(result.more_links, "links", "fetch a more specific page"))
    return "\n".join(lines)


@renders(WebTable)
def _web_table_text(result: WebTable) -> str:
    lines = [render_text(result.table)]
    if result.redirects:
        lines.append(f"(fetched from {result.final_url})")
    if result.saved is not None:
        lines.append(render_text(result.saved))
    return "\n".join(lines)


def cut_page_text(text: str) -> tuple[str, int]:
    """(what web_fetch shows of a page's text, the characters of the whole): stripped, the
    first MAX_READ_CHARS characters."""
    text = text.strip()
    return text[:MAX_READ_CHARS], len(text)
