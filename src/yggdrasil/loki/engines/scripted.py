"""An engine that replays scripted replies: for tests, demos and reproducing a run.

A script is a list (or a JSONL file, one object per line) of any of:

- a decision: ``{"thought": ..., "tool": ..., "args": {...}}`` or
  ``{"thought": ..., "done": true, "answer": ...}``, replied as JSON text;
- a raw reply: a plain string, or ``{"text": ..., "tool_calls": [...]}``;
- a transcript written by ``Loki.act(transcript=...)``: its ``turn`` records are the
  model's replies, replayed exactly (malformed ones and native tool calls included), so a
  recorded run is reproduced without the model. Other transcript records are skipped.

Blank lines and lines starting with ``#`` in a file are ignored.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import EngineConfigError, EngineRequestError
from . import Completion, Message

_TRANSCRIPT_ONLY = {"start", "step", "end", "error", "message"}


class ScriptedEngine:
    """Replays ``script`` one reply per request; ``engine="scripted", model=<path>`` loads a file."""

    name = "scripted"
    spends_tokens = False  # a replay: the usage it reports is the recording's

    def __init__(
        self, script: Iterable[Any] | str | os.PathLike[str] | None = None, *,
        model: str | None = None, **_settings: Any,
    ) -> None:
        source = script if script is not None else model
        if source is None:
            raise EngineConfigError(
                "the scripted engine needs a script: ScriptedEngine([...decisions]) or "
                "Loki(engine='scripted', model='<path to a JSONL file>')")
        records = read_jsonl(source) if isinstance(source, str | os.PathLike) else list(source)
        self.model = os.fspath(source) if isinstance(source, str | os.PathLike) else model or "script"
        self.replies = [r for r in map(to_completion, records) if r is not None]
        # a transcript says which protocol its run spoke; replaying it the same way
        # reproduces the same conversation, corrections included
        starts = [r for r in records if isinstance(r, Mapping) and r.get("type") == "start"]
        self.native_tools = bool(starts and starts[0].get("native_tools"))
        self.position = 0
        self.requests: list[list[Message]] = []

    def complete(
        self, messages: Sequence[Message], *, system: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Completion:
        self.requests.append([dict(m) for m in messages])
        if self.position >= len(self.replies):
            raise EngineRequestError(
                f"the script {self.model!r} has no reply left (it had {len(self.replies)})")
        reply = self.replies[self.position]
        self.position += 1
        return reply


def to_completion(record: Any) -> Completion | None:
    """One script entry as the reply it stands for (None for transcript bookkeeping)."""
    if isinstance(record, Completion):
        return record
    if isinstance(record, str):
        return Completion(text=record)
    if not isinstance(record, Mapping):
        raise EngineConfigError(f"a script entry must be an object or a string, got {record!r}")
    kind = record.get("type")
    if kind in _TRANSCRIPT_ONLY:
        return None
    if kind == "turn" or "text" in record or "tool_calls" in record:
        return Completion.from_dict(record)
    return Completion(text=json.dumps(dict(record), ensure_ascii=False))


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """The records of a JSONL script or transcript file."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise EngineConfigError(f"cannot read the script {os.fspath(path)!r}: {exc}") from exc
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise EngineConfigError(f"{os.fspath(path)}:{number}: not JSON: {exc}") from exc
    return records
