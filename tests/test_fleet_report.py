"""The report of a fleet run, without a browser: the folder read as data (old and new result
shapes, bad lines, transcript paths that leave the folder), the page's escaping and size,
and `loki report`. test_fleet_report_browser.py loads real pages in headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cli_run import child_env, loki
from fleet_kit import done, make_repo, write_script
from report_kit import PWN_ID, PWN_IMG, PWN_SCRIPT, conversation, hostile_out, result, write_out
from yggdrasil.loki.fleet import _report as report_page
from yggdrasil.loki.fleet import read_run, write_report
from yggdrasil.loki.fleet._report_charts import charts
from yggdrasil.loki.fleet._report_talk import read_talk

# --- the folder as data ------------------------------------------------------------------


def test_outcomes_counts_and_groups_of_an_old_run(tmp_path: Path) -> None:
    """Results as fleets wrote them before attempts were recorded: counts, reasons."""
    out = write_out(tmp_path / "out", [
        result("a", repo="/r/one", usage={"input_tokens": 100, "output_tokens": 10}),
        result("b", repo="/r/one", verified=False, verify_exit=1),
        result("c", repo="/r/two", verified=False, verify_exit=1),
        result("d", verified=False, verify_exit=None,
               verify_output="the patch does not apply: error: corrupt patch"),
        result("e", verified=None, verify_exit=None),
        result("f", status="failed", verified=None, attempts=2,
               reason="attempt 1: timed out after 40s (the task's timeout); the attempt was "
                      "killed; attempt 2: timed out after 40s (the task's timeout); the "
                      "attempt was killed"),
        result("g", status="failed", verified=None, attempts=2,
               reason="attempt 1: x; attempt 2: timed out after 75s (the task's timeout); the "
                      "attempt was killed"),
    ])
    report = read_run(out, price_in=3.0, price_out=15.0)
    assert [t.id for t in report.tasks] == list("abcdefg")
    assert [report.count(o) for o in ("verified", "not verified", "done", "failed")] == [1, 3, 1, 2]
    assert report.verified_rate == 0.25 and report.graded == 4
    groups = {(outcome, kind): sorted(t.id for t in tasks)
              for outcome, kind, tasks in report.groups()}
    assert groups == {
        ("not verified", "verify exit=1"): ["b", "c"],
        ("not verified", "the patch does not apply"): ["d"],
        ("failed", "timed out after Ns (the task's timeout); the attempt was killed"): ["f", "g"]}
    failed = report.tasks[5]
    assert [(a.number, a.ok, a.reason[:9]) for a in failed.attempts] == [
        (1, False, "timed out"), (2, False, "timed out")]
    assert report.tasks[0].cost == pytest.approx((100 * 3 + 10 * 15) / 1e6)
    assert report.tasks[0].repo == "/r/one" and report.tasks[4].repo == "(not recorded)"
    assert not report.timed
    assert [(r.repo, r.tasks, r.verified, r.graded) for r in report.repos()][:2] == [
        ("(not recorded)", 4, 0, 1), ("/r/one", 2, 1, 2)]


def test_replayed_tokens_are_shown_but_cost_nothing(tmp_path: Path) -> None:
    usage = {"input_tokens": 1_000_000, "output_tokens": 0}
    out = write_out(tmp_path / "out", [result("a", usage=usage),
                                       result("b", usage=usage, tokens_replayed=True)])
    report = read_run(out, price_in=2.0)
    assert [t.cost for t in report.tasks] == [2.0, None]
    assert report.total("cost") == 2.0 and report.total("tokens") == 2_000_000
    assert report.replayed == 1


def test_attempts_as_the_fleet_records_them(tmp_path: Path) -> None:
    """Records as Fleet writes them: ``attempt``, ``node``, times, ``reason`` if it failed."""
    records = [{"attempt": 1, "node": "n1", "started_at": 5.0, "ended_at": 6.0,
                "queued_seconds": 0.0, "reason": "worker died"},
               {"attempt": 2, "node": "n1", "started_at": None, "ended_at": 9.0,
                "queued_seconds": 3.0, "reason": "timed out after 4s (the task's timeout)"}]
    out = write_out(tmp_path / "out", [
        result("a", status="failed", verified=None, attempts=records,
               reason="attempt 1: worker died; attempt 2: timed out after 4s (the task's "
                      "timeout)"),
        result("b", attempts=[{}, {}], reason="retried: attempt 1: worker died")])
    report = read_run(out)
    failed, retried = report.tasks
    assert [(a.number, a.ok, a.timed) for a in failed.attempts] == [(1, False, True),
                                                                    (2, False, False)]
    assert failed.kind == "timed out after Ns (the task's timeout)"
    assert [(a.ok, a.reason) for a in retried.attempts] == [(False, "worker died"), (True, "")]
    # a failed task's steps were not recorded: a dash, not 0; its time is its attempts'
    # (the result's own, or, written before it was recorded, the timed attempts')
    assert failed.steps is None and failed.seconds == 1.0
    page = write_report(out).read_text()
    body = page[page.index('<table id="tasks">'):]
    row = body[body.index('data-search="a '):]
    row = row[:row.index("</tr>")]
    assert '<td class="num">\u2014</td><td class="num">0</td><td class="num">1.0s</td>' in row, row
    never = write_out(tmp_path / "never", [result("n", status="failed", verified=None,
                                                  attempts=[{"attempt": 1, "reason": "x"}],
                                                  steps=0, seconds=0.0)])
    assert read_run(never).tasks[0].seconds is None  # never timed: a dash, not 0.0 s


def test_attempts_with_nodes_and_times_are_read(tmp_path: Path) -> None:
    attempts = [{"node": "n1", "started_at": 10.0, "ended_at": 12.5, "queued_seconds": 1.0,
                 "reason": "worker died"},
                {"node": "n2", "started_at": 13.0, "ended_at": 20.0}]
    out = write_out(tmp_path / "out", [result("a", attempts=attempts),
                                       result("b", node="n1", started_at=1.0, ended_at=2.0)])
    report = read_run(out)
    first, second = report.tasks[0].attempts
    assert (first.node, first.ok, first.reason, first.queued_seconds) == ("n1", False,
                                                                          "worker died", 1.0)
    assert (second.node, second.ok, second.ended_at) == ("n2", True, 20.0)
    assert report.tasks[1].attempts[0].timed and report.timed
    assert "timeline" in charts(report)


def test_lines_that_are_not_results_are_counted_and_skipped(tmp_path: Path) -> None:
    out = write_out(tmp_path / "out", [result("a"), result("a", verified=False, verify_exit=2)],
                    extra_lines=("not json", "[1, 2]", '{"id": 5, "status": "done"}',
                                 '{"id": "x"}', "[" * 100_000,
                                 json.dumps(result("z", usage="lots", steps=-4, seconds="x",
                                                   attempts="many", files_changed=[1, "f"]))))
    report = read_run(out)
    assert report.skipped == 5
    assert [t.id for t in report.tasks] == ["a", "z"]
    assert report.tasks[0].outcome == "not verified"  # the later line of an id wins
    odd = report.tasks[1]
    assert (odd.steps, odd.seconds, odd.tokens, len(odd.attempts), odd.files_changed) == (
        0, 0.0, 0, 1, ["f"])


def test_a_folder_without_results_and_bad_prices_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"results\.jsonl does not exist"):
        read_run(tmp_path)
    write_out(tmp_path, [result("a")])
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="price_in is dollars per million tokens"):
            read_run(tmp_path, price_in=bad)


def test_a_transcript_is_read_only_inside_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"type": "start", "task": "SECRET"}) + "\n")
    (out / "link").symlink_to(secret)
    for name in ("../secret.jsonl", str(secret), "link", "missing.jsonl", "."):
        talk = read_talk(out, name, "t", 10_000)
        assert talk.missing and not talk.messages, name
    (out / "t").mkdir()
    (out / "t" / "transcript.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in conversation("do it", ("hm", "run", {}, "ok"))))
    talk = read_talk(out, "", "t", 10_000)  # no path recorded: the usual place
    assert [m.role for m in talk.messages] == ["task", "assistant", "tool", "answer"]


def test_a_tool_answer_is_titled_from_its_typed_result(tmp_path: Path) -> None:
    from yggdrasil.loki import Loki
    from yggdrasil.loki.engines.scripted import ScriptedEngine

    root, out = tmp_path / "root", tmp_path / "out"
    root.mkdir()
    (out / "t").mkdir(parents=True)
    engine = ScriptedEngine([
        {"tool": "run", "args": {"command": "echo boom >&2; exit 3"}},
        {"tool": "read_file", "args": {"path": "../outside.txt"}},
        {"tool": "list_dir", "args": {}},
        {"done": True, "answer": "done"}])
    Loki(engine).act("try things", root=root, transcript=out / "t" / "transcript.jsonl")
    talk = read_talk(out, "", "t", 10_000)
    tools = [(m.title, m.failed) for m in talk.messages if m.role == "tool"]
    assert tools == [("run said (exit 3)", False), ("read_file failed (path)", True),
                     ("list_dir said", False)]


def test_a_long_transcript_is_cut_to_its_budget(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "t").mkdir(parents=True)
    steps = [("think " * 50, "read_file", {"path": "a" * 500}, "line\n" * 3000)] * 200
    (out / "t" / "transcript.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in conversation("task", *steps)))
    talk = read_talk(out, "t/transcript.jsonl", "t", 20_000)
    shown = sum(len(m.text) + len(m.call) for m in talk.messages)
    assert shown <= 20_000 + 6_000 and talk.more
    assert any(m.cut for m in talk.messages)


# --- the page ----------------------------------------------------------------------------


class Elements(HTMLParser):
    """Every element of a page: (tag, attributes), and the text of its scripts."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag == "script":
            self.scripts.append("")

    def handle_data(self, data: str) -> None:
        if self.lasttag == "script" and self.scripts:
            self.scripts[-1] += data


def test_everything_from_the_run_is_escaped(tmp_path: Path) -> None:
    page = write_report(hostile_out(tmp_path / "out")).read_text()
    found = Elements(page)
    tags = {tag for tag, _ in found.elements}
    assert "img" not in tags and "b" not in tags
    handlers = [(tag, name) for tag, attrs in found.elements for name in attrs
                if name.startswith("on")]
    assert handlers == []
    scripts = [attrs for tag, attrs in found.elements if tag == "script"]
    assert len(scripts) == 4  # plotly, the figures, the table's rows, the page's own: no other
    nonce = scripts[0]["nonce"]
    assert nonce and all(s["nonce"] == nonce for s in scripts)
    assert "&lt;/script&gt;&lt;script&gt;document.body" in page  # shown as text
    assert PWN_ID not in page and PWN_IMG not in page and PWN_SCRIPT not in page
    assert "data-pwned" not in found.scripts[3]
    rows = json.loads(found.scripts[2])  # the table's rows: data the script shows as text
    assert "<" not in found.scripts[2] and ">" not in found.scripts[2]
    assert any("<b>bold</b>" in i for i in rows["id"]) and any(
        PWN_SCRIPT in t or PWN_IMG in t for t in rows["texts"]), rows
    figures = json.loads(found.scripts[1])
    labels = json.dumps(figures)  # Plotly reads <b>, <a href>... in labels: none from the run
    assert "<img" not in labels and "<b>bold" not in labels and "&lt;img src=x" in labels
    assert "\\u003c" in found.scripts[1] and set(figures) >= {"outcomes", "timeline"}
    policy = re.search(r'Content-Security-Policy" content="([^"]*)"', page)
    assert policy and f"script-src 'nonce-{nonce}'" in policy.group(1)


def test_the_page_of_a_thousand_tasks_stays_small(tmp_path: Path) -> None:
    steps = [("t" * 300, "run", {"command": "x" * 200}, "o" * 3000)] * 12
    talk = conversation("p" * 2000, *steps)
    results = [result(f"task-{i}", patch="+" + "d" * 40_000 + "\n") for i in range(1000)]
    out = write_out(tmp_path / "out", results, {f"task-{i}": talk for i in range(1000)})
    page = write_report(out)
    size = page.stat().st_size
    assert size < 16_000_000, size  # plotly.js (~4.8 MB) and ~6 KB of text per task
    text = page.read_text()
    assert text.count('<details class="task"') == 1000
    assert "characters of the diff not shown" in text


def test_past_the_cap_unsuccessful_tasks_keep_their_conversations(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_page, "MAX_EMBEDDED", 3)
    results = [result(f"ok-{i}") for i in range(4)] + [
        result("bad-1", status="failed", verified=None, reason="attempt 1: x"),
        result("bad-2", verified=False, verify_exit=1)]
    page = write_report(write_out(tmp_path / "out", results)).read_text()
    opened = re.findall(r'<details class="task" id="t\d+">\s*<summary><span class="id">([^<]*)<',
                        page)
    assert sorted(opened) == ["bad-1", "bad-2", "ok-0"]
    assert "3 tasks' conversations are not in this page" in page
    assert page.count("<tr data-outcome=") == 6  # every task stays in the table


def test_plotly_accepts_every_chart(tmp_path: Path) -> None:
    go = pytest.importorskip("plotly.graph_objects")
    report = read_run(hostile_out(tmp_path / "out"), price_in=1.0, price_out=2.0)
    figures = charts(report)
    assert set(figures) == {"outcomes", "repos", "seconds", "steps", "tokens", "cost",
                            "timeline"}
    for spec in figures.values():
        go.Figure(spec)  # raises on a property plotly does not know


def test_write_report_replaces_the_page_whole(tmp_path: Path) -> None:
    out = write_out(tmp_path / "out", [result("a")])
    (out / "report.html").write_text("old")
    path = write_report(out, tmp_path / "elsewhere.html")
    assert path == tmp_path / "elsewhere.html" and (out / "report.html").read_text() == "old"
    assert write_report(out).read_text().startswith("<!doctype html>")
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "results.jsonl"]


# --- loki report -------------------------------------------------------------------------


def test_loki_report_prints_a_summary_and_writes_the_page(tmp_path: Path) -> None:
    out = write_out(tmp_path / "out", [
        result("[red]rich[/red]", repo="/r/[bold]x[/bold]",
               usage={"input_tokens": 1000, "output_tokens": 100}),
        result("b", verified=False, verify_exit=1, seconds=3.0),
        result("c", status="failed", verified=None, reason="attempt 1: boom [link=x]y[/link]")])
    shown = loki(tmp_path, "report", str(out), "--price-in", "3", "--price-out", "15")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "verified 1/2 (50.0%) · not verified 1 · done 0 · failed 1" in text
    assert "[red]rich[/red]" not in text  # the failures table names only failed tasks
    assert "/r/[bold]x[/bold]" in text and "boom [link=x]y[/link]" in text  # text, not markup
    assert "$0.0045" in text  # 1000 * 3 / 1e6 + 100 * 15 / 1e6
    assert f"report: {out / 'report.html'}" in text
    page = (out / "report.html").read_text()
    assert "[red]rich[/red]" in page and 'id="verified-rate"' in page


ESC = "\x1b]0;owned\x07\x1b[2J\x1b[31m"  # retitle the window, clear the screen, recolour


def test_loki_report_prints_every_field_of_the_run_folder_escaped(tmp_path: Path) -> None:
    out = write_out(tmp_path / f"out{ESC}", [
        result(f"t{ESC}1", status="failed", verified=None, repo=f"/r/{ESC}x\u202eevil",
               reason=f"attempt 1: boom{ESC}\nfake line\rover"),
        result(f"t{ESC}2", repo=f"/r/{ESC}x\u202eevil", verified=False, verify_exit=1)])
    shown = loki(tmp_path, "report", str(out), "--no-html")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout + shown.stderr
    for raw in ("\x1b", "\x07", "\u202e", "\r"):
        assert raw not in text, f"{raw!r} reached the terminal"
    assert "t\\x1b]0;owned\\x07" in text  # the failed task's id, escaped
    assert "\\u202eevil" in text  # the repository, escaped
    assert "\nfake line" not in text  # no line of the summary is made up by a field


def test_loki_report_without_the_page_or_the_extra(tmp_path: Path) -> None:
    out = write_out(tmp_path / "out", [result("a")])
    shown = loki(tmp_path, "report", str(out), "--no-html")
    assert shown.returncode == 0 and "verified 1/1 (100.0%)" in shown.stdout
    assert not (out / "report.html").exists()
    fake = tmp_path / "no-plotly" / "plotly"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('plotly is not installed here')\n")
    env = child_env(tmp_path)
    env["PYTHONPATH"] = f"{fake.parent}:{env['PYTHONPATH']}"
    missing = subprocess.run([sys.executable, "-m", "yggdrasil.loki", "report", str(out)],
                             capture_output=True, text=True, env=env, timeout=60)
    assert missing.returncode == 1
    assert "pip install 'yggdrasil-loki[report]'" in missing.stderr
    assert "--no-html" in missing.stderr and "verified 1/1" in missing.stdout
    assert not (out / "report.html").exists() and not list(out.glob(".*.tmp"))


def test_loki_report_refuses_a_folder_without_a_run(tmp_path: Path) -> None:
    shown = loki(tmp_path, "report", str(tmp_path / "nothing"))
    assert shown.returncode == 2
    assert "results.jsonl does not exist: give the --out folder of a fleet run" in shown.stderr
    bad = loki(tmp_path, "report", str(write_out(tmp_path / "out", [result("a")])),
               "--price-in", "-1")
    assert bad.returncode == 2 and "price_in is dollars per million tokens" in bad.stderr


def test_a_fleet_run_without_the_report_extra_still_succeeds(tmp_path: Path) -> None:
    make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    write_script(tmp_path / "scripts", "one", done())
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "one", "repo": "repo", "prompt": "x"}) + "\n")
    fake = tmp_path / "no-plotly" / "plotly"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('plotly is not installed here')\n")
    env = child_env(tmp_path)
    env["PYTHONPATH"] = f"{fake.parent}:{env['PYTHONPATH']}"
    ran = subprocess.run(
        [sys.executable, "-m", "yggdrasil.loki", "fleet", str(tasks), "--out",
         str(tmp_path / "out"), "--engine", "scripted", "--model",
         str(tmp_path / "scripts" / "{id}.jsonl"), "--cache", str(tmp_path / "cache")],
        capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "out" / "preds.json").is_file()
    assert not (tmp_path / "out" / "report.html").exists() and "report.html" not in ran.stdout


def test_past_the_bar_cap_back_to_back_attempts_of_a_lane_are_one_bar(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two lanes of 6 back-to-back attempts each, one of them retried after a failure, and
    a late attempt after a long pause: merged per lane and outcome, the counts kept, the
    failed attempt and the late one apart."""
    from yggdrasil.loki.fleet import _report_charts

    monkeypatch.setattr(_report_charts, "MAX_BARS", 5)
    results = []
    for lane in range(2):
        for k in range(6):
            start = 100.0 + 10 * k
            attempts = [{"node": "n", "started_at": start, "ended_at": start + 9.9}]
            if lane == 1 and k == 2:  # failed once, then done, both in this lane's slot
                attempts = [{"node": "n", "started_at": start, "ended_at": start + 4,
                             "reason": "worker died"},
                            {"node": "n", "started_at": start + 4.05, "ended_at": start + 9.9}]
            results.append(result(f"l{lane}-{k}", attempts=attempts))
    results.append(result("late", attempts=[{"node": "n", "started_at": 5000.0,
                                             "ended_at": 5010.0}]))
    figure = charts(read_run(write_out(tmp_path / "out", results)))["timeline"]
    bars = {trace["name"]: list(zip(trace["y"], trace["base"], trace["x"], trace["hovertext"],
                                    strict=True)) for trace in figure["data"]}
    assert "14 attempts as 4 bars" in figure["layout"]["title"]["text"]
    verified = sorted(bars["verified"], key=lambda b: (b[0], b[1]))
    counts = [int(re.search(r"<b>(\d+) attempt", b[3]).group(1)) for b in verified]
    assert sorted(counts) == [1, 6, 6]  # every done attempt: a bar per lane, the late one
    assert any(b[1] > 4000 for b in verified)  # the late one: not joined across the pause
    assert [int(re.search(r"<b>(\d+) attempt", b[3]).group(1))
            for b in bars["failed attempt"]] == [1]
