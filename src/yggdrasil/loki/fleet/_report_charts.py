"""The report's charts, as Plotly figure specs (plain ``{"data", "layout"}`` dicts that
plotly.js draws): outcomes, outcomes per repository, distributions of time, steps,
tokens and cost, and a timeline of attempts per node.

Plain dicts rather than ``plotly.graph_objects``: those validate and deep-copy every
property, which took seconds for a handful of charts (the tests check the specs with
``go.Figure``). Plotly renders a few tags in labels (``<b>``, ``<br>``, ``<a href>``);
every label that comes from the run (task ids, node and repository names) is
HTML-escaped first so that it shows as text.
"""

from __future__ import annotations

import html
import math
from typing import Any

from ._report_data import OUTCOMES, RunReport, TaskRow

__all__ = ["COLORS", "charts"]

COLORS = {"verified": "#2f9e63", "not verified": "#e3a21a", "done": "#4c78c8",
          "failed": "#d64545", "failed attempt": "#f0a3a3"}
MAX_REPOS = 25  # bars in the per-repository chart (the table below it lists them all)
MAX_HEIGHT = 2400  # pixels of the timeline, however many nodes and lanes (rows get thinner)
MAX_BARS = 2_000  # attempts drawn one bar each; past it, back-to-back ones are merged
_FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"


Figure = dict[str, Any]


def charts(report: RunReport) -> dict[str, Figure]:
    """Name -> figure, in the order the page shows them (empty distributions left out)."""
    figures = {"outcomes": _outcomes(report)}
    if len(report.repos()) > 1:
        figures["repos"] = _repos(report)
    for name, title, value in (
            ("seconds", "time per task (s)", lambda t: t.seconds),
            ("steps", "steps per task", lambda t: t.steps),
            ("tokens", "tokens per task (in + out)", lambda t: t.tokens),
            ("cost", "cost per task ($)", lambda t: t.cost)):
        if name == "cost" and not report.priced:
            continue
        # a failed task has no result: no time, steps or tokens to count
        finished = [t for t in report.tasks if t.outcome != "failed"]
        figure = _histogram(finished, title, value, whole=name == "steps")
        if figure["data"]:  # e.g. no cost when every task replayed recorded tokens
            figures[name] = figure
    if report.timed:
        figures["timeline"] = _timeline(report)
    return figures


def _figure(traces: list[dict[str, Any]], title: str, height: int = 300,
            **more: Any) -> Figure:
    axis = {"gridcolor": "#ebeff4", "zerolinecolor": "#d5dbe3", "linecolor": "#d5dbe3",
            "automargin": True}
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0.01, "font": {"size": 15}}, "height": height,
        "margin": {"l": 50, "r": 20, "t": 46, "b": 40}, "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff", "font": {"family": _FONT, "size": 12, "color": "#333"},
        "legend": {"orientation": "h", "x": 1, "y": 1.0, "xanchor": "right", "yanchor": "bottom",
                   "traceorder": "normal"}, "hoverlabel": {"align": "left"}}
    for key, value in more.items():
        layout[key] = {**axis, **value} if key in ("xaxis", "yaxis") else value
    layout.setdefault("xaxis", axis)
    layout.setdefault("yaxis", axis)
    return {"data": traces, "layout": layout}


def _bar(**trace: Any) -> dict[str, Any]:
    return {"type": "bar", "orientation": "h", **trace}


def _outcomes(report: RunReport) -> Figure:
    traces = [_bar(y=["tasks"], x=[n], name=outcome, marker={"color": COLORS[outcome]},
                   text=[f"{outcome} {n}"], textposition="inside", insidetextanchor="middle",
                   hovertemplate=f"{outcome}: %{{x}}<extra></extra>")
              for outcome in OUTCOMES if (n := report.count(outcome))]
    return _figure(traces, "outcomes", height=150, barmode="stack", showlegend=False,
                   yaxis={"visible": False}, margin={"l": 10, "r": 10, "t": 40, "b": 26})


def _repos(report: RunReport) -> Figure:
    rows = report.repos()[:MAX_REPOS]
    names = [_label(_short(r.repo)) for r in rows]
    by_repo: dict[str, list[TaskRow]] = {}
    for task in report.tasks:
        by_repo.setdefault(task.repo, []).append(task)
    traces = []
    for outcome in OUTCOMES:
        counts = [sum(t.outcome == outcome for t in by_repo[r.repo]) for r in rows]
        if any(counts):
            traces.append(_bar(y=names, x=counts, name=outcome, marker={"color": COLORS[outcome]},
                               hovertemplate=f"%{{y}}: %{{x}} {outcome}<extra></extra>"))
    return _figure(traces, "outcomes per repository", height=max(200, 100 + 28 * len(rows)),
                   barmode="stack", yaxis={"autorange": "reversed", "type": "category"},
                   xaxis={"title": {"text": "tasks"}})


def _histogram(tasks: list[TaskRow], title: str, value: Any, *, whole: bool) -> Figure:
    """Stacked by outcome; ``whole`` numbers get bins one or more whole units wide."""
    top = max((v for t in tasks if (v := value(t)) is not None), default=0)
    bins = {"start": -0.5, "size": max(1, math.ceil(top / 30))} if whole else None
    traces = []
    for outcome in OUTCOMES:
        values = [v for t in tasks if t.outcome == outcome and (v := value(t)) is not None]
        if values:
            traces.append({"type": "histogram", "x": values, "name": outcome,
                           "marker": {"color": COLORS[outcome]},
                           **({"xbins": bins} if bins else {"nbinsx": 30}),
                           "hovertemplate": f"%{{x}}: %{{y}} tasks<extra>{outcome}</extra>"})
    return _figure(traces, title, barmode="stack", bargap=0.06,
                   yaxis={"title": {"text": "tasks"}})


def _timeline(report: RunReport) -> Figure:
    """A bar per attempt from its start to its end, on a lane of its node (attempts that
    overlapped on one node take separate lanes), coloured by how the attempt ended. Past
    ``MAX_BARS`` attempts, attempts of one lane and one colour that follow each other
    within a 2,000th of the run's span are drawn as one bar (its hover counts them): a
    browser draws 10,000 bars slowly, and at that scale they are a band anyway."""
    timed = [(t, a) for t in report.tasks for a in t.attempts if a.timed]
    origin = min(a.started_at for _, a in timed if a.started_at is not None)
    lanes = _lanes(timed)
    groups: dict[str, list[tuple[str, float, float, str]]] = {}
    merge = len(timed) > MAX_BARS
    span = max(a.ended_at or 0.0 for _, a in timed) - origin
    runs: dict[tuple[str, str], list[Any]] = {}  # (kind, lane) -> [start, end, count]
    for (task, attempt), lane in zip(timed, lanes, strict=True):
        assert attempt.started_at is not None and attempt.ended_at is not None
        kind = task.outcome if attempt.ok or attempt is task.attempts[-1] else "failed attempt"
        start = attempt.started_at - origin
        length = max(attempt.ended_at - attempt.started_at, 0.0)
        if merge:
            runs.setdefault((kind, lane), []).append((start, start + length))
            continue
        queued = "" if attempt.queued_seconds is None else \
            f"<br>queued {attempt.queued_seconds:.1f}s"
        why = f"<br>{_label(attempt.reason[:160])}" if attempt.reason else ""
        hover = (f"<b>{_label(task.id)}</b> attempt {attempt.number}<br>"
                 f"{_label(attempt.node or '?')}<br>{start:.1f}s to {start + length:.1f}s"
                 f" ({length:.1f}s){queued}{why}")
        groups.setdefault(kind, []).append((lane, start, length, hover))
    for (kind, lane), spans in runs.items():
        for start, end, count in _merged(sorted(spans), span / MAX_BARS):
            hover = (f"<b>{count} attempt{'s' if count > 1 else ''}</b> ({kind})<br>{lane}"
                     f"<br>{start:.1f}s to {end:.1f}s")
            groups.setdefault(kind, []).append((lane, start, end - start, hover))
    traces = [_bar(y=[b[0] for b in bars], base=[b[1] for b in bars], x=[b[2] for b in bars],
                   hovertext=[b[3] for b in bars], hoverinfo="text", name=kind,
                   marker={"color": COLORS[kind], "line": {"width": 0}})
              for kind in (*OUTCOMES, "failed attempt") if (bars := groups.get(kind))]
    order = sorted(set(lanes), key=lambda name: (name.rsplit(" · ", 1)[0],
                                                 int(name.rsplit(" · ", 1)[1])))
    title = "attempts per node over time"
    if merge:
        drawn = sum(len(bars) for bars in groups.values())
        title += f" ({len(timed):,} attempts as {drawn:,} bars: back-to-back ones merged)"
    return _figure(traces, title,
                   height=min(MAX_HEIGHT, max(200, 110 + 24 * len(order))),
                   barmode="overlay", bargap=0.3,
                   xaxis={"title": {"text": "seconds since the first attempt started"}},
                   yaxis={"autorange": "reversed", "type": "category",
                          "categoryorder": "array", "categoryarray": order})


def _merged(spans: list[tuple[float, float]],
            gap: float) -> list[tuple[float, float, int]]:
    """Sorted (start, end) spans joined where the next starts within ``gap`` of the end
    so far: (start, end, how many)."""
    joined: list[tuple[float, float, int]] = []
    for start, end in spans:
        if joined and start - joined[-1][1] <= gap:
            first, last, count = joined[-1]
            joined[-1] = (first, max(last, end), count + 1)
        else:
            joined.append((start, end, 1))
    return joined


def _lanes(timed: list[tuple[TaskRow, Any]]) -> list[str]:
    """A lane name per attempt: its node, and a number that keeps overlapping attempts apart."""
    order = sorted(range(len(timed)), key=lambda i: (timed[i][1].node, timed[i][1].started_at))
    free: dict[str, list[float]] = {}  # node -> when each of its lanes is free again
    names = [""] * len(timed)
    for i in order:
        attempt = timed[i][1]
        ends = free.setdefault(attempt.node, [])
        lane = next((k for k, end in enumerate(ends) if end <= attempt.started_at), len(ends))
        if lane == len(ends):
            ends.append(0.0)
        ends[lane] = attempt.ended_at
        names[i] = f"{_label(_short(attempt.node or 'node ?', 40))} · {lane + 1}"
    return names


def _label(text: str) -> str:
    """Run text for a Plotly label: its tags (``<b>``, ``<a href>``...) shown as text.
    Plotly shows ``&lt;`` as ``<`` but would show ``&quot;`` as it is: quotes stay."""
    return html.escape(text, quote=False)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1):]
