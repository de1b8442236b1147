"""Keeping the store bounded: runs older than ``max_age`` go, then the oldest runs until
the store is under ``max_bytes``; blobs no remaining run refers to go with them.

A run's blobs are its steps' entries and its baseline (the manifest and every file it
names). A blob stored in the last ``GRACE`` seconds is spared even when nothing refers
to it yet (a session still taking its first checkpoint, in this process or another).
Pruning runs at most once per ``EVERY`` seconds per store, in a thread of its own.
"""

from __future__ import annotations

import time
from typing import Any

from ._timeline import Timeline

__all__ = ["prune"]

GRACE = 3600.0
EVERY = 3600.0


def prune(timeline: Timeline, limits: Any, keep: set[str], *, force: bool = False) -> list[str]:
    """Forget the runs past the limits (never those in ``keep``); their ids."""
    store = timeline.store
    now = time.time()
    with store.transaction() as db:
        row = db.execute("SELECT value FROM meta WHERE key='pruned'").fetchone()
        if not force and row is not None and now - float(row[0]) < EVERY:
            return []
        db.execute("INSERT OR REPLACE INTO meta VALUES ('pruned', ?)", (str(now),))
    runs = [r for r in timeline.runs() if r.id not in keep]
    old = [r.id for r in runs if r.started < now - limits.max_age]
    gone = list(old)
    if old:
        timeline.forget(old)
        _collect(timeline)
    left = [r.id for r in runs if r.id not in old]
    while left and store.bytes_used() > limits.max_bytes:
        timeline.forget([left[0]])
        gone.append(left.pop(0))
        _collect(timeline)
    return gone


def _collect(timeline: Timeline) -> int:
    live = timeline.hashes(r.id for r in timeline.runs())
    return timeline.store.collect(live, GRACE)
