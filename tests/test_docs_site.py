"""The docs site in a real browser: the site is built with ``mkdocs build`` (once for the
module), served on 127.0.0.1, and every page is laid out by headless Chromium in a window
1280 px wide. No code block may be wider than its column: a reader at that width sees every
comment and argument without a scrollbar. The check is shown to fail on a page made to fail.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from browser import FLAGS, chromium
from conftest import once_per_run

pytest.importorskip("mkdocs")
pytest.importorskip("material")

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 1280

# Loads each page in an iframe as wide as the window, waits for the theme's script, and
# lists every code block whose content is wider than its box (a scrollbar), or whose box
# reaches past its column; the list is written into the page for --dump-dom.
HARNESS = """<!doctype html><html><head><meta charset="utf-8">
<style>body{margin:0} iframe{width:%(width)dpx;height:900px;border:0;display:block}</style>
</head><body><iframe id="frame"></iframe><output id="result"></output>
<script>
const pages = %(pages)s;
const frame = document.getElementById("frame");
const found = [];
function measure(page) {
  const doc = frame.contentDocument;
  const column = doc.querySelector(".md-content__inner") || doc.body;
  const right = column.getBoundingClientRect().right;
  const blocks = doc.querySelectorAll("pre, pre > code");
  for (const block of blocks) {
    const box = block.getBoundingClientRect();
    if (block.scrollWidth > block.clientWidth || box.right > right + 0.5) {
      found.push({page: page, tag: block.tagName.toLowerCase(),
                  scroll: block.scrollWidth, client: block.clientWidth,
                  right: Math.round(box.right), column: Math.round(right),
                  text: block.textContent.slice(0, 80)});
    }
  }
  return blocks.length;
}
let blocks = 0;
async function run() {
  for (const page of pages) {
    await new Promise(done => { frame.onload = done; frame.src = page; });
    await new Promise(done => setTimeout(done, 50));  // the theme's script runs on load
    blocks += measure(page);
  }
  const result = document.getElementById("result");
  result.textContent = JSON.stringify({pages: pages.length, blocks: blocks, found: found});
  result.setAttribute("data-done", "1");
}
run();
</script></body></html>
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site, built from this checkout's docs/ and src/ as CI builds it (once for
    the run: the workers share it)."""
    return once_per_run(tmp_path_factory, "docs-site", build)


def build(out: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-3000:]


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The site over HTTP on 127.0.0.1 (one origin: the harness reads each page's layout)."""
    handler = partial(_Quiet, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def pages_of(site: Path) -> list[str]:
    """Every page of the site, as a path from its root ("/" for the home page)."""
    return sorted("/" + str(page.parent.relative_to(site)) + "/" if page.parent != site else "/"
                  for page in site.rglob("index.html"))


def overflowing(site: Path, base: str, pages: list[str], scratch: Path) -> dict[str, object]:
    """Chromium lays out ``pages`` at 1280 px; what the harness found, as a dict."""
    harness = site / f"__widths-{uuid.uuid4().hex}.html"  # one per call: workers share the site
    harness.write_text(HARNESS % {"width": WIDTH, "pages": json.dumps(pages)})
    scratch.mkdir(parents=True, exist_ok=True)
    command = [chromium(), *[f for f in FLAGS if not f.startswith("--virtual-time-budget")],
               "--virtual-time-budget=600000", f"--window-size={WIDTH},1000",
               "--hide-scrollbars",
               # the theme asks for Google's fonts: nothing leaves this machine
               "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
               f"--user-data-dir={scratch / 'profile'}", "--dump-dom", f"{base}/{harness.name}"]
    # a guard against a hang, not a timing: ~19 s alone, and 300 s were not enough once at
    # a load of 16 (two suites and a 150,000-file index build on the 2 cores)
    done = subprocess.run(command, capture_output=True, text=True, errors="replace",
                          timeout=900, env={**os.environ, "HOME": str(scratch)})
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<output id="result" data-done="1">(.*?)</output>', done.stdout, re.S)
    assert found, f"the harness did not finish: {done.stdout[-2000:]}"
    result: dict[str, object] = json.loads(html.unescape(found.group(1)))
    return result


def test_no_code_block_is_wider_than_its_column_at_1280px(site: Path, served: str,
                                                          tmp_path: Path) -> None:
    pages = pages_of(site)
    assert len(pages) >= 30 and "/reference/tools/" in pages and "/mcp/" in pages
    result = overflowing(site, served, pages, tmp_path)
    assert result["pages"] == len(pages)
    blocks = result["blocks"]
    assert isinstance(blocks, int) and blocks > 300  # the pages' code blocks were measured
    assert result["found"] == [], json.dumps(result["found"], indent=1)[:6000]


def test_the_check_fails_on_a_block_that_scrolls(site: Path, served: str,
                                                 tmp_path: Path) -> None:
    """A page whose code block cannot wrap (one long word, a rule that forbids wrapping) is
    reported; the site's own style wraps the same block on a page of the site."""
    stiff, wraps = "a" * 400, "b" * 400
    name = f"__wide-{uuid.uuid4().hex}.html"  # beside the home page: its links still hold
    (site / name).write_text((site / "index.html").read_text().replace(
        '<article class="md-content__inner md-typeset">',
        '<article class="md-content__inner md-typeset">'
        f'<div class="highlight"><pre><code style="white-space: pre; overflow-wrap: normal"'
        f'>{stiff} # the comment</code></pre></div>'
        f'<div class="highlight"><pre><code>{wraps} # wrapped</code></pre></div>', 1))
    result = overflowing(site, served, [f"/{name}"], tmp_path)
    found = result["found"]
    assert isinstance(found, list) and found
    assert {block["text"] for block in found} == {stiff[:80]}
    assert all(block["page"] == f"/{name}" for block in found)


def test_the_tools_reference_leads_with_what_a_user_calls(site: Path) -> None:
    """One intro, then filesystem_toolbox, Toolbox and Tool in that order; how the module is
    wired is for contributors (Architecture), not on this page."""
    page = (site / "reference" / "tools" / "index.html").read_text()
    headings = re.findall(r'<h2 id="yggdrasil\.loki\.tools\.(\w+)"', page)
    assert headings[:3] == ["filesystem_toolbox", "Toolbox", "Tool"], headings
    article = page.split("<article", 1)[1].split("</article>", 1)[0]
    intro = article.split('<h2 id="yggdrasil.loki.tools.filesystem_toolbox"', 1)[0]
    assert intro.count("<p>") == 1 and "The toolbox</a>" in intro
    assert "only wires" not in article and "Loki tools: the file/shell" not in article
