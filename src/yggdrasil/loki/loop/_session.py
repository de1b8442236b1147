"""A session: one conversation carried across ``act`` calls, and across processes.

In one process a ``Session`` keeps the messages of its runs (and, when it was opened by
``Loki.session``, the toolbox, so ``changed`` and ``revert`` span every run). A later
process picks a session up from a run's transcript (``Session.from_transcript``): the
messages come back as they were sent, and the files the earlier runs changed are listed
again; what cannot come back is the undo state (the originals were copies kept by the
earlier process, deleted when it ended), which ``notes`` says.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engines import Message
from ..errors import LokiError
from ..toolbox import Toolbox

__all__ = ["Session", "carry_changes", "new_run_id"]


def new_run_id() -> str:
    """A run's id: sortable by start time, unique enough for a user's runs folder."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


@dataclass
class Session:
    """A conversation kept across ``Loki.act(..., session=...)`` calls.

    ``messages`` grow with each run (its task, the model's replies, the observations);
    ``runs`` lists the ids of the runs so far. ``toolbox``: when set, every run of the
    session uses it (``Loki.session`` opens one and ``close()`` closes it). ``changed``:
    files that runs of an earlier process changed (from a transcript), recorded into the
    toolbox of the next run; ``notes`` say what did not carry over.
    """

    id: str = field(default_factory=new_run_id)
    messages: list[Message] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    root: str | None = None
    toolbox: Toolbox | None = None
    changed: list[str] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)  # of ``changed``, when it ended
    notes: list[str] = field(default_factory=list)
    owns_toolbox: bool = False

    def close(self) -> None:
        """Close the session's toolbox when the session opened it."""
        if self.toolbox is not None and self.owns_toolbox:
            self.toolbox.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_transcript(cls, path: str | os.PathLike[str]) -> Session:
        """The session a transcript's run belonged to, ready for its next run."""
        records = _records(path)
        start = next((r for r in records if r.get("type") == "start"), None)
        if start is None:
            raise LokiError(f"{os.fspath(path)} is not a run's transcript (no start record)")
        messages = [r["message"] for r in records if r.get("type") == "message"]
        if not messages:
            raise LokiError(f"{os.fspath(path)} holds no conversation: it was written by a "
                            "loki before sessions (it can still be replayed with --engine "
                            "scripted --model FILE)")
        changed: dict[str, None] = {}
        statuses: dict[str, str] = {}
        for record in records:
            if record.get("type") == "end":
                changed.update(dict.fromkeys(record.get("files_changed") or []))
                statuses.update(record.get("changes") or {})
        run = str(start.get("run") or Path(path).stem)
        session = cls(id=str(start.get("session") or run), messages=messages,
                      runs=[*start.get("runs_before", []), run], root=start.get("root"),
                      changed=list(changed), statuses=statuses)
        if changed:
            session.notes.append(
                f"the {len(changed)} file(s) the earlier run changed are listed as changed "
                "again, but cannot be undone from here by undo_edit or revert (their "
                "originals were kept by the process that ran it); its checkpoints can put "
                f"them back: `loki rewind {run} 0`, or a rewind of this run, which continues "
                "its checkpoints")
        return session


def carry_changes(session: Session, toolbox: Toolbox) -> None:
    """Record into ``toolbox`` the files an earlier process's runs changed, where that still
    holds: a file they created or modified still exists, one they deleted is still gone.
    The others are left out, and ``notes`` says so."""
    for path in session.changed:
        status = session.statuses.get(path, "modified")
        if _still_holds(toolbox, path, status):
            toolbox.record(path)
        else:
            session.notes.append(f"{path} was {status} by the earlier run and has changed "
                                 "since: not listed as this session's change")
    session.changed, session.statuses = [], {}


def _still_holds(toolbox: Toolbox, path: str, status: str) -> bool:
    if toolbox.root is None or status == "transient":
        return True
    exists = os.path.lexists(toolbox.root.path / path)
    return not exists if status == "deleted" else exists


def _records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LokiError(f"cannot read the transcript {os.fspath(path)!r}: {exc}") from exc
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            if number == len(lines):  # the run was killed while writing its last record
                break
            raise LokiError(f"{os.fspath(path)}:{number}: not JSON: {exc}") from exc
        if isinstance(record, dict):
            records.append(record)
    return records
