"""A fetched body as readable text: HTML main content, its title and links; text; JSON.

The main content of an HTML page is found by trafilatura (boilerplate such as menus,
footers and scripts left out); title and links are read from the parsed document with
lxml. Both are imported on first use.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urldefrag, urljoin

MAX_LINKS = 100
MAX_LINK_TEXT = 80

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript",
               "application/x-javascript", "application/ecmascript", "application/x-yaml",
               "application/yaml", "application/toml", "application/x-ndjson",
               "application/sql", "application/x-sh", "application/graphql")
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_UNKNOWN_TYPES = ("", "application/octet-stream", "binary/octet-stream")


@dataclass
class Page:
    kind: Literal["html", "json", "text"]
    text: str
    title: str = ""
    links: list[tuple[str, str]] = field(default_factory=list)  # (text, absolute url)


def is_texty(media_type: str) -> bool:
    """True for media types whose body is text (HTML, JSON, XML, scripts, plain text)."""
    return (media_type.startswith(_TEXT_TYPES) or media_type.endswith(("+json", "+xml"))
            or media_type in _HTML_TYPES)


def maybe_text(media_type: str) -> bool:
    """True when the body may be text: a texty type, or no useful type at all."""
    return is_texty(media_type) or media_type in _UNKNOWN_TYPES


def looks_like_text(body: bytes) -> bool:
    """A sniff for bodies served without a useful type: no NUL byte, decodes as UTF-8."""
    head = body[:8192]
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # a character cut by the 8 KB window
    return True


def decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", "replace")


def read_page(body: bytes, media_type: str, charset: str | None, url: str) -> Page:
    if media_type in _HTML_TYPES or (not media_type and body.lstrip()[:15].lower().startswith(
            (b"<!doctype html", b"<html"))):
        return read_html(body, charset, url)
    text = decode(body, charset)
    if media_type == "application/json" or media_type.endswith("+json"):
        return Page("json", _pretty_json(text))
    return Page("text", text)


def _pretty_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text  # not valid JSON after all: show it as sent


def read_html(body: bytes, charset: str | None, url: str) -> Page:
    """Title, links and main text of a page, from one parse of its bytes.

    Without a charset in the headers, lxml reads the page's own ``<meta charset>``.
    """
    import lxml.etree
    import lxml.html
    import trafilatura

    if not body.strip():
        return Page("html", "")
    try:
        parser = lxml.html.HTMLParser(encoding=charset) if charset else None
        doc = lxml.html.document_fromstring(body, parser=parser)
    except (lxml.etree.ParserError, LookupError, ValueError):
        return Page("text", decode(body, charset))  # not parseable as HTML: show it as text
    title, links = _title(doc), _links(doc, url)
    text = trafilatura.extract(copy.deepcopy(doc), url=url, output_format="markdown",
                               include_tables=True, include_links=False, favor_recall=True)
    if not text:  # nothing looked like main content: fall back to all the page's text
        text = trafilatura.html2txt(doc)
    return Page("html", text or "", title, links)


def _title(doc: Any) -> str:
    return " ".join((doc.findtext(".//title") or "").split())[:300]


def _links(doc: Any, url: str) -> list[tuple[str, str]]:
    """Every http(s) link once, absolute (against <base href> when the page sets one)."""
    base = next(iter(doc.xpath("//base/@href")), None)
    base_url = urljoin(url, str(base)) if base else url
    here = urldefrag(url)[0]
    seen: dict[str, tuple[str, str]] = {}
    for anchor in doc.iter("a"):
        href = (anchor.get("href") or "").strip()
        target = urldefrag(urljoin(base_url, href))[0] if href else ""
        if not target.startswith(("http://", "https://")) or target in seen or target == here:
            continue
        label = " ".join(anchor.text_content().split())[:MAX_LINK_TEXT]
        seen[target] = (label, target)
    return list(seen.values())
