"""What commands and background jobs answer: exit, streams, changes, the fence's notes.

The text is DESIGN.md's: ``exit=<code>`` first, then ``stdout:`` and ``stderr:``
sections, then what the fence refused, the ``proxy:`` refusals, the ``changed:`` section
and the fence's notes, each on lines of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from yggdrasil.io import human_size

from ._base import Result
from ._bounds import clip_list
from ._render import renders

__all__ = [
    "MAX_CHANGE_LINES",
    "CommandResult",
    "FileChange",
    "JobInput",
    "JobList",
    "JobReport",
    "JobRow",
    "JobStarted",
    "JobState",
    "StreamOutput",
    "changed_section",
    "cut_note",
    "job_state",
]

MAX_CHANGE_LINES = 200  # lines of a command's or job's "changed:" section
HELD_OPEN = ("[a background process that left the session still holds the output open; "
             "output after this point is not shown]\n")
_FENCE_NOTE = ("[sandbox: commands may write only inside the root and $TMPDIR{net}; a write "
               "elsewhere fails with 'Permission denied'. Work inside the root, or ask the "
               "user to add a writable folder]\n")
_NO_NETWORK = ", and may not open TCP connections"
_PROTECTED_NOTE = ("[sandbox: protected files (they may hold secrets) are unreadable to commands, "
                   "as to every tool; only the user can change that list]\n")


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StreamOutput(_Data):
    """One output stream as kept: its head, its tail, and how many bytes were cut between
    them (``why``: a clause saying why, for a job's reads)."""

    head: str
    tail: str = ""
    cut: int = 0
    bytes: int = 0
    why: str = ""

    def text(self) -> str:
        if self.cut <= 0:
            return self.head + self.tail
        return f"{self.head}\n{cut_note(self.cut, self.why)}\n{self.tail}"


class FileChange(_Data):
    """A root-relative path and what happened to it (a lost folder ends with ``/``)."""

    path: str
    change: Literal["created", "modified", "deleted", "transient"]


class _Changes(Result):
    """The parts commands and jobs share: proxy refusals, changes, the fence's notes."""

    proxy: list[str] = Field(default_factory=list)  # what the network proxy refused, one per line
    changes: list[FileChange] = Field(default_factory=list)
    changes_tracked: bool = True  # False: the root holds too many files to compare
    put_back: list[str] = Field(default_factory=list)  # git's command files a change to was undone in
    held_open: bool = False  # an escaped process still holds the output open


class CommandResult(_Changes):
    """``run``/``run_python`` in the foreground. ``exit_code`` is None when it timed out
    or was cancelled; a negative one is the signal that killed it (``signal`` names it).
    ``denied``: why a failed command met 'Permission denied' (``protected``: a protected
    file; ``fence``: a write outside the root; ``fence-offline`` also no network)."""

    kind: Literal["command"] = "command"
    exit_code: int | None
    refusals: list[str] = Field(default_factory=list)  # what the rules or the socket guard refused, one per line
    refusals_dropped: int = 0  # more refusals than were kept
    timed_out: bool = False
    cancelled: bool = False
    timeout: float = 0.0
    signal: str | None = None
    stdout: StreamOutput
    stderr: StreamOutput
    denied: list[Literal["protected", "fence", "fence-offline"]] = Field(default_factory=list)


class JobState(_Data):
    """Whether a job runs, and how it ended: its exit code, who stopped it
    (``stopped_why``) and by which signal it ended (``stopped_by``; each stop waits
    ``grace`` seconds before the next)."""

    job: int
    running: bool
    exit_code: int | None = None
    stopped_why: str = ""
    stopped_by: str = ""
    grace: float = 0.0


class JobReport(_Changes):
    """A background job as one read sees it: its state, what it printed since the last
    read, what it changed so far."""

    kind: Literal["job"] = "job"
    state: JobState
    stdout: StreamOutput
    stderr: StreamOutput


class JobStarted(Result):
    """``run(..., background=true)``: the job's id, its label, and its first report."""

    kind: Literal["job_started"] = "job_started"
    job: int
    label: str
    report: JobReport


class JobInput(Result):
    """``job_input``: how many bytes went to the job's stdin, whether it was closed, and
    the job's report after it answered."""

    kind: Literal["job_input"] = "job_input"
    job: int
    sent: int
    closed: bool
    report: JobReport


class JobRow(_Data):
    job: int
    running: bool
    exit_code: int | None = None
    seconds: float
    output_bytes: int
    unread_bytes: int
    label: str


class JobList(Result):
    """``jobs``: every job this toolbox remembers, and how many may run at once."""

    kind: Literal["jobs"] = "jobs"
    running: int
    max_jobs: int
    jobs: list[JobRow]


# -- the text ---------------------------------------------------------------------------


def cut_note(size: int, why: str = "") -> str:
    """The line where ``size`` bytes of output were cut (``why``: a clause saying why)."""
    return f"[... {human_size(size)} of output cut from the middle{why} ...]"


def changed_section(changes: list[FileChange]) -> str:
    """The ``changed:`` section ('created a.py', 'modified b.py'...), capped; empty when
    nothing changed."""
    if not changes:
        return ""
    lines = [f"{c.change} {c.path}" for c in changes]
    kept = clip_list(lines, MAX_CHANGE_LINES, "changes", "see Toolbox.changed for the full list")
    return "changed:\n" + "\n".join(kept) + "\n"


# How the texts name the rule that keeps git's code files read-only, and how to lift it
# (the setting fence.git_writable): the file tools' refusal, the fence's status line and
# the note of what was put back all say it the same way.
GIT_RULE = "git_writable=False"
HOW_TO_ALLOW_GIT = "the user allows it with filesystem_toolbox(git_writable=True)"


def _put_back_note(paths: list[str]) -> str:
    if not paths:
        return ""
    shown = clip_list(paths, 20, "paths", "see Toolbox.changed")
    return (f"[sandbox: put back {', '.join(shown)}: git (or hg) takes commands from it, "
            f"which would run outside the sandbox ({GIT_RULE})]\n")


def _denied_note(denied: Sequence[str]) -> str:
    note = _PROTECTED_NOTE if "protected" in denied else ""
    if "fence" in denied:
        note += _FENCE_NOTE.format(net="")
    elif "fence-offline" in denied:
        note += _FENCE_NOTE.format(net=_NO_NETWORK)
    return note


def _appended(text: str, *extras: str) -> str:
    for extra in extras:
        if extra:
            text += extra if text.endswith("\n") else "\n" + extra
    return text


def _first_line(result: CommandResult) -> str:
    if result.cancelled:
        return ("exit=cancelled (stopped on request with its whole process tree; "
                "partial output below)")
    if result.timed_out:
        return (f"exit=timeout (killed after {result.timeout:g}s with its whole process "
                "tree; partial output below)")
    return f"exit={result.exit_code}"


def _proxy_section(lines: list[str]) -> str:
    return "proxy:\n" + "".join(f"{line}\n" for line in lines) if lines else ""


@renders(CommandResult)
def command_text(result: CommandResult) -> str:
    text = (f"{_first_line(result)}\nstdout:\n{result.stdout.text()}\n"
            f"stderr:\n{result.stderr.text()}")
    if result.held_open:
        text += ("" if text.endswith("\n") else "\n") + HELD_OPEN
    changed = (changed_section(result.changes) if result.changes_tracked else
               "changed: not tracked (the root holds too many files to compare quickly)\n")
    more = (f"loki: {result.refusals_dropped} more refusals not shown\n"
            if result.refusals_dropped else "")
    return _appended(text, "".join(f"{line}\n" for line in result.refusals) + more,
                     _proxy_section(result.proxy), changed, _denied_note(result.denied),
                     _put_back_note(result.put_back))


def job_state(state: JobState) -> str:
    """``job 3 running`` or ``exit=<code>`` with how it was stopped."""
    if state.running:
        return f"job {state.job} running"
    if not state.stopped_why or not state.stopped_by:  # it ended on its own first
        return f"exit={state.exit_code}"
    if state.stopped_by in ("SIGINT", "SIGTERM"):
        how = f"it exited on {state.stopped_by}"
        if state.stopped_by == "SIGTERM":
            how = f"SIGINT did not end it within {state.grace:g}s, {how}"
    else:
        how = f"SIGINT and SIGTERM did not end it within {state.grace:g}s each, so it was killed"
    return f"exit={state.exit_code} (stopped by {state.stopped_why}: {how})"


@renders(JobReport)
def job_text(report: JobReport) -> str:
    # each section ends with one newline of its own, so a read's output is exact: a last
    # line without a newline (a prompt) is followed by just that one
    text = (f"{job_state(report.state)}\nstdout:\n{report.stdout.text()}"
            f"\nstderr:\n{report.stderr.text()}\n")
    text += _proxy_section(report.proxy)
    text += HELD_OPEN if report.held_open else ""
    return text + changed_section(report.changes) + _put_back_note(report.put_back)


@renders(JobStarted)
def _started_text(result: JobStarted) -> str:
    n = result.job
    return (f"started job {n}: {result.label}\n{job_text(result.report)}"
            f"[job_output(job={n}) reads more, job_input(job={n}, text=...) "
            f"writes to its stdin, job_stop(job={n}) stops it]\n")


@renders(JobInput)
def _input_text(result: JobInput) -> str:
    what = [f"sent {result.sent} bytes to its stdin"] if result.sent else []
    what += ["closed its stdin"] if result.closed else []
    return f"job {result.job}: {' and '.join(what)}\n{job_text(result.report)}"


@renders(JobList)
def _list_text(result: JobList) -> str:
    if not result.jobs:
        return "no jobs; run(command, background=true) starts one"
    lines = [_job_row(row) for row in result.jobs]
    return (f"{result.running} of at most {result.max_jobs} jobs running\n"
            + "\n".join(lines) + "\n")


def _job_row(row: JobRow) -> str:
    size = human_size(row.output_bytes) + (
        f", {human_size(row.unread_bytes)} unread" if row.unread_bytes else "")
    state = "running" if row.running else f"exit={row.exit_code}"
    return f"job {row.job}  {state}  {_age(row.seconds)}  output {size}  {row.label}"


def _age(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole // 60 % 60:02d}m"
