"""What the checkers said about files: one diagnostic, an edit's new ones, a report.

An edit's result carries the diagnostics the edit introduced (``diagnostics``) and a
:class:`Diagnosis` (how many were there before, how many new ones the caps left out,
which checks are still running or failed); the text is a section after the edit's own
lines, absent when an edit introduced nothing and nothing is pending, so such an edit
reads exactly as before. ``diagnostics(paths)`` answers a :class:`DiagnosticsReport`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._base import Result
from ._bounds import clip_line
from ._render import renders

__all__ = [
    "SEVERITIES",
    "Diagnosis",
    "Diagnostic",
    "DiagnosticsReport",
    "LateDiagnostics",
    "diagnosis_lines",
    "diagnostic_line",
]

Severity = Literal["error", "warning", "info", "hint"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info", "hint")  # the order shown
_MESSAGE_CHARS = 400  # of one diagnostic's message as shown


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Diagnostic(_Data):
    """One finding of a checker: where (root-relative ``path``, 1-based ``line`` and
    ``column``), how bad (``severity``), the checker's rule ``code`` (``F821``,
    ``reportAttributeAccessIssue``, ``TS2304``; "" when it has none), its ``message``, and
    which checker said it (``source``: ``ruff``, ``basedpyright``, ``typescript``...).
    ``symbol``: the text the finding points at (an undefined name), which, with the code
    and the message, tells a finding apart from another without its line number;
    ``cell``: the notebook cell it is in (1-based; the line is the cell's)."""

    path: str
    line: int
    column: int
    severity: Severity
    code: str = ""
    message: str
    source: str
    symbol: str = ""
    cell: int | None = None


class Diagnosis(_Data):
    """What the checks after a change found beyond the new diagnostics themselves.

    ``preexisting``: diagnostics the changed files had before the change and still have
    (not shown); ``not_shown``: new ones past the caps (per file, per call); ``pending``:
    checks still running past the wait (``basedpyright: a.py``), whose findings come with a
    later observation; ``problems``: checks that could not run (a server that crashed,
    hung or flooded), one sentence each."""

    preexisting: int = 0
    not_shown: int = 0
    pending: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)


def diagnostic_line(d: Diagnostic) -> str:
    """``a.py:3:12: error F821 Undefined name `y` (ruff)``."""
    where = f"{d.path}:{f'cell {d.cell}:' if d.cell else ''}{d.line}:{d.column}"
    code = f" {d.code}" if d.code else ""
    message = clip_line(" ".join(d.message.split()), _MESSAGE_CHARS)
    return f"{where}: {d.severity}{code} {message} ({d.source})"


def _counts(found: Sequence[Diagnostic]) -> str:
    parts = []
    for severity in SEVERITIES:
        n = sum(1 for d in found if d.severity == severity)
        if n:
            parts.append(f"{n} {severity}{'s' if n > 1 else ''}")
    return ", ".join(parts)


def diagnosis_lines(found: Sequence[Diagnostic], diagnosis: Diagnosis | None) -> list[str]:
    """The section an edit's text ends with: nothing when the edit introduced nothing and
    no check is pending or failed (the edit reads as it always did)."""
    if diagnosis is None or not (found or diagnosis.pending or diagnosis.problems):
        return []
    lines = []
    if found:
        total = len(found) + diagnosis.not_shown
        head = f"diagnostics: this change introduced {total} ({_counts(found)}"
        head += f"; {diagnosis.not_shown} more not shown)" if diagnosis.not_shown else ")"
        lines.append(head)
        lines += [diagnostic_line(d) for d in found]
    if diagnosis.preexisting and (found or diagnosis.pending):
        lines.append(f"[{diagnosis.preexisting} diagnostics these files already had are not "
                     "shown; diagnostics(paths) lists every one]")
    if diagnosis.pending:
        lines.append(f"[diagnostics pending: {', '.join(diagnosis.pending)} still checking; "
                     "what they find comes with the next observation]")
    lines += [f"[diagnostics: {problem}]" for problem in diagnosis.problems]
    return lines


class DiagnosticsReport(Result):
    """``diagnostics(paths)``: every diagnostic of the files asked about, errors first
    (``shown``: up to the cap; ``total``: all of them), the files looked at
    (``files``), and the checks still running or failed (``diagnosis``)."""

    kind: Literal["diagnostics"] = "diagnostics"
    files: list[str]
    diagnostics: list[Diagnostic]
    total: int
    diagnosis: Diagnosis = Field(default_factory=Diagnosis)


@renders(DiagnosticsReport)
def _report_text(result: DiagnosticsReport) -> str:
    shown = result.diagnostics
    if not result.files:
        lines = ["no file to check: the paths hold no file a checker reads (diagnostics "
                 "cover .py, .pyi and .ipynb with ruff, and the languages of the language "
                 "servers in the settings)"]
    elif not result.total:
        lines = [f"no diagnostics in {_files(result.files)}"]
    else:
        lines = [f"{result.total} diagnostics in {_files(result.files)} ({_counts(shown)}"
                 + (f" shown; {result.total - len(shown)} more not shown: ask for fewer "
                    "paths)" if result.total > len(shown) else ")")]
        lines += [diagnostic_line(d) for d in shown]
    d = result.diagnosis
    if d.pending:
        lines.append(f"[still checking: {', '.join(d.pending)}; ask again for what they find]")
    lines += [f"[diagnostics: {problem}]" for problem in d.problems]
    return "\n".join(lines)


def _files(files: Sequence[str]) -> str:
    if len(files) == 1:
        return files[0]
    return f"{len(files)} files"


class LateDiagnostics(_Data):
    """Diagnostics of an earlier change whose checks finished after its observation
    (it said "diagnostics pending"): shown after the next observation."""

    diagnostics: list[Diagnostic]
    diagnosis: Diagnosis = Field(default_factory=Diagnosis)
    paths: list[str] = Field(default_factory=list)

    def text(self) -> str:
        paths = ", ".join(self.paths)
        lines = diagnosis_lines(self.diagnostics, self.diagnosis)
        if self.diagnostics:
            lines[0] = f"[late] {lines[0]} (the earlier change to {paths})"
        elif self.diagnosis.problems:
            lines.insert(0, f"[the pending diagnostics of the earlier change to {paths} "
                            "could not be had:]")
        else:  # the pending checks found nothing new: said once, so the model stops waiting
            lines = [f"[diagnostics of the earlier change to {paths}: nothing new]"]
        return "\n".join(lines)
