"""The web tools against real HTTP servers on 127.0.0.1 (and 127.0.0.2 as 'elsewhere')."""

from __future__ import annotations

import io
import ipaddress
import json
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from yggdrasil.loki.files import Files, Root
from yggdrasil.loki.results import MAX_READ_CHARS
from yggdrasil.loki.tables import TableReader
from yggdrasil.loki.tools import Tool, Toolbox, filesystem_toolbox
from yggdrasil.loki.web import MAX_LINKS, AddressPolicy, Limits, Web

# -- a small real web site ----------------------------------------------------------------

Route = Callable[["Handler"], None]


class Handler(BaseHTTPRequestHandler):
    server: Site

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Host", "")))
        route = self.server.routes.get(self.path)
        if route is None:
            self.send_error(404)
        else:
            route(self)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Site(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, host: str, port: int = 0) -> None:
        super().__init__((host, port), Handler)
        self.host = host
        self.routes: dict[str, Route] = {}
        self.seen: list[tuple[str, str]] = []  # (path, Host header) of every request
        self.stop = threading.Event()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, path: str, scheme: str = "http", host: str = "") -> str:
        return f"{scheme}://{host or self.host}:{self.port}{path}"


def serve(site: Site) -> Iterator[Site]:
    threading.Thread(target=site.serve_forever, args=(0.02,), daemon=True).start()
    yield site
    site.stop.set()
    site.shutdown()
    site.server_close()


def body(data: bytes | str, ctype: str, status: int = 200,
         headers: tuple[tuple[str, str], ...] = ()) -> Route:
    raw = data.encode() if isinstance(data, str) else data

    def send(h: Handler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        if not any(k.lower() == "content-length" for k, _ in headers):
            h.send_header("Content-Length", str(len(raw)))
        for key, value in headers:
            h.send_header(key, value)
        h.end_headers()
        h.wfile.write(raw)
    return send


def redirect(location: str, status: int = 302) -> Route:
    return body(b"", "text/plain", status, (("Location", location),))


def endless(h: Handler) -> None:
    """No Content-Length: stream until the client hangs up."""
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.end_headers()
    chunk = b"x" * 65536
    try:
        while not h.server.stop.is_set():
            h.wfile.write(chunk)
    except OSError:
        pass


def stall(h: Handler) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.end_headers()
    h.wfile.flush()
    h.server.stop.wait(10)


def drip(h: Handler) -> None:
    """A byte every 50 ms, forever: never silent long enough for a read timeout."""
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.end_headers()
    try:
        while not h.server.stop.wait(0.05):
            h.wfile.write(b"x")
            h.wfile.flush()
    except OSError:
        pass


@pytest.fixture
def site() -> Iterator[Site]:
    yield from serve(Site("127.0.0.1"))


@pytest.fixture
def other(site: Site) -> Iterator[Site]:
    """A second server on 127.0.0.2, same port: where a redirect or rebinding must not land."""
    yield from serve(Site("127.0.0.2", site.port))


@pytest.fixture
def box(root: Path) -> Toolbox:
    return filesystem_toolbox(root, allow_web=True, allow_private_hosts=True)


@pytest.fixture
def public_box(root: Path) -> Toolbox:
    return filesystem_toolbox(root, allow_web=True)


@pytest.fixture
def not_temp(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Make the system temp dir somewhere else, so the test root counts as a real project."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("systemtmp")))


def custom_box(root: Path, **options: Any) -> Toolbox:
    """The web tools over a Web with a custom policy, limits or resolver."""
    box = Toolbox()
    where = Root.at(root)
    options.setdefault("preview_table", TableReader(where).preview_bytes)  # as the toolbox does
    web = Web(where, Files(where, on_change=box.record), **options)
    for fn in (web.web_fetch, web.web_table, web.web_image):
        box.add(Tool.from_function(fn, description=fn.__name__))
    return box


BLOCK_127_0_0_2 = AddressPolicy(allow_private=True,
                                blocked=(ipaddress.ip_network("127.0.0.2/32"),))

PAGE = """<!doctype html><html><head><title>Loki field guide</title><base href="/guide/"></head>
<body><nav><a href="/">Home</a> <a href="/blog">Blog</a></nav>
<article><h1>Reading the tree</h1>
<p>Loki lists, reads and searches the files of one folder, the root, and nothing above it.</p>
<p>Writes are atomic: a reader sees the old content or the new one, never a half of it.</p>
<p>Read <a href="api.html">the API reference</a> or <a href="https://example.org/more#top">more
examples</a>.</p></article>
<footer><a href="mailto:team@example.org">mail</a> <a href="javascript:void(0)">menu</a></footer>
<script>window.trackingSecret = "do-not-show";</script></body></html>"""

CSV = "city,people\nOslo,709000\nBergen,291000\nTromso,78000\n"


def parquet_bytes() -> bytes:
    import polars as pl

    buf = io.BytesIO()
    pl.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"]}).write_parquet(buf)
    return buf.getvalue()


def png_bytes(width: int = 64, height: int = 48) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGBA", (width, height), (200, 30, 30, 255)).save(buf, "PNG")
    return buf.getvalue()


# -- web_fetch ------------------------------------------------------------------------------

def test_fetch_html_gives_main_text_title_and_absolute_links(box: Toolbox, site: Site) -> None:
    site.routes["/guide/index.html"] = body(PAGE, "text/html; charset=utf-8")
    out = box.call("web_fetch", {"url": site.url("/guide/index.html")})
    first, title = out.splitlines()[:2]
    assert first.startswith(f"{site.url('/guide/index.html')}  type=text/html  size=")
    assert title == "title: Loki field guide"
    assert "Writes are atomic: a reader sees the old content" in out
    assert "trackingSecret" not in out and "<p>" not in out
    assert f"[the API reference]({site.url('/guide/api.html')})" in out  # via <base href>
    assert "[more examples](https://example.org/more)" in out
    assert f"[Blog]({site.url('/blog')})" in out
    assert "mailto:" not in out and "javascript:" not in out


def test_fetch_passes_plain_text_and_json_through(box: Toolbox, site: Site) -> None:
    site.routes["/notes.txt"] = body("line one\n  indented two\n", "text/plain; charset=utf-8")
    site.routes["/api"] = body('{"name":"loki","tags":["a","b"]}', "application/json")
    text = box.call("web_fetch", {"url": site.url("/notes.txt")})
    assert text.endswith("\n\nline one\n  indented two")
    data = box.call("web_fetch", {"url": site.url("/api")})
    assert "type=application/json" in data
    assert json.loads(data.split("\n\n", 1)[1]) == {"name": "loki", "tags": ["a", "b"]}


def test_fetch_reports_binary_by_type_and_size(box: Toolbox, site: Site) -> None:
    blob = bytes(range(256)) * 40
    site.routes["/blob"] = body(blob, "application/octet-stream")
    site.routes["/a.zip"] = body(b"PK\x03\x04" + blob, "application/zip")
    out = box.call("web_fetch", {"url": site.url("/blob")})
    assert "type=application/octet-stream  size=10.0 KB (10240 bytes)" in out
    assert "binary content, not shown" in out and len(out) < 400
    out = box.call("web_fetch", {"url": site.url("/a.zip")})
    assert "type=application/zip  size=10.0 KB (10244 bytes)" in out and "PK" not in out


def test_fetch_bounds_long_text_and_many_links(box: Toolbox, site: Site) -> None:
    site.routes["/long.txt"] = body("word " * 30_000, "text/plain")
    links = "".join(f'<li><a href="/p{i}">page {i}</a></li>' for i in range(MAX_LINKS + 20))
    site.routes["/links"] = body(f"<html><body><p>Index of pages.</p><ul>{links}</ul></body>"
                                 "</html>", "text/html")
    out = box.call("web_fetch", {"url": site.url("/long.txt")})
    assert f"[... text cut at {MAX_READ_CHARS} of 149999 characters" in out
    out = box.call("web_fetch", {"url": site.url("/links")})
    assert f"links ({MAX_LINKS + 20}):" in out
    assert "[... 20 more links not shown; fetch a more specific page]" in out


def test_fetch_follows_a_relative_redirect_and_says_so(box: Toolbox, site: Site) -> None:
    site.routes["/old"] = redirect("/new.txt", 301)
    site.routes["/new.txt"] = body("moved here", "text/plain")
    out = box.call("web_fetch", {"url": site.url("/old")})
    assert out.startswith(f"{site.url('/new.txt')}  type=text/plain")
    assert f"(redirected from {site.url('/old')})" in out and out.endswith("moved here")


def test_http_errors_are_observations(box: Toolbox, site: Site) -> None:
    out = box.call("web_fetch", {"url": site.url("/missing")})
    assert out == f"ERROR: {site.url('/missing')} answered HTTP 404 Not Found; check the URL"


# -- web_table ------------------------------------------------------------------------------

def test_table_csv_previewed_like_read_table(box: Toolbox, site: Site) -> None:
    site.routes["/cities.csv"] = body(CSV, "text/csv")
    out = box.call("web_table", {"url": site.url("/cities.csv")})
    assert out.startswith(f"{site.url('/cities.csv')}  shape=(3, 2)  columns=['city', 'people']")
    assert "Bergen" in out and box.changed == []


def test_table_parquet_by_extension_and_csv_by_content_type(box: Toolbox, site: Site) -> None:
    site.routes["/data/t.parquet"] = body(parquet_bytes(), "application/octet-stream")
    site.routes["/export?id=7"] = body(CSV, "text/csv; charset=utf-8")
    site.routes["/raw"] = body(CSV, "application/octet-stream")
    out = box.call("web_table", {"url": site.url("/data/t.parquet")})
    assert "shape=(3, 2)  columns=['id', 'name']" in out
    assert "shape=(3, 2)" in box.call("web_table", {"url": site.url("/export?id=7")})
    out = box.call("web_table", {"url": site.url("/raw")})
    assert out.startswith("ERROR: cannot tell the table format") and "fmt='csv'" in out
    assert "shape=(3, 2)" in box.call("web_table", {"url": site.url("/raw"), "fmt": "csv"})


def test_table_json_and_xlsx(box: Toolbox, site: Site) -> None:
    rows = [{"city": "Oslo", "people": 709000}, {"city": "Bergen", "people": 291000}]
    site.routes["/cities.json"] = body(json.dumps(rows), "application/json")
    assert "shape=(2, 2)" in box.call("web_table", {"url": site.url("/cities.json")})
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    for row in [["city", "people"], *([r["city"], r["people"]] for r in rows)]:
        book.active.append(row)
    buf = io.BytesIO()
    book.save(buf)
    site.routes["/cities"] = body(buf.getvalue(), "application/octet-stream")
    out = box.call("web_table", {"url": site.url("/cities"), "fmt": "xlsx"})
    assert "shape=(2, 2)" in out


def test_crafted_remote_tables_cost_an_error_not_the_agent(
        box: Toolbox, site: Site, tmp_path: Path) -> None:
    """A 1.5 KB workbook with cells at A1 and XFD1048576 aborted the agent (calamine asked
    for 512 GiB); a Parquet column nested 500 lists deep segfaulted it. The preview now
    runs in the toolbox's fenced table worker, behind up-front checks."""
    from crafted import deep_parquet, far_corners_xlsx

    site.routes["/far.xlsx"] = body(far_corners_xlsx(tmp_path / "far.xlsx").read_bytes(),
                                    "application/octet-stream")
    site.routes["/deep.parquet"] = body(deep_parquet(tmp_path / "deep.parquet").read_bytes(),
                                        "application/octet-stream")
    out = box.call("web_table", {"url": site.url("/far.xlsx"), "save": "far.xlsx"})
    assert out.startswith(f"ERROR: {site.url('/far.xlsx')}: sheet sheet1.xml: its cells span "
                          "1,048,576 rows x 16,384 columns"), out
    assert out.endswith("(nothing was saved)")
    out = box.call("web_table", {"url": site.url("/deep.parquet")})
    assert out.startswith(f"ERROR: {site.url('/deep.parquet')}: a column is nested 1000"), out
    site.routes["/ok.csv"] = body("a,b\n1,2\n", "text/csv")
    assert "shape=(1, 2)" in box.call("web_table", {"url": site.url("/ok.csv")})


def test_table_refuses_an_html_page_and_bad_fmt(box: Toolbox, site: Site) -> None:
    site.routes["/data.csv"] = body(PAGE, "text/html")
    out = box.call("web_table", {"url": site.url("/data.csv")})
    assert out.startswith(f"ERROR: {site.url('/data.csv')} is an HTML page, not a table")
    out = box.call("web_table", {"url": site.url("/data.csv"), "fmt": "../x"})
    assert out.startswith("ERROR: fmt '../x' is not a format name") and site.seen[1:] == []


def test_table_save_writes_under_root_and_is_recorded(box: Toolbox, site: Site,
                                                      root: Path) -> None:
    data = parquet_bytes()
    site.routes["/t.parquet"] = body(data, "application/vnd.apache.parquet")
    out = box.call("web_table", {"url": site.url("/t.parquet"), "save": "data/t.parquet"})
    assert out.endswith(f"\ncreated data/t.parquet ({len(data)} bytes)")
    assert (root / "data" / "t.parquet").read_bytes() == data
    assert box.changed == ["data/t.parquet"]
    assert "shape=(3, 2)" in box.call("read_table", {"path": "data/t.parquet"})
    again = box.call("web_table", {"url": site.url("/t.parquet"), "save": "data/t.parquet"})
    assert again.endswith(f"\noverwrote data/t.parquet ({len(data)} bytes)")


def test_save_escaping_the_root_is_refused_before_any_download(box: Toolbox, site: Site,
                                                               root: Path) -> None:
    site.routes["/t.csv"] = body(CSV, "text/csv")
    for tool in ("web_table", "web_image"):
        out = box.call(tool, {"url": site.url("/t.csv"), "save": "../outside/stolen.csv"})
        assert out.startswith("ERROR: path '../outside/stolen.csv' escapes the agent root")
    assert site.seen == [] and box.changed == []
    assert sorted(p.name for p in (root.parent / "outside").iterdir()) == ["secret.txt"]


def test_save_over_an_existing_file_asks_confirm(root: Path, site: Site, not_temp: None) -> None:
    asked: list[str] = []

    def deny_all(action: str) -> bool:
        asked.append(action)
        return False

    (root / "cities.csv").write_text("precious\n")
    site.routes["/cities.csv"] = body(CSV, "text/csv")
    deny = filesystem_toolbox(root, allow_web=True, allow_private_hosts=True, confirm=deny_all)
    out = deny.call("web_table", {"url": site.url("/cities.csv"), "save": "cities.csv"})
    assert out == "REFUSED: user declined to overwrite cities.csv"
    assert (root / "cities.csv").read_text() == "precious\n" and deny.changed == []
    assert deny.call("web_table", {"url": site.url("/cities.csv"), "save": "new.csv"}).endswith(
        f"created new.csv ({len(CSV)} bytes)")
    assert asked == ["overwrite cities.csv"]  # new files are not gated


def test_save_onto_a_folder_is_refused(box: Toolbox, site: Site, root: Path) -> None:
    (root / "data").mkdir()
    out = box.call("web_image", {"url": site.url("/i.png"), "save": "data"})
    assert out == "ERROR: data is not a file; give save a file path" and site.seen == []


def test_read_only_toolbox_has_web_tools_without_save(root: Path, site: Site) -> None:
    box = filesystem_toolbox(root, read_only=True, allow_web=True, allow_private_hosts=True)
    assert {"web_fetch", "web_table", "web_image"} <= set(box.tools)
    assert "save" not in box.tools["web_image"].params and not box.tools["web_table"].mutates
    site.routes["/i.png"] = body(png_bytes(), "image/png")
    assert box.call("web_image", {"url": site.url("/i.png"), "save": "x.png"}).startswith("ERROR:")
    assert not (root / "x.png").exists()


# -- web_image ------------------------------------------------------------------------------

def test_image_reports_type_size_and_pixels_and_saves(box: Toolbox, site: Site,
                                                      root: Path) -> None:
    png = png_bytes(64, 48)
    site.routes["/logo.png"] = body(png, "image/png")
    out = box.call("web_image", {"url": site.url("/logo.png"), "save": "img/logo.png"})
    assert out.splitlines() == [
        f"{site.url('/logo.png')}  type=image/png  size={len(png)} bytes  "
        "pixels=64x48  format=PNG  mode=RGBA  shown=64x48",
        f"created img/logo.png ({len(png)} bytes)"]
    assert (root / "img" / "logo.png").read_bytes() == png and box.changed == ["img/logo.png"]
    (picture,) = box.invoke("web_image", {"url": site.url("/logo.png")}).images  # the picture
    assert (picture.mime, picture.width, picture.height) == ("image/png", 64, 48)


def test_a_large_remote_image_is_shown_downscaled(box: Toolbox, site: Site) -> None:
    big = png_bytes(4096, 1024)
    site.routes["/wide.png"] = body(big, "image/png")
    result = box.invoke("web_image", {"url": site.url("/wide.png")})
    assert result.text.endswith("pixels=4096x1024  format=PNG  mode=RGBA  shown=2048x512")
    assert [(p.width, p.height) for p in result.images] == [(2048, 512)]


def test_image_refuses_what_is_not_an_image(box: Toolbox, site: Site, root: Path) -> None:
    site.routes["/fake.png"] = body(PAGE, "text/html")
    out = box.call("web_image", {"url": site.url("/fake.png"), "save": "fake.png"})
    assert out.startswith(f"ERROR: {site.url('/fake.png')} is not an image Pillow can read "
                          "(type text/html")
    assert not (root / "fake.png").exists()


# -- refusals -------------------------------------------------------------------------------

ALLOWED = "the web tools reach public internet addresses over http(s) only"


@pytest.mark.parametrize(("host", "shown"), [
    ("127.0.0.1", "127.0.0.1 is a loopback address"),
    ("localhost", "localhost resolves to "),
    ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1 is an IPv6 form of 127.0.0.1, a loopback address"),
    ("2130706433", "2130706433 resolves to 127.0.0.1, a loopback address"),
])
def test_loopback_is_refused_without_the_opt_in(public_box: Toolbox, site: Site, host: str,
                                               shown: str) -> None:
    site.routes["/"] = body("private page", "text/plain")
    for tool in ("web_fetch", "web_table", "web_image"):
        url = site.url("/", host=host)
        out = public_box.call(tool, {"url": url})
        assert out.startswith(f"ERROR: refused {url}: {shown}")
        assert ALLOWED in out and "allow_private_hosts=True" in out
    assert site.seen == []  # not one connection reached the server


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/x.csv",
                                 "gopher://127.0.0.1/"])
def test_other_schemes_are_refused(public_box: Toolbox, box: Toolbox, url: str) -> None:
    for b in (public_box, box):
        out = b.call("web_fetch", {"url": url})
        scheme = url.split(":")[0]
        assert out == (f"ERROR: refused {url}: only http:// and https:// URLs can be fetched, "
                       f"not {scheme}:// (files under the root: read_file)")


def test_url_without_scheme_says_how_to_write_one(public_box: Toolbox) -> None:
    out = public_box.call("web_fetch", {"url": "example.org/page"})
    assert out == ("ERROR: 'example.org/page' has no scheme; give a full URL like "
                   "https://example.org/page")


def test_redirect_to_a_blocked_address_is_rechecked(root: Path, site: Site,
                                                    other: Site) -> None:
    site.routes["/jump"] = redirect(other.url("/internal"))
    other.routes["/internal"] = body("internal secret", "text/plain")
    # control: with 127.0.0.2 allowed the redirect lands on the second server
    open_box = custom_box(root, policy=AddressPolicy(allow_private=True))
    assert open_box.call("web_fetch", {"url": site.url("/jump")}).endswith("internal secret")
    other.seen.clear()
    out = custom_box(root, policy=BLOCK_127_0_0_2).call("web_fetch", {"url": site.url("/jump")})
    assert out.startswith(f"ERROR: refused {other.url('/internal')} (redirected from "
                          f"{site.url('/jump')}): 127.0.0.2 is in a blocked network")
    assert other.seen == []


def test_redirect_to_cloud_metadata_is_refused_even_with_the_opt_in(box: Toolbox,
                                                                    site: Site) -> None:
    site.routes["/meta"] = redirect("http://169.254.169.254/latest/meta-data/iam/")
    out = box.call("web_fetch", {"url": site.url("/meta")})
    assert out.startswith("ERROR: refused http://169.254.169.254/latest/meta-data/iam/ "
                          f"(redirected from {site.url('/meta')}): 169.254.169.254 is a cloud "
                          "metadata address (refused even with allow_private_hosts=True)")


def test_redirect_to_file_is_refused(box: Toolbox, site: Site) -> None:
    site.routes["/f"] = redirect("file:///etc/passwd")
    out = box.call("web_fetch", {"url": site.url("/f")})
    # httpx gives a host-less absolute Location the current host: file://127.0.0.1/etc/passwd
    assert out.startswith("ERROR: refused file://127.0.0.1/etc/passwd (redirected from "
                          f"{site.url('/f')}): only http:// and https:// URLs")


def test_too_many_redirects(box: Toolbox, site: Site) -> None:
    for n in range(10):
        site.routes[f"/r{n}"] = redirect(f"/r{n + 1}")
    out = box.call("web_fetch", {"url": site.url("/r0")})
    assert out.startswith(f"ERROR: {site.url('/r0')} redirected more than 5 times")
    assert [path for path, _ in site.seen] == [f"/r{n}" for n in range(6)]


def test_response_larger_than_the_cap_is_aborted(box: Toolbox, site: Site) -> None:
    site.routes["/endless"] = endless
    out = box.call("web_fetch", {"url": site.url("/endless")})
    assert out.startswith(f"ERROR: {site.url('/endless')} sent more than the 5.0 MB download "
                          "cap; aborted after")
    site.routes["/huge.csv"] = body(b"a,b\n", "text/csv", headers=(("Content-Length", "10" * 5),))
    out = box.call("web_table", {"url": site.url("/huge.csv")})
    assert out == (f"ERROR: {site.url('/huge.csv')} is 963.3 MB, over the 50.0 MB download cap; "
                   "nothing was read")


def test_binary_larger_than_the_cap_is_reported_not_read(root: Path, site: Site) -> None:
    site.routes["/stream.bin"] = endless  # served as text/plain but endless
    site.routes["/video"] = body(b"\0" * 10, "video/mp4", headers=(("Content-Length", "10" * 5),))
    box = custom_box(root, policy=AddressPolicy(allow_private=True),
                     limits=Limits(max_page_bytes=100_000))
    assert "type=video/mp4  size=963.3 MB" in box.call("web_fetch", {"url": site.url("/video")})
    out = box.call("web_fetch", {"url": site.url("/stream.bin")})
    assert "sent more than the 97.7 KB download cap" in out


# -- content coding: decoded output is bounded before it is produced ----------------------

def gzipped(data: bytes, wbits: int = 31) -> bytes:
    """``data`` compressed: gzip (31), zlib (15) or raw deflate (-15)."""
    pack = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return pack.compress(data) + pack.flush()


def zero_bomb(megabytes: int) -> bytes:
    """``megabytes`` MB of zeros, gzipped a megabyte at a time (about 1 KB per MB)."""
    pack = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return b"".join([pack.compress(zeros) for _ in range(megabytes)] + [pack.flush()])


def encoded(data: bytes, coding: str, ctype: str = "text/html") -> Route:
    return body(data, ctype, headers=(("Content-Encoding", coding),))


def echo_accept_encoding(h: Handler) -> None:
    body(h.headers.get("Accept-Encoding", "(none)"), "text/plain")(h)


def test_gzip_and_deflate_pages_are_decoded(box: Toolbox, site: Site) -> None:
    site.routes["/gz"] = encoded(gzipped(PAGE.encode()), "gzip")
    site.routes["/zlib"] = encoded(gzipped(PAGE.encode(), 15), "deflate")
    site.routes["/raw"] = encoded(gzipped(PAGE.encode(), -15), "deflate")
    site.routes["/csv"] = encoded(gzipped(CSV.encode()), "x-gzip", "text/csv")
    site.routes["/ae"] = echo_accept_encoding
    for path in ("/gz", "/zlib", "/raw"):
        out = box.call("web_fetch", {"url": site.url(path)})
        assert f"size={len(PAGE)} bytes" in out and "title: Loki field guide" in out
        assert "Writes are atomic" in out
    assert "shape=(3, 2)" in box.call("web_table", {"url": site.url("/csv"), "fmt": "csv"})
    assert box.call("web_fetch", {"url": site.url("/ae")}).endswith("\n\ngzip, deflate")


def test_stacked_unknown_and_corrupt_codings_are_refused(box: Toolbox, site: Site) -> None:
    twice = gzipped(gzipped(bytes(8 << 20)))
    site.routes["/twice"] = encoded(twice, "gzip, gzip")
    site.routes["/split"] = body(twice, "text/html", headers=(("Content-Encoding", "gzip"),
                                                             ("Content-Encoding", "gzip")))
    out = box.call("web_fetch", {"url": site.url("/twice")})
    assert out == (f"ERROR: {site.url('/twice')} stacks 2 content codings (gzip, gzip); only "
                   "one layer of gzip or deflate is decoded, since stacked layers can hide a "
                   "decompression bomb")
    assert "stacks 2 content codings" in box.call("web_fetch", {"url": site.url("/split")})
    for coding in ("br", "zstd", "compress"):
        site.routes[f"/{coding}"] = encoded(b"\x1b\x00\x00", coding)
        out = box.call("web_image", {"url": site.url(f"/{coding}")})
        assert out == (f"ERROR: {site.url(f'/{coding}')} is sent with content coding "
                       f"'{coding}', which the web tools do not decode; only gzip and deflate "
                       "are asked for and accepted")
    site.routes["/bad"] = encoded(b"\x1f\x8b not really gzip", "gzip")
    out = box.call("web_fetch", {"url": site.url("/bad")})
    assert out.startswith(f"ERROR: {site.url('/bad')} sent a body that is not valid gzip (")


def test_gzip_bomb_hits_the_cap_without_being_inflated(root: Path, site: Site) -> None:
    site.routes["/bomb"] = encoded(zero_bomb(200), "gzip", "text/plain")  # 200 MB in ~200 KB
    site.routes["/bomb.bin"] = encoded(zero_bomb(200), "gzip", "video/mp4")
    site.routes["/warm"] = encoded(gzipped(PAGE.encode()), "gzip")
    code = """if True:
        import json, resource, sys
        from yggdrasil.loki.tools import filesystem_toolbox
        box = filesystem_toolbox(sys.argv[1], allow_web=True, allow_private_hosts=True)
        box.call("web_fetch", {"url": sys.argv[2]})  # imports and one gzip page first
        outs, growth = [], []
        for url in sys.argv[3:]:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            outs.append(box.call("web_fetch", {"url": url}))
            growth.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
        print(json.dumps({"outs": outs, "growth_kb": growth}))
    """
    src = Path(__file__).resolve().parents[1] / "src"
    done = subprocess.run([sys.executable, "-c", code, str(root), site.url("/warm"),
                           site.url("/bomb"), site.url("/bomb.bin")], capture_output=True,
                          text=True, env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
                          check=True, timeout=120)
    result = json.loads(done.stdout)
    text, binary = result["outs"]
    assert text.startswith(f"ERROR: {site.url('/bomb')} sent more than the 5.0 MB download "
                           "cap; aborted after 5.0 MB")
    assert "type=video/mp4  size=more than 5.0 MB\nbinary content, not shown" in binary
    assert max(result["growth_kb"]) < 40_000, result  # the cap plus a chunk, not 200 MB


def test_read_and_total_timeouts(root: Path, site: Site) -> None:
    site.routes["/stall"] = stall
    site.routes["/drip"] = drip
    policy = AddressPolicy(allow_private=True)
    out = custom_box(root, policy=policy, limits=Limits(read=0.2)).call(
        "web_fetch", {"url": site.url("/stall")})
    assert out.startswith(f"ERROR: {site.url('/stall')} timed out (ReadTimeout)")
    out = custom_box(root, policy=policy, limits=Limits(read=5, total=0.4)).call(
        "web_fetch", {"url": site.url("/drip")})
    assert out.startswith("ERROR: ") and "longer than the 0.4s total limit" in out


# -- DNS: resolve once, check, connect to what was checked ----------------------------------

def test_connects_to_the_checked_address_not_a_second_lookup(root: Path, site: Site,
                                                             other: Site) -> None:
    calls: list[str] = []

    def rebinding_dns(host: str, port: int) -> list[str]:
        calls.append(host)  # harmless on the first answer, the blocked target afterwards
        return ["127.0.0.1"] if len(calls) == 1 else ["127.0.0.2"]

    site.routes["/"] = body("the public page", "text/plain")
    other.routes["/"] = body("internal secret", "text/plain")
    box = custom_box(root, policy=BLOCK_127_0_0_2, resolve=rebinding_dns)
    out = box.call("web_fetch", {"url": f"http://rebind.test:{site.port}/"})
    assert out.endswith("the public page") and calls == ["rebind.test"]
    assert site.seen == [("/", f"rebind.test:{site.port}")] and other.seen == []
    out = box.call("web_fetch", {"url": f"http://rebind.test:{site.port}/"})
    assert out.startswith("ERROR: refused") and "rebind.test resolves to 127.0.0.2, in a blocked" in out
    assert other.seen == []


def test_only_allowed_addresses_of_a_mixed_answer_are_used(root: Path, site: Site,
                                                           other: Site) -> None:
    site.routes["/"] = body("allowed", "text/plain")
    other.routes["/"] = body("internal secret", "text/plain")
    # 127.0.0.2 is blocked, nothing listens on 127.0.0.3: the connection falls through to .1
    box = custom_box(root, policy=BLOCK_127_0_0_2,
                     resolve=lambda host, port: ["127.0.0.2", "127.0.0.3", "127.0.0.1"])
    assert box.call("web_fetch", {"url": f"http://mixed.test:{site.port}/"}).endswith("allowed")
    assert other.seen == []


@pytest.mark.parametrize(("address", "why"), [
    ("10.1.2.3", "a private address"), ("172.31.0.1", "a private address"),
    ("192.168.1.1", "a private address"), ("169.254.1.1", "a link-local address"),
    ("100.64.0.1", "a carrier-grade NAT (shared) address"), ("0.0.0.0", "an unspecified"),
    ("224.0.0.1", "a multicast address"), ("255.255.255.255", "a reserved or broadcast"),
    ("::1", "a loopback address"), ("fd12::1", "a unique-local (private) address"),
    ("fe80::1%eth0", "a link-local address"), ("::ffff:10.0.0.1", "an IPv6 form of 10.0.0.1"),
    ("::7f00:1", "an IPv6 form of 127.0.0.1"), ("2002:c0a8:101::1", "an IPv6 form of 192.168.1.1"),
    ("64:ff9b::a00:1", "an IPv6 form of 10.0.0.1"), ("ff02::1", "a multicast address"),
    ("169.254.169.254", "a cloud metadata address"), ("fd00:ec2::254", "a cloud metadata"),
])
def test_policy_refuses_non_public_addresses(address: str, why: str) -> None:
    refusal = AddressPolicy().refusal(address)
    assert refusal is not None and refusal.startswith(why)


def test_policy_allows_public_addresses_and_the_opt_in_allows_private() -> None:
    for address in ("93.184.215.14", "2606:4700::6810:84e5", "64:ff9b::808:808"):
        assert AddressPolicy().refusal(address) is None
    opted = AddressPolicy(allow_private=True)
    assert opted.refusal("10.0.0.1") is None and opted.refusal("::1") is None
    for metadata in ("169.254.169.254", "::ffff:169.254.169.254", "100.100.100.200"):
        assert "cloud metadata" in (opted.refusal(metadata) or "")


# -- TLS: connecting to the checked IP keeps SNI and certificate checks on the host name ----

@pytest.fixture
def tls_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    openssl = shutil.which("openssl") or pytest.skip("needs the openssl command")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trusted by httpx.create_ssl_context
    site = QuietSite("127.0.0.1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    site.socket = context.wrap_socket(site.socket, server_side=True)
    yield from serve(site)


class QuietSite(Site):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the refused handshake of the wrong-host test is expected


def test_https_verifies_the_url_host_while_connecting_to_the_checked_ip(
        box: Toolbox, tls_site: Site) -> None:
    tls_site.routes["/hello"] = body("hello over tls", "text/plain")
    url = tls_site.url("/hello", scheme="https", host="localhost")
    assert box.call("web_fetch", {"url": url}).endswith("hello over tls")
    by_ip = tls_site.url("/hello", scheme="https")  # the certificate names localhost only
    out = box.call("web_fetch", {"url": by_ip})
    assert out.startswith(f"ERROR: cannot connect to {by_ip}") and "certificate" in out


# -- packaging ------------------------------------------------------------------------------

def test_web_toolbox_imports_no_network_library_until_used(root: Path) -> None:
    code = ("import sys; from yggdrasil.loki.tools import filesystem_toolbox; "
            f"filesystem_toolbox({str(root)!r}, allow_web=True); "
            "print(sorted(m for m in ('httpx', 'httpcore', 'trafilatura', 'PIL', 'lxml') "
            "if m in sys.modules))")
    src = Path(__file__).resolve().parents[1] / "src"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}, check=True)
    assert done.stdout.strip() == "[]"
