"""What the checkpoints answer: the list of steps, and what a rewind did or would do.

``CheckpointList`` reads one line per step: ``<n>  <tool>  <k> file(s): a, b``.
``RewindResult`` reads ``rewound to checkpoint <n>: ...`` (or ``rewind to checkpoint
<n> (dry run): ...``), then a line per path (``restored a.py``, ``removed b.txt``,
``would restore ...``, ``not restored c.bin: <why>``), then the diff.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ._base import Result
from ._bounds import clip_list
from ._render import renders

__all__ = ["CheckpointInfo", "CheckpointList", "NotRestored", "Restored", "RewindResult"]

MAX_PATH_LINES = 200  # path lines of a rewind or of one checkpoint listed


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CheckpointInfo(_Data):
    """One checkpoint: step ``n`` (of run ``run``), the tool that made it, when (seconds
    since the epoch), the paths it changed, and a note (checkpointing stopped...)."""

    n: int
    run: str
    tool: str
    at: float
    paths: list[str] = Field(default_factory=list)
    note: str = ""


class CheckpointList(Result):
    kind: Literal["checkpoints"] = "checkpoints"
    run: str
    checkpoints: list[CheckpointInfo] = Field(default_factory=list)
    note: str = ""  # e.g. the first checkpoint is not finished, or checkpointing stopped


Action = Literal["write", "remove", "link", "rmdir", "mkdir"]


class Restored(_Data):
    """A path put back (or that would be): its file written, removed, a link made, a
    folder the later steps made removed (``rmdir``) or one they removed made again."""

    path: str
    action: Action


class NotRestored(_Data):
    path: str
    why: str


class RewindResult(Result):
    """A rewind to step ``step``: what was put back (``restored``), or with ``dry_run``
    what would be (``would_restore``), what could not be and why, and the diff from the
    files now to the files at the step. ``checkpoint``: the step the rewind itself was
    recorded as (None for a dry run, or when nothing changed)."""

    kind: Literal["rewind"] = "rewind"
    run: str
    step: int
    dry_run: bool = False
    restored: list[Restored] = Field(default_factory=list)
    would_restore: list[Restored] = Field(default_factory=list)
    not_restored: list[NotRestored] = Field(default_factory=list)
    diff: str = ""
    checkpoint: int | None = None


@renders(CheckpointList)
def _list_text(result: CheckpointList) -> str:
    lines = [_step_line(c) for c in result.checkpoints]
    if not lines:
        lines = ["no checkpoints yet (one is taken after each call that may change files)"]
    head = f"checkpoints of run {result.run} (rewind to one with its number; 0: before the first)"
    return "\n".join([head, *lines, *([result.note] if result.note else [])])


def _shown(path: str) -> str:
    """A path on one line: a newline or other control character in a name is escaped."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in path)


def _step_line(c: CheckpointInfo) -> str:
    shown = ", ".join(map(_shown, c.paths[:8])) + (f", ... ({len(c.paths) - 8} more)" if len(c.paths) > 8 else "")
    files = f"{len(c.paths)} file(s): {shown}" if c.paths else "no files changed"
    note = f"  [{c.note}]" if c.note else ""
    return f"{c.n}  {c.tool}  {files}{note}"


_VERBS = {"write": "restored", "remove": "removed", "link": "restored link", "rmdir": "removed",
          "mkdir": "made folder"}


@renders(RewindResult)
def _rewind_text(result: RewindResult) -> str:
    done = result.would_restore if result.dry_run else result.restored
    if result.dry_run:
        head = f"rewind to checkpoint {result.step} (dry run): would restore {len(done)} path(s)"
    else:
        head = f"rewound to checkpoint {result.step}: {len(done)} path(s) restored"
    if result.not_restored:
        head += f", {len(result.not_restored)} not restored"
    prefix = "would be " if result.dry_run else ""
    lines = [f"{prefix}{_VERBS[r.action]} {_shown(r.path)}{'/' * r.action.endswith('dir')}"
             for r in done]
    lines += [f"not restored {_shown(n.path)}: {n.why}" for n in result.not_restored]
    lines = clip_list(lines, MAX_PATH_LINES, "paths", "give paths= to rewind fewer")
    body = "\n".join([head, *lines])
    return f"{body}\n{result.diff}".rstrip("\n") if result.diff else body
