"""web_fetch and web_table answer typed results (WebPage, WebTable): where the answer came
from (URL, redirects, status, type, size), the page's text and links or the table's
preview, and what was cut, as data; the text a model reads is rendered from it."""

from __future__ import annotations

from pathlib import Path

from test_web import CSV, PAGE, Site, body, box, parquet_bytes, redirect, site
from yggdrasil.loki.results import (
    MAX_READ_CHARS,
    FileWritten,
    TableRead,
    WebLink,
    WebPage,
    WebTable,
)
from yggdrasil.loki.tools import Toolbox
from yggdrasil.loki.web import MAX_LINKS

__all__ = ["box", "site"]  # the fixtures of test_web, used here by name


def test_fetch_answers_the_page_as_data(box: Toolbox, site: Site) -> None:
    site.routes["/guide/index.html"] = body(PAGE, "text/html; charset=utf-8")
    got = box.invoke("web_fetch", {"url": site.url("/guide/index.html")})
    page = got.data
    assert isinstance(page, WebPage) and not got.is_error
    assert (page.url, page.final_url, page.redirects) == (site.url("/guide/index.html"),) * 2 + ([],)
    assert (page.status, page.content_type, page.content) == (200, "text/html", "html")
    assert page.size == len(PAGE.encode()) and page.size_exact
    assert page.title == "Loki field guide"
    assert "Writes are atomic: a reader sees the old content" in page.text
    assert page.text_chars == len(page.text) and page.more_links == 0
    assert WebLink(text="the API reference", url=site.url("/guide/api.html")) in page.links
    assert WebLink(text="more examples", url="https://example.org/more") in page.links
    assert got.text.startswith(f"{page.final_url}  type=text/html  size=")
    assert f"links ({len(page.links)}):" in got.text


def test_fetch_counts_what_it_cut_and_says_where_it_was_sent(box: Toolbox, site: Site) -> None:
    site.routes["/long.txt"] = body("word " * 30_000, "text/plain")
    links = "".join(f'<li><a href="/p{i}">page {i}</a></li>' for i in range(MAX_LINKS + 20))
    site.routes["/links"] = body(f"<html><body><p>Index.</p><ul>{links}</ul></body></html>",
                                 "text/html")
    site.routes["/old"] = redirect("/long.txt", 301)
    long = box.invoke("web_fetch", {"url": site.url("/old")}).data
    assert isinstance(long, WebPage) and long.content == "text"
    assert (len(long.text), long.text_chars) == (MAX_READ_CHARS, 149_999)
    assert (long.url, long.final_url) == (site.url("/old"), site.url("/long.txt"))
    assert long.redirects == [site.url("/old")]
    many = box.invoke("web_fetch", {"url": site.url("/links")}).data
    assert isinstance(many, WebPage)
    assert (len(many.links), many.more_links) == (MAX_LINKS, 20)
    assert many.links[0] == WebLink(text="page 0", url=site.url("/p0"))


def test_fetch_of_binary_content_and_json(box: Toolbox, site: Site) -> None:
    site.routes["/blob"] = body(bytes(range(256)) * 40, "application/octet-stream")
    site.routes["/api"] = body('{"name":"loki"}', "application/json")
    blob = box.invoke("web_fetch", {"url": site.url("/blob")})
    assert isinstance(blob.data, WebPage)
    assert (blob.data.content, blob.data.text, blob.data.size) == ("binary", "", 10240)
    assert blob.text.endswith("binary content, not shown; web_image reads images, web_table "
                              "reads data tables (CSV, Parquet, JSON, XLSX)")
    api = box.invoke("web_fetch", {"url": site.url("/api")}).data
    assert isinstance(api, WebPage)
    assert (api.content, api.text) == ("json", '{\n  "name": "loki"\n}')


def test_table_answers_its_preview_and_what_it_saved(box: Toolbox, site: Site,
                                                     root: Path) -> None:
    site.routes["/cities.csv"] = body(CSV, "text/csv")
    got = box.invoke("web_table", {"url": site.url("/cities.csv")})
    table = got.data
    assert isinstance(table, WebTable) and isinstance(table.table, TableRead)
    assert (table.url, table.status, table.content_type) == (site.url("/cities.csv"), 200,
                                                             "text/csv")
    assert table.table.path == site.url("/cities.csv") and table.saved is None
    assert table.table.rows == [["Oslo", 709000], ["Bergen", 291000], ["Tromso", 78000]]
    assert (table.table.row_count, table.table.dtypes) == (3, ["String", "Int64"])
    data = parquet_bytes()
    site.routes["/t.parquet"] = body(data, "application/vnd.apache.parquet")
    saved = box.invoke("web_table", {"url": site.url("/t.parquet"), "save": "t.parquet"})
    assert isinstance(saved.data, WebTable)
    assert saved.data.saved == FileWritten(path="t.parquet", created=True, bytes=len(data))
    assert saved.data.table.format == "parquet" and saved.changed == ("t.parquet",)
    assert saved.text.endswith(f"\ncreated t.parquet ({len(data)} bytes)")
