"""The run's records as it goes: one stream, and what subscribes to it.

A run emits each record once into its :class:`Stream`, which stamps it with ``type``,
``run``, ``time`` (ISO 8601, UTC) and ``elapsed`` (seconds since the run began, from a
monotonic clock, so it never goes back) and hands it to every subscriber, each taking the
kinds it keeps: the JSONL transcript (:class:`Transcript`: what a run keeps, replayed by
the scripted engine, resumed by ``Session.from_transcript``), the watcher's events
(``on_event``, ``loki do --events``: :data:`EVENT_KINDS`, shaped by
``events.schema.json`` beside this module) and ``on_step`` (the ``step`` records).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from typing import IO, Any

from ..results import json_text

__all__ = ["EVENTS_SCHEMA", "EVENT_KINDS", "TRANSCRIPT_KINDS", "Clock", "Stream", "Transcript",
           "events_schema"]

EVENTS_SCHEMA = "events.schema.json"
EVENT_KINDS = frozenset({"run_started", "request", "usage", "tool_call", "observation",
                         "correction", "finished"})  # what on_event and --events see
TRANSCRIPT_KINDS = frozenset({"start", "message", "turn", "step", "end"})  # what a run keeps
Record = dict[str, Any]


def events_schema() -> dict[str, Any]:
    """The JSON Schema every event validates against."""
    text = resources.files(__package__).joinpath(EVENTS_SCHEMA).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


class Clock:
    """When a run began, and the stamps of its records."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def elapsed(self) -> float:
        return round(time.monotonic() - self.start, 6)

    def stamp(self) -> dict[str, Any]:
        return {"time": datetime.now(UTC).isoformat(timespec="microseconds"),
                "elapsed": self.elapsed()}


class Stream:
    """A run's records: each emitted once, stamped once, and handed to every subscriber."""

    def __init__(self, run: str, clock: Clock) -> None:
        self.run, self.clock = run, clock
        self._subscribers: list[tuple[frozenset[str] | None, Callable[[Record], None]]] = []

    def subscribe(self, sink: Callable[[Record], None],
                  kinds: frozenset[str] | None = None) -> None:
        """Call ``sink(record)`` for each record of ``kinds`` (None: every record)."""
        self._subscribers.append((kinds, sink))

    def emit(self, kind: str, **fields: Any) -> None:
        record = {"type": kind, "run": self.run, **self.clock.stamp(), **fields}
        for kinds, sink in self._subscribers:
            if kinds is None or kind in kinds:
                sink(record)


class Transcript:
    """A JSONL log written record by record as the run goes (nothing when ``path`` is None)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._file: IO[str] | None = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115

    def write(self, record: Record) -> None:
        if self._file is not None:
            self._file.write(json_text(record) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
