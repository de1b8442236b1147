"""A fleet's output folder read for a report: each task's outcome, counted and grouped.

Reads ``results.jsonl`` line by line as plain JSON (older runs lack the per-attempt
``node``/``started_at``/``ended_at``/``queued_seconds``, or ``repo``: what is missing is
shown as not recorded). Everything in the folder is the run's, the model's text and
whoever edited the files included: it is data, never markup (the page escapes it), and a
line that is not a result is counted and skipped, never fatal.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["OUTCOMES", "Attempt", "RepoRow", "RunReport", "TaskRow", "read_run"]

RESULTS = "results.jsonl"
OUTCOMES = ("verified", "not verified", "done", "failed")  # done: finished, no verify command
NOT_RECORDED = "(not recorded)"
_ATTEMPT = re.compile(r"\battempt (\d+): ")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?")
_HASH = re.compile(r"\b[0-9a-f]{7,64}\b")
_QUOTED = re.compile(r"'[^']{0,200}'|\"[^\"]{0,200}\"")


@dataclass
class Attempt:
    """One attempt at a task: where and when it ran (when recorded), and how it ended."""

    number: int
    ok: bool
    reason: str = ""
    node: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    queued_seconds: float | None = None

    @property
    def timed(self) -> bool:
        return self.started_at is not None and self.ended_at is not None


@dataclass
class TaskRow:
    """One task's result, as the report shows it (text fields are the run's, unescaped)."""

    id: str
    repo: str
    status: str
    outcome: str
    reason: str
    kind: str  # the group of an unsuccessful outcome ('' when verified or done)
    attempts: list[Attempt]
    steps: int | None = 0  # None: not recorded (a failed task), shown as a dash
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    seconds: float | None = 0.0  # None: not recorded (shown as a dash)
    cost: float | None = None
    stop_reason: str = ""
    answer: str = ""
    model: str = ""
    files_changed: list[str] = field(default_factory=list)
    patch: str = ""
    checkpoint_diffs: dict[str, str] = field(default_factory=dict)  # step -> what it changed
    verify_exit: int | None = None
    verify_output: str = ""
    transcript: str = ""
    replayed: bool = False  # its tokens were a recording's, replayed: not spent

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class RepoRow:
    repo: str
    tasks: int = 0
    verified: int = 0
    graded: int = 0
    failed: int = 0
    tokens: int = 0
    seconds: float = 0.0


@dataclass
class RunReport:
    """What a run's output folder holds, read once; ``skipped`` lines were not results."""

    out: Path
    tasks: list[TaskRow]
    priced: bool = False
    skipped: int = 0

    def count(self, outcome: str) -> int:
        return sum(1 for t in self.tasks if t.outcome == outcome)

    @property
    def graded(self) -> int:
        return self.count("verified") + self.count("not verified")

    @property
    def verified_rate(self) -> float | None:
        return self.count("verified") / self.graded if self.graded else None

    @property
    def replayed(self) -> int:
        return sum(t.replayed for t in self.tasks)

    @property
    def timed(self) -> bool:
        return any(a.timed for t in self.tasks for a in t.attempts)

    def groups(self) -> list[tuple[str, str, list[TaskRow]]]:
        """(outcome, kind, tasks) for every unsuccessful kind, the largest first."""
        found: dict[tuple[str, str], list[TaskRow]] = {}
        for task in self.tasks:
            if task.kind:
                found.setdefault((task.outcome, task.kind), []).append(task)
        ranked = sorted(found.items(), key=lambda item: (-len(item[1]), item[0]))
        return [(outcome, kind, tasks) for (outcome, kind), tasks in ranked]

    def repos(self) -> list[RepoRow]:
        rows: dict[str, RepoRow] = {}
        for task in self.tasks:
            row = rows.setdefault(task.repo, RepoRow(task.repo))
            row.tasks += 1
            row.verified += task.outcome == "verified"
            row.graded += task.outcome in ("verified", "not verified")
            row.failed += task.outcome == "failed"
            row.tokens += task.tokens
            row.seconds += task.seconds or 0.0
        return sorted(rows.values(), key=lambda r: (-r.tasks, r.repo))

    def total(self, name: str) -> float:
        return sum(getattr(t, name) or 0 for t in self.tasks)

    def stats(self) -> list[tuple[str, str, list[float]]]:
        """(field, label, [median, 90th percentile, max, total]) of time, steps, tokens
        and cost per task, over the tasks that finished (a failed one recorded none)."""
        rows = []
        for name, label in (("seconds", "time"), ("steps", "steps"), ("tokens", "tokens"),
                            ("cost", "cost")):
            values = sorted(v for t in self.tasks
                            if t.outcome != "failed" and (v := getattr(t, name)) is not None)
            if values:
                rows.append((name, label, [_quantile(values, 0.5), _quantile(values, 0.9),
                                           values[-1], sum(values)]))
        return rows


def read_run(out: str | os.PathLike[str], *, price_in: float | None = None,
             price_out: float | None = None) -> RunReport:
    """The run recorded in the folder ``out``, by task id (the last line of an id wins).

    ``price_in``/``price_out`` are dollars per million input/output tokens (the cost is
    unknown without them; a task that replayed a recording's tokens spent none and has
    no cost). Raises FileNotFoundError when ``out`` holds no results.jsonl.
    """
    folder = Path(out)
    path = folder / RESULTS
    if not path.is_file():
        raise FileNotFoundError(f"{os.fspath(path)} does not exist: give the --out folder "
                                "of a fleet run")
    for name, price in (("price_in", price_in), ("price_out", price_out)):
        if price is not None and not (math.isfinite(price) and price >= 0):
            raise ValueError(f"{name} is dollars per million tokens, 0 or more; got {price!r}")
    priced = price_in is not None or price_out is not None
    rows: dict[str, TaskRow] = {}
    skipped = 0
    for data in _lines(path):
        row = _row(data, price_in or 0.0, price_out or 0.0, priced) \
            if isinstance(data, dict) else None
        if row is None:
            skipped += 1
            continue
        rows[row.id] = row
    return RunReport(folder, sorted(rows.values(), key=lambda r: r.id), priced, skipped)


def _lines(path: Path) -> Iterator[Any]:
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            try:
                yield json.loads(raw)
            except (ValueError, RecursionError):
                yield None


def _diffs(value: Any) -> dict[str, str]:
    """A result's checkpoint diffs: step numbers (as text) to diffs; anything else dropped."""
    if not isinstance(value, dict):
        return {}
    found = {k: v for k, v in value.items() if isinstance(k, str) and k.isdigit()
             and isinstance(v, str)}
    return dict(sorted(found.items(), key=lambda kv: int(kv[0])))


def _row(data: dict[str, Any], price_in: float, price_out: float,
         priced: bool) -> TaskRow | None:
    task_id, status = data.get("id"), data.get("status")
    if not isinstance(task_id, str) or not task_id or not isinstance(status, str):
        return None
    usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
    tokens_in, tokens_out = _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
    verified = data.get("verified")
    outcome = ("failed" if status != "done" else "done" if verified is None
               else "verified" if verified is True else "not verified")
    attempts = _attempts(data, ok=status == "done")
    replayed = data.get("tokens_replayed") is True
    reason = _one_line(_text(data.get("reason")))
    row = TaskRow(
        id=task_id, repo=_text(data.get("repo")) or NOT_RECORDED, status=status,
        outcome=outcome, reason=reason, kind="", attempts=attempts,
        steps=_int(data.get("steps")) if status == "done" else None,
        input_tokens=tokens_in, output_tokens=tokens_out,
        requests=_int(usage.get("requests")), seconds=_float(data.get("seconds")) or (
            0.0 if status == "done" else _attempts_time(attempts)),
        cost=(tokens_in * price_in + tokens_out * price_out) / 1e6
        if priced and not replayed else None, replayed=replayed,
        stop_reason=_text(data.get("stop_reason")), answer=_text(data.get("answer")),
        model=_text(data.get("model")), patch=_text(data.get("patch")),
        files_changed=[_text(f) for f in data.get("files_changed") or [] if isinstance(f, str)]
        if isinstance(data.get("files_changed"), list) else [],
        verify_exit=data["verify_exit"] if type(data.get("verify_exit")) is int else None,
        verify_output=_text(data.get("verify_output")),
        transcript=_text(data.get("transcript")),
        checkpoint_diffs=_diffs(data.get("checkpoint_diffs")))
    row.kind = _kind(row)
    return row


def _attempts(data: dict[str, Any], *, ok: bool) -> list[Attempt]:
    """The attempts of a result: its ``attempts`` records when there are, else made up
    from the count; reasons not in the records come from the result's ``reason``
    (``attempt N: why; ...``), as older runs wrote them."""
    listed = data.get("attempts")
    why = _split_reasons(_text(data.get("reason")))
    found = [_attempt(i, a, ok=ok and i == len(listed))
             for i, a in enumerate(listed, 1) if isinstance(a, dict)] \
        if isinstance(listed, list) else []
    if not found:
        count = listed if type(listed) is int and 0 < listed <= 1000 else 1
        found = [Attempt(n, ok=ok and n == count) for n in range(1, count + 1)]
        last = found[-1]
        last.node = _text(data.get("node"))
        last.started_at = _float(data.get("started_at"))
        last.ended_at = _float(data.get("ended_at"))
        last.queued_seconds = _float(data.get("queued_seconds"))
    for attempt in found:
        attempt.reason = attempt.reason or why.get(attempt.number, "")
    return found


def _attempt(number: int, data: dict[str, Any], *, ok: bool) -> Attempt:
    given = data.get("number", data.get("attempt"))
    reason = _one_line(_text(data.get("reason") or data.get("error")))
    return Attempt(number=given if type(given) is int else number,
                   ok=bool(data["ok"]) if isinstance(data.get("ok"), bool) else ok and not reason,
                   reason=reason, node=_text(data.get("node")),
                   started_at=_float(data.get("started_at")), ended_at=_float(data.get("ended_at")),
                   queued_seconds=_float(data.get("queued_seconds")))


def _split_reasons(reason: str) -> dict[int, str]:
    """``attempt 1: x; attempt 2: y`` (the fleet's reason) as {1: x, 2: y}."""
    marks = list(_ATTEMPT.finditer(reason))
    found = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(reason)
        found[int(mark.group(1))] = reason[mark.end():end].strip()
    return found


def _kind(row: TaskRow) -> str:
    """The group of an unsuccessful task: what made it fail, with the particulars
    (numbers, hashes, quoted names) blanked so that alike failures fall together."""
    if row.outcome == "not verified":
        if row.verify_output.startswith("the patch does not apply"):
            return "the patch does not apply"
        return f"verify exit={row.verify_exit}" if row.verify_exit is not None \
            else "verify gave no exit code"
    if row.outcome != "failed":
        return ""
    last = next((a.reason for a in reversed(row.attempts) if a.reason), row.reason)
    last = _ATTEMPT.sub("", last, count=1) if _ATTEMPT.match(last) else last
    blanked = _NUMBER.sub("N", _HASH.sub("<hash>", _QUOTED.sub("'…'", last)))
    return _one_line(blanked, 120) or "no reason recorded"


def _quantile(values: list[Any], q: float) -> Any:
    """The ``q`` quantile of sorted ``values`` (the nearest rank)."""
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _attempts_time(attempts: list[Attempt]) -> float | None:
    """A failed task's time when its result has none (written before it was recorded):
    the time its timed attempts ran; None when none was timed."""
    timed = [(a.ended_at or 0.0) - (a.started_at or 0.0) for a in attempts if a.timed]
    return max(0.0, sum(timed)) if timed else None


def _int(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def _float(value: Any) -> float | None:
    if type(value) in (int, float) and math.isfinite(value):
        return float(value)
    return None
