"""The report in a real browser: headless Chromium loads the page a real 20-task fleet run
wrote, from its file:// URL, with no console message; its charts draw; the DOM holds the
run's numbers; hostile text stays text. The checks are shown to fail on pages made to fail.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from browser import colours, load, pixels_near
from report_kit import OUTCOMES_WANTED, hostile_out, result, run_twenty, write_out
from yggdrasil.loki.fleet import write_report
from yggdrasil.loki.fleet._report_charts import COLORS

pytest.importorskip("plotly")


@pytest.fixture(scope="module")
def twenty(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output folder of a real 20-task run (local backend, scripted engine)."""
    return run_twenty(tmp_path_factory.mktemp("twenty"))


def text_of(dom: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>([^<]*)<', dom)
    assert found, element_id
    return found.group(1).strip()


def drawn(dom: str, name: str) -> bool:
    """Plotly drew the chart: its div holds Plotly's SVG."""
    start = dom.find(f'id="chart-{name}"')
    return start >= 0 and 'class="main-svg"' in dom[start:start + 4000]


def test_the_report_of_a_twenty_task_run_loads_clean_and_draws(twenty: Path,
                                                                tmp_path: Path) -> None:
    page = twenty / "report.html"  # written by the fleet at the end of its run
    assert page.is_file()
    results = [json.loads(line) for line in (twenty / "results.jsonl").read_text().splitlines()]
    loaded = load(page, tmp_path)
    assert loaded.console == []
    dom = loaded.dom
    # the numbers of the run
    assert text_of(dom, "task-count") == "20"
    assert text_of(dom, "verified-count") == str(OUTCOMES_WANTED["verified"])
    graded = OUTCOMES_WANTED["verified"] + OUTCOMES_WANTED["not verified"]
    assert text_of(dom, "graded-count") == str(graded)
    assert text_of(dom, "failed-count") == str(OUTCOMES_WANTED["failed"])
    assert text_of(dom, "not-verified-count") == str(OUTCOMES_WANTED["not verified"])
    rate = 100 * OUTCOMES_WANTED["verified"] / graded
    assert f"{rate:.1f}%" in dom
    tokens = sum(r["usage"].get("input_tokens", 0) + r["usage"].get("output_tokens", 0)
                 for r in results)
    assert tokens > 0 and text_of(dom, "token-count") == f"{tokens:,}"
    assert text_of(dom, "shown-count") == "20 of 20 shown"  # the page's own script ran
    assert dom.count('<details class="task"') == 20
    assert dom.count("<tr data-outcome=") == 20
    for repo in ("alpha", "beta", "gamma"):
        assert f"/src/{repo}</td>" in dom
    # the charts: drawn by plotly, with the counts on the bars; the timeline when the
    # results say when and where each attempt ran
    timed = any(isinstance(a, dict) and a.get("started_at") is not None
                for r in results if isinstance(r.get("attempts"), list) for a in r["attempts"])
    names = ["outcomes", "repos", "seconds", "steps", "tokens", *(["timeline"] if timed else [])]
    assert all(drawn(dom, name) for name in names), [n for n in names if not drawn(dom, n)]
    assert f'data-charts-drawn="{len(names)}"' in dom
    assert "verified 12" in dom and "failed 2" in dom  # the outcome bar's labels, in its SVG
    assert timed or 'id="no-timing"' in dom
    # hostile text in task-00's transcript stayed text
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]
    assert "&lt;/script&gt;&lt;script&gt;document.body.setAttribute" in dom
    # the screenshot: a drawn page, the outcome bar's colour over a wide area
    distinct, unlike = colours(loaded.screenshot)
    assert distinct > 200 and unlike > 0.1, (distinct, unlike)
    assert pixels_near(loaded.screenshot, COLORS["verified"]) > 20_000


def test_a_hostile_run_renders_as_text(tmp_path: Path) -> None:
    page = write_report(hostile_out(tmp_path / "out"))
    loaded = load(page, tmp_path / "browser", screenshot=False)
    assert loaded.console == []  # nothing ran that the policy refused either
    body = loaded.dom.split("<body", 1)[1].split(">", 1)[0]
    assert "data-pwned" not in body
    assert "&lt;b&gt;bold&lt;/b&gt;&lt;img src=y" in loaded.dom
    assert drawn(loaded.dom, "timeline") and drawn(loaded.dom, "repos")
    assert "<img" not in loaded.dom.split('id="transcripts"', 1)[1]


def test_the_checks_fail_on_broken_pages(tmp_path: Path) -> None:
    """A page with a script error is caught by the console check; a blank page by the
    screenshot check; a page whose charts were not drawn by the DOM check."""
    broken = tmp_path / "broken.html"
    broken.write_text("<!doctype html><html><body><p>hello</p>"
                      "<script>console.error('boom'); missing_function();</script></body></html>")
    loaded = load(broken, tmp_path / "b1", screenshot=False)
    assert any("Uncaught ReferenceError: missing_function" in line for line in loaded.console)
    assert any("boom" in line for line in loaded.console)
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><html><body></body></html>")
    distinct, unlike = colours(load(blank, tmp_path / "b2", dom=False).screenshot)
    assert distinct < 5 and unlike < 0.01
    undrawn = tmp_path / "undrawn.html"
    undrawn.write_text('<!doctype html><html><body><div id="chart-outcomes"></div></body></html>')
    assert not drawn(load(undrawn, tmp_path / "b3", screenshot=False).dom, "outcomes")


# Drives the page as a user would: pages forward, filters by text and by outcome; then
# writes what the table showed after each into the body (a script with the page's nonce,
# after the page's own, since Chromium's --dump-dom cannot click).
DRIVE = """<script nonce="%s">
(function () {
  var seen = {};
  function look(name) {
    var rows = document.querySelectorAll("#tasks tbody tr");
    seen[name] = {rows: rows.length, first: rows.length ? rows[0].cells[0].textContent : "",
                  last: rows.length ? rows[rows.length - 1].cells[0].textContent : "",
                  ids: Array.prototype.map.call(rows, function (r) { return r.cells[0].textContent; }),
                  info: document.getElementById("page-info").textContent,
                  shown: document.getElementById("shown-count").textContent,
                  next: document.getElementById("page-next").disabled};
  }
  var text = document.getElementById("filter-text"), outcome = document.getElementById("filter-outcome");
  look("start");
  document.getElementById("page-next").click();
  document.getElementById("page-next").click();
  look("third");
  text.value = "TASK-24"; text.dispatchEvent(new Event("input"));
  look("text");
  text.value = ""; outcome.value = "failed"; outcome.dispatchEvent(new Event("change"));
  look("failed");
  outcome.value = ""; text.value = "boom-207"; text.dispatchEvent(new Event("input"));
  look("reason");
  document.body.setAttribute("data-seen", JSON.stringify(seen));
})();
</script></body>"""


def test_the_paged_table_shows_and_filters_rows_past_the_first_page(tmp_path: Path) -> None:
    results = [result(f"task-{i:03d}", repo=f"/src/r{i % 3}",
                      **({"status": "failed", "verified": None,
                          "reason": f"attempt 1: boom-{i}"} if i % 50 == 7 else {}))
               for i in range(250)]
    page = write_report(write_out(tmp_path / "out", results))
    text = page.read_text()
    assert text.count("<tr data-outcome=") == 100  # the first page, for a reader without scripts
    nonce = re.search(r'<script nonce="([^"]+)"', text)
    assert nonce
    driven = tmp_path / "driven.html"
    driven.write_text(text.replace("</body>", DRIVE % nonce.group(1), 1))
    loaded = load(driven, tmp_path / "browser", screenshot=False)
    assert loaded.console == []
    found = re.search(r'<body[^>]*data-seen="([^"]*)"', loaded.dom)
    assert found, loaded.dom[-3000:]
    seen = json.loads(html.unescape(found.group(1)))
    start = seen["start"]
    assert (start["rows"], start["first"], start["last"]) == (100, "task-000", "task-099")
    assert start["info"] == "rows 1\u2013100 of 250 (page 1 of 3)"
    assert start["shown"] == "250 of 250 shown" and start["next"] is False
    third = seen["third"]
    assert (third["rows"], third["first"], third["last"]) == (50, "task-200", "task-249")
    assert third["info"] == "rows 201\u2013250 of 250 (page 3 of 3)" and third["next"] is True
    assert seen["text"]["ids"] == [f"task-24{i}" for i in range(10)]  # any case, from page 1
    assert seen["text"]["shown"] == "10 of 250 shown" and seen["text"]["info"] == "rows 1\u201310 of 10"
    assert seen["failed"]["ids"] == ["task-007", "task-057", "task-107", "task-157", "task-207"]
    assert seen["reason"]["ids"] == ["task-207"]  # found by its reason, far past the first page
    assert 'data-ready-ms="' in loaded.dom
