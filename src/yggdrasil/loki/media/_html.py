"""An HTML page as Markdown, in the media worker: lxml parses it (libxml2's HTML parser:
no DTD, no entity expansion, nesting capped at 255 levels), the tree is trimmed (scripts,
styles, comments and the head dropped; nesting deeper than ``MAX_DEPTH`` flattened to
its text; everything past the character and element caps cut), and markdownify writes
what is left: headings, links, lists, tables and code blocks.

markdownify over trafilatura (which web_fetch uses): trafilatura keeps a page's *main
content* and, on a local file, often drops or flattens it (headings, lists and tables
come out as bare lines, links lost); markdownify converts the whole page and keeps its
structure, which is what a read of one's own HTML file wants.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 48  # markdownify recurses a few frames per level: well under Python's 1000
MAX_ELEMENTS = 50_000  # ~4 s through bs4 and markdownify on this machine's cores
_DROPPED = ("script", "style", "noscript", "template", "head", "iframe", "object", "embed",
            "svg", "canvas")


def html_markdown(data: bytes, max_chars: int) -> tuple[str, int]:
    """``data`` as Markdown, and how many characters of the page's text were left out
    before converting (the answer is cut again at ``max_chars`` by the caller)."""
    import lxml.etree
    import lxml.html

    if not data.strip():
        return "", 0
    try:
        data.decode("utf-8")
        encoding: str | None = "utf-8"
    except UnicodeDecodeError:  # the page's own <meta charset>, else Latin-1
        encoding = None
    # huge_tree: nesting up to 2048 levels instead of 256 (the input is capped in bytes)
    parser = lxml.html.HTMLParser(encoding=encoding, remove_comments=True, remove_pis=True,
                                  no_network=True, huge_tree=True)
    try:
        doc = lxml.html.document_fromstring(data, parser=parser)
    except (lxml.etree.ParserError, ValueError):
        return "", 0
    fatal = next((e for e in parser.error_log if e.level_name == "FATAL"), None)
    lxml.etree.strip_elements(doc, *_DROPPED, with_tail=False)
    _flatten(doc)
    left_out = _cut(doc, max_chars)
    html = lxml.html.tostring(doc, encoding="unicode")
    text = _convert(html)
    if fatal is not None:  # libxml2 stopped there: what follows was never parsed
        why = ("the page nests tags more than 2048 levels deep" if "depth" in fatal.message
               else fatal.message.strip()[:200])
        text = (text.rstrip("\n") + f"\n\n[{why}: the HTML parser stopped at line "
                f"{fatal.line}; what follows is not shown]\n").lstrip("\n")
    return text, left_out


def _flatten(doc: Any) -> None:
    """Elements ``MAX_DEPTH`` levels down keep their text, not their children."""
    for deep in doc.xpath("/*" + "/*" * MAX_DEPTH):
        text = deep.text_content()
        for child in list(deep):
            deep.remove(child)
        deep.text = text


def _cut(doc: Any, max_chars: int) -> int:
    """Drop everything after the first ``max_chars`` characters of text (or
    ``MAX_ELEMENTS`` elements): no work converting what the answer would cut. Returns the
    characters of text dropped."""
    seen = 0
    stop = None
    for count, el in enumerate(doc.iter(), 1):
        seen += len(el.text or "") + len(el.tail or "")
        if seen > max_chars or count > MAX_ELEMENTS:
            stop = el
            break
    if stop is None:
        return 0
    total = len(doc.text_content())
    stop.text = (stop.text or "")[:max_chars] or None  # one text node may hold the page
    stop.tail = (stop.tail or "")[:max_chars] or None
    for child in list(stop):
        stop.remove(child)
    node = stop
    while node is not None and node is not doc:
        parent = node.getparent()
        if parent is None:
            break
        for sibling in list(node.itersiblings()):
            parent.remove(sibling)
        parent.tail = None
        node = parent
    return max(0, total - len(doc.text_content()))


def _convert(html: str) -> str:
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "lxml")
    text = MarkdownConverter(heading_style="ATX", bullets="-", code_language="",
                             escape_underscores=False, escape_asterisks=False).convert_soup(soup)
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:  # at most one blank line in a row
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"
