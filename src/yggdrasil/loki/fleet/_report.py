"""``write_report``: a fleet run's output folder as one self-contained HTML page.

The page (``out/report.html`` by default) carries everything it shows, Plotly's script
included, so it opens from a ``file://`` URL with no network. Everything from the run is
escaped (Jinja's autoescape for the page, HTML-escaped labels for the charts, Plotly's
own ``<``-escaping for the chart data) and a content security policy lets only the
page's own scripts run. Its size is bounded: transcripts and diffs share a budget of
characters, so each task's share shrinks as tasks grow (a cut says so and names the
transcript file), and at most ``MAX_EMBEDDED`` tasks' conversations are embedded.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from importlib import resources
from pathlib import Path
from typing import Any

from ._report_data import OUTCOMES, RunReport, TaskRow, read_run
from ._report_talk import Talk, read_talk
from ._store import write_atomic

__all__ = ["REPORT", "render_report", "write_report"]

REPORT = "report.html"
TEXT_BUDGET = 4_000_000  # characters of transcripts and diffs in one page, all tasks
TASK_MOST = 160_000  # at most this much per task however few they are
TASK_LEAST = 4_000  # at least this much per task however many (1,000 tasks: ~6 MB)
NOT_SHOWN = "\u2014"  # a dash: a value the run did not record (a failed task's steps)
MAX_EMBEDDED = 2_000  # tasks whose conversations the page holds (unsuccessful ones first)
PAGE_ROWS = 100  # rows of the table of tasks drawn at a time (the page holds them all as data)
MISSING = "the HTML report needs plotly and jinja2: pip install 'yggdrasil-loki[report]'"


def write_report(out: str | os.PathLike[str], path: str | os.PathLike[str] | None = None, *,
                 price_in: float | None = None, price_out: float | None = None) -> Path:
    """Write the report of the run in ``out`` to ``path`` (default ``out/report.html``).

    ``price_in``/``price_out``: dollars per million input/output tokens, for the costs.
    Raises FileNotFoundError when ``out`` holds no run, RuntimeError without the
    ``report`` extra. The page is written whole (a temporary file, then renamed).
    """
    report = read_run(out, price_in=price_in, price_out=price_out)
    page = render_report(report)
    target = Path(path) if path is not None else report.out / REPORT
    write_atomic(target, page.encode("utf-8"))
    return target


def render_report(report: RunReport) -> str:
    """The page, as text."""
    try:
        import jinja2
        from markupsafe import Markup
        from plotly.offline import get_plotlyjs

        from ._report_charts import COLORS, charts
    except ImportError as exc:
        raise RuntimeError(f"{MISSING} ({exc})") from exc
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(number=_number, secs=_secs, money=_money, pct=_pct)
    template = env.from_string(
        resources.files(__package__).joinpath("report.html.j2").read_text("utf-8"))
    specs = charts(report)
    figures = _safe_json(json.dumps(specs, separators=(",", ":"), allow_nan=False))
    embedded = min(len(report.tasks), MAX_EMBEDDED)
    share = max(TASK_LEAST, min(TASK_MOST, TEXT_BUDGET // max(embedded, 1)))
    tasks = _tasks(report, share)
    return template.render(
        report=report, figures=figures, names=list(specs), colors=COLORS, tasks=tasks,
        rows=_safe_json(json.dumps(_columns(tasks), separators=(",", ":"), allow_nan=False)),
        page_rows=PAGE_ROWS,
        plotly=Markup(_safe_script(get_plotlyjs())),
        nonce=secrets.token_urlsafe(18), share=share,
        not_embedded=len(report.tasks) - embedded,
        made=time.strftime("%Y-%m-%d %H:%M:%S %Z"), stats=_stats(report),
        wall=_wall(report), anchors={t.id: n for n, t in enumerate(report.tasks)})


def _tasks(report: RunReport, share: int) -> list[dict[str, Any]]:
    """Each task; the ``MAX_EMBEDDED`` chosen (unsuccessful ones first) with their
    conversation and diff cut to their ``share`` of the budget."""
    chosen = {id(t) for t in _embedded(report)}
    shown = []
    for n, task in enumerate(report.tasks):
        item: dict[str, Any] = {"n": n, "task": task, "talk": None}
        if id(task) in chosen:
            diff_share = share // 3
            patch = task.patch[:diff_share]
            talk: Talk = read_talk(report.out, task.transcript, task.id, share - len(patch))
            each = max(diff_share // max(len(task.checkpoint_diffs), 1), 400)
            item.update(talk=talk, patch_lines=patch.splitlines(),
                        patch_cut=len(task.patch) - len(patch),
                        verify_output=task.verify_output[:diff_share],
                        checkpoint_lines={n: d[:each].splitlines()
                                          for n, d in task.checkpoint_diffs.items()})
        shown.append(item)
    return shown


def _columns(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Every row of the table of tasks as columns for the page's script, which draws a
    page of them at a time and filters them all: each text (repositories, reasons) is
    stored once and named by its index; ``anchor`` is the task's conversation (-1: none)."""
    texts: dict[str, int] = {}
    columns: dict[str, Any] = {name: [] for name in (
        "id", "repo", "outcome", "steps", "tokens", "seconds", "attempts", "reason", "shown",
        "anchor")}
    outcomes = {name: n for n, name in enumerate(OUTCOMES)}
    for item in tasks:
        t: TaskRow = item["task"]
        columns["id"].append(t.id)
        columns["repo"].append(texts.setdefault(t.repo, len(texts)))
        columns["outcome"].append(outcomes[t.outcome])
        columns["steps"].append(t.steps)
        columns["tokens"].append(t.tokens)
        columns["seconds"].append(None if t.seconds is None else round(t.seconds, 3))
        columns["attempts"].append(len(t.attempts))
        columns["reason"].append(texts.setdefault(t.reason, len(texts)))
        columns["shown"].append(texts.setdefault(t.kind or t.reason, len(texts)))
        columns["anchor"].append(item["n"] if item["talk"] is not None else -1)
    return {**columns, "texts": list(texts), "outcomes": list(OUTCOMES), "page": PAGE_ROWS}


def _embedded(report: RunReport) -> list[TaskRow]:
    rank = {"failed": 0, "not verified": 1}
    return sorted(report.tasks, key=lambda t: rank.get(t.outcome, 2))[:MAX_EMBEDDED]


def _stats(report: RunReport) -> list[tuple[str, list[str]]]:
    """(metric, [median, p90, max, total]) for the summary table, formatted."""
    shows = {"seconds": _secs, "steps": _number, "tokens": _number, "cost": _money}
    return [(label, [shows[name](v) for v in values])
            for name, label, values in report.stats()]


def _wall(report: RunReport) -> float | None:
    """Seconds from the first attempt's start to the last one's end (None: not recorded)."""
    timed = [a for t in report.tasks for a in t.attempts if a.timed]
    if not timed:
        return None
    return max(a.ended_at or 0.0 for a in timed) - min(a.started_at or 0.0 for a in timed)


def _safe_json(text: str) -> Any:
    """Figure JSON for a ``<script type=application/json>`` block: no ``<`` at all (Plotly
    escapes it already; this holds whatever it does)."""
    from markupsafe import Markup

    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e"))


def _safe_script(code: str) -> str:
    return code.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def _number(value: Any) -> str:
    if value is None:
        return NOT_SHOWN
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def _secs(value: float | None) -> str:
    if value is None:
        return NOT_SHOWN
    if value < 60:
        return f"{value:.1f}s"
    minutes, seconds = divmod(int(value), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{seconds:02d}s"


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"

