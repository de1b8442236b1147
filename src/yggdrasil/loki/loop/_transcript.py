"""The run's records as it goes: the JSONL transcript and the event stream.

Both stamp each record with ``time`` (ISO 8601, UTC) and ``elapsed`` (seconds since the
run began, from a monotonic clock, so it never goes back). The transcript is what a run
keeps (replayed by the scripted engine, resumed by ``Session.from_transcript``); events
are what a watcher sees (``on_event``, ``loki do --events``), shaped by
``events.schema.json`` beside this module.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from typing import IO, Any

from ..files import json_text

__all__ = ["EVENTS_SCHEMA", "Clock", "Events", "Transcript", "events_schema"]

EVENTS_SCHEMA = "events.schema.json"


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


class Transcript:
    """A JSONL log written line by line as the run goes (nothing when ``path`` is None)."""

    def __init__(self, path: str | os.PathLike[str] | None, clock: Clock | None = None) -> None:
        self._file: IO[str] | None = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
        self.clock = clock or Clock()

    def write(self, kind: str, **fields: Any) -> None:
        if self._file is not None:
            self._file.write(json_text({"type": kind, **self.clock.stamp(), **fields}) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class Events:
    """Calls ``sink(event)`` with each event of a run (nothing when ``sink`` is None)."""

    def __init__(self, sink: Callable[[dict[str, Any]], None] | None, run: str,
                 clock: Clock) -> None:
        self.sink, self.run, self.clock = sink, run, clock

    def emit(self, kind: str, **fields: Any) -> None:
        if self.sink is not None:
            self.sink({"type": kind, "run": self.run, **self.clock.stamp(), **fields})
