"""HTML pages: read_file shows their source (numbered lines, editable) by default, and the
page as Markdown with ``rendered=True``, parsed in the media worker. Each page is made
here; the attacker's ones (60 MB, 100,000 levels deep, an entity bomb, a PNG under an
.html name) get a capped answer or a clear error."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from yggdrasil.loki.results import DocumentRead, ImageRead
from yggdrasil.loki.tools import Toolbox

PAGE = """<!doctype html>
<html><head><title>Guide</title>
<style>body { color: red } .hidden-style-rule { display: none }</style>
<script>var secret = "SCRIPT-TEXT"; document.write("<h1>fake</h1>");</script>
</head>
<body>
<!-- a comment the reader never sees -->
<h1>Install</h1>
<p>Run it with <a href="https://example.org/docs">the docs</a> and <b>care</b>.</p>
<h2>Steps</h2>
<ul><li>one</li><li>two<ul><li>nested</li></ul></li></ul>
<table><tr><th>name</th><th>size</th></tr><tr><td>a</td><td>3</td></tr></table>
<pre><code>x = 1
y = 2</code></pre>
<noscript>NOSCRIPT-TEXT</noscript>
</body></html>
"""


def test_an_html_page_shows_its_source_by_default_and_markdown_when_rendered(
        root: Path, box: Toolbox) -> None:
    (root / "guide.html").write_text(PAGE)
    source = box.call("read_file", {"path": "guide.html"})
    assert source.startswith("1\t<!doctype html>") and "SCRIPT-TEXT" in source
    result = box.invoke("read_file", {"path": "guide.html", "rendered": True})
    assert isinstance(result.data, DocumentRead) and result.data.format == "html"
    assert result.text == (
        "guide.html: HTML document as Markdown\n# Install\n\n"
        "Run it with [the docs](https://example.org/docs) and **care**.\n\n## Steps\n\n"
        "- one\n- two\n  - nested\n\n| name | size |\n| --- | --- |\n| a | 3 |\n\n"
        "```\nx = 1\ny = 2\n```")
    for hidden in ("SCRIPT-TEXT", "fake", "color", "comment", "NOSCRIPT", "Guide"):
        assert hidden not in result.text
    (root / "old.HTM").write_text("<p>short</p>")  # .htm, any case
    assert box.call("read_file", {"path": "old.HTM", "rendered": True}).endswith("\nshort")


def test_rendered_is_for_html_pages_only(root: Path, box: Toolbox) -> None:
    (root / "notes.txt").write_text("<h1>not a page</h1>\n")
    (root / "page.html").write_text("<h1>T</h1>\n" * 5)
    result = box.invoke("read_file", {"path": "notes.txt", "rendered": True})
    assert result.is_error and result.text == (
        "ERROR: rendered applies to HTML pages (.html, .htm); notes.txt is not one: leave "
        "rendered out")
    for extra in ({"start": 2}, {"end": 3}, {"symbol": "T"}):
        result = box.invoke("read_file", {"path": "page.html", "rendered": True, **extra})
        assert result.is_error and "start, end and symbol apply to the source" in result.text
    result = box.invoke("read_file", {"path": "page.html", "rendered": True, "pages": "2"})
    assert result.is_error and "pages and as_images apply to PDFs and notebooks" in result.text
    assert box.call("read_file", {"path": "page.html", "start": 2, "end": 2}).startswith(
        "2\t<h1>T</h1>\n[showing lines 2-2 of 5")


def test_a_page_in_its_own_charset_is_decoded(root: Path, box: Toolbox) -> None:
    (root / "latin.html").write_bytes(
        "<html><head><meta charset='iso-8859-1'></head><body><p>café</p></body></html>"
        .encode("latin-1"))
    (root / "utf8.html").write_bytes("<p>naïve — ok</p>".encode())
    assert box.call("read_file", {"path": "latin.html", "rendered": True}).endswith("\ncafé")
    assert box.call("read_file", {"path": "utf8.html", "rendered": True}).endswith(
        "\nnaïve — ok")


def test_a_60_mb_page_is_refused_by_size_unread(root: Path, box: Toolbox) -> None:
    with open(root / "huge.html", "wb") as fh:
        fh.write(b"<html><body><p>")
        fh.truncate(60 << 20)  # sparse: the size is what is checked, before any read
    result = box.invoke("read_file", {"path": "huge.html", "rendered": True})
    assert result.is_error
    assert result.text == "ERROR: huge.html is 60.0 MB; at most 8.0 MB are read"


def test_a_long_page_is_cut_with_a_count(root: Path, box: Toolbox) -> None:
    (root / "long.html").write_text("<html><body>" + "<p>word word word</p>\n" * 30_000
                                    + "<p>THE-END</p></body></html>")
    out = box.call("read_file", {"path": "long.html", "rendered": True})
    assert "THE-END" not in out
    assert out.rsplit("\n", 1)[-1].startswith("[cut: ") and len(out) < 210_000


def test_100000_levels_of_nesting_do_not_crash_the_reader(root: Path, box: Toolbox) -> None:
    depth = 100_000
    (root / "deep.html").write_text("<html><body><p>before</p>" + "<div>" * depth + "inside"
                                    + "</div>" * depth + "<p>after</p></body></html>")
    out = box.call("read_file", {"path": "deep.html", "rendered": True})
    assert out == ("deep.html: HTML document as Markdown\nbefore\n\n[the page nests tags more "
                   "than 2048 levels deep: the HTML parser stopped at line 1; what follows is "
                   "not shown]")
    # 2,000 levels parse, and markdownify (recursive) gets them flattened to their text
    (root / "deep-ok.html").write_text("<body><p>before</p>" + "<ul><li>" * 1000 + "inside"
                                       + "</li></ul>" * 1000 + "<p>after</p></body>")
    out = box.call("read_file", {"path": "deep-ok.html", "rendered": True})
    assert out.startswith("deep-ok.html: HTML document as Markdown\nbefore\n")
    assert "inside" in out and out.endswith("\nafter")


def test_an_entity_bomb_is_not_expanded(root: Path, box: Toolbox) -> None:
    entities = '<!ENTITY a "' + "a" * 10 + '">' + "".join(
        f'<!ENTITY {n} "{("&" + p + ";") * 10}">' for p, n in zip("abcdefgh", "bcdefghi", strict=True))
    (root / "laughs.html").write_text(f"<!DOCTYPE html [{entities}]><html><body>"
                                      "<p>&i;&i;&i;</p><p>after</p></body></html>")
    result = box.invoke("read_file", {"path": "laughs.html", "rendered": True})
    assert not result.is_error and len(result.text) < 200
    assert "aaaaaaaaaaaa" not in result.text and result.text.endswith("after")


def test_a_png_named_html_is_read_as_the_picture_it_is(root: Path, box: Toolbox) -> None:
    out = io.BytesIO()
    Image.new("RGB", (30, 20), "red").save(out, "PNG")
    (root / "page.html").write_bytes(out.getvalue())
    for args in ({}, {"rendered": True}):
        result = box.invoke("read_file", {"path": "page.html", **args})
        assert isinstance(result.data, ImageRead) and result.data.format == "PNG"
        assert result.text.startswith("page.html: PNG image, 30x20 px")


def test_a_text_file_that_mentions_the_pdf_header_reads_as_text(root: Path, box: Toolbox) -> None:
    (root / "sniff.py").write_text('def sniff(b):\n    return b.startswith(b"%PDF-")\n')
    (root / "pdf.html").write_text("<p>A PDF starts with %PDF-1.7</p>\n")
    assert box.call("read_file", {"path": "sniff.py"}).startswith("1\tdef sniff(b):")
    assert box.call("read_file", {"path": "pdf.html", "rendered": True}).endswith(
        "\nA PDF starts with %PDF-1.7")
