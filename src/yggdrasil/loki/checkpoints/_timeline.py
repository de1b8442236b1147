"""The checkpoints of runs, as tables beside the blobs of the store.

A run has a baseline (every file of the root when it started, as a manifest blob: the
state of each path) and numbered steps; a step holds the state, right after it, of each
path it changed. The state of a path at step ``k`` is its entry of the last step at or
before ``k``, else its baseline. A run may continue another (``loki do --continue``, a
fleet attempt started from another's checkpoint): ``parent`` and ``parent_step`` say
where, its steps number on from there, and the steps before are the parent's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..files import Store, StoreError
from ._state import State

__all__ = ["Baseline", "RunInfo", "StepInfo", "Timeline"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, root TEXT NOT NULL, started REAL NOT NULL, parent TEXT,
    parent_step INTEGER, baseline TEXT, baseline_note TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS runs_root ON runs (root, started);
CREATE TABLE IF NOT EXISTS steps (
    run TEXT NOT NULL, n INTEGER NOT NULL, tool TEXT NOT NULL, at REAL NOT NULL,
    note TEXT NOT NULL DEFAULT '', PRIMARY KEY (run, n));
CREATE TABLE IF NOT EXISTS entries (
    run TEXT NOT NULL, n INTEGER NOT NULL, path TEXT NOT NULL, state TEXT NOT NULL,
    hash TEXT, PRIMARY KEY (run, path, n));
CREATE INDEX IF NOT EXISTS entries_step ON entries (run, n);
"""


@dataclass
class Baseline:
    """The root when a run started: each file's state; ``complete`` False when the walk
    stopped (too many files or bytes: ``note``), then a path it lacks is unknown."""

    files: dict[str, State] = field(default_factory=dict)
    complete: bool = True
    note: str = ""

    def state(self, rel: str) -> State:
        found = self.files.get(rel)
        if found is not None:
            return found
        if self.complete:
            return State("absent")
        return State("unknown", why=f"the first checkpoint did not cover it ({self.note})")

    def dumps(self) -> bytes:
        body = {"complete": self.complete, "note": self.note,
                "files": {p: s.listed() for p, s in self.files.items()}}
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def loads(cls, data: bytes) -> Baseline:
        body = json.loads(data)
        return cls({p: State.loads(s) for p, s in body["files"].items()},
                   bool(body["complete"]), str(body["note"]))


@dataclass(frozen=True)
class RunInfo:
    id: str
    root: str
    started: float
    parent: str | None
    parent_step: int | None
    baseline: str | None  # the manifest's blob; None until the walk has finished
    baseline_note: str


@dataclass(frozen=True)
class StepInfo:
    run: str
    n: int
    tool: str
    at: float
    note: str
    paths: tuple[str, ...]


class Timeline:
    """The runs, steps and entries tables of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        with store.lock:
            store.db.executescript(_SCHEMA)
        self._baselines: dict[str, Baseline] = {}

    # -- runs --------------------------------------------------------------------------

    def new_run(self, run: str, root: str, parent: str | None = None,
                parent_step: int | None = None) -> None:
        with self.store.transaction() as db:
            db.execute("INSERT OR IGNORE INTO runs (id, root, started, parent, parent_step) "
                       "VALUES (?, ?, ?, ?, ?)", (run, _key(root), time.time(), parent,
                                                  parent_step))

    def run(self, run: str) -> RunInfo | None:
        with self.store.lock:
            row = self.store.db.execute(
                "SELECT id, root, started, parent, parent_step, baseline, baseline_note "
                "FROM runs WHERE id=?", (run,)).fetchone()
        return _info(row) if row else None

    def runs(self, root: str | None = None) -> list[RunInfo]:
        query = ("SELECT id, root, started, parent, parent_step, baseline, baseline_note "
                 "FROM runs" + (" WHERE root=?" if root else "") + " ORDER BY started")
        with self.store.lock:
            rows = self.store.db.execute(query, (_key(root),) if root else ()).fetchall()
        return [_info(row) for row in rows]

    def set_baseline(self, run: str, baseline: Baseline) -> None:
        key = self.store.put(baseline.dumps())
        with self.store.transaction() as db:
            db.execute("UPDATE runs SET baseline=?, baseline_note=? WHERE id=?",
                       (key, baseline.note, run))
        self._baselines[run] = baseline

    def baseline(self, run: str) -> Baseline | None:
        if run in self._baselines:
            return self._baselines[run]
        info = self.run(run)
        if info is None or info.baseline is None:
            return None
        found = self._baselines[run] = Baseline.loads(self.store.read(info.baseline))
        return found

    # -- steps -------------------------------------------------------------------------

    def add_step(self, run: str, n: int, tool: str, states: dict[str, State],
                 note: str = "") -> None:
        with self.store.transaction() as db:
            db.execute("INSERT INTO steps (run, n, tool, at, note) VALUES (?, ?, ?, ?, ?)",
                       (run, n, tool, time.time(), note))
            db.executemany("INSERT INTO entries (run, n, path, state, hash) VALUES (?, ?, ?, ?, ?)",
                           ((run, n, _key(p), s.dumps(), s.hash) for p, s in states.items()))

    def last_step(self, run: str) -> int:
        """The number of the run's last step (its parent's when it has none of its own)."""
        with self.store.lock:
            row = self.store.db.execute("SELECT max(n) FROM steps WHERE run=?", (run,)).fetchone()
        if row[0] is not None:
            return int(row[0])
        info = self.run(run)
        return int(info.parent_step or 0) if info is not None else 0

    def chain(self, run: str) -> list[tuple[RunInfo, int, int]]:
        """(run, first step, last step) of each run the timeline of ``run`` goes through,
        the oldest first: a parent's range ends at its child's ``parent_step``."""
        found: list[tuple[RunInfo, int, int]] = []
        upto: int | None = None
        seen: set[str] = set()
        current: str | None = run
        while current is not None and current not in seen:
            seen.add(current)
            info = self.run(current)
            if info is None:
                raise StoreError(f"no checkpoints of run {current!r} in the store (pruned?)")
            last = self.last_step(current) if upto is None else upto
            first = (info.parent_step or 0) + 1 if info.parent else 1
            found.append((info, first, last))
            upto, current = info.parent_step, info.parent
        return found[::-1]

    def steps(self, run: str) -> list[StepInfo]:
        """Every step of the timeline of ``run``, its parents' first."""
        out: list[StepInfo] = []
        for info, first, last in self.chain(run):
            with self.store.lock:
                rows = self.store.db.execute(
                    "SELECT n, tool, at, note FROM steps WHERE run=? AND n BETWEEN ? AND ? "
                    "ORDER BY n", (info.id, first, last)).fetchall()
                paths = self.store.db.execute(
                    "SELECT n, path FROM entries WHERE run=? AND n BETWEEN ? AND ? "
                    "ORDER BY n, path", (info.id, first, last)).fetchall()
            by_step: dict[int, list[str]] = {}
            for n, path in paths:
                by_step.setdefault(n, []).append(_path(path))
            out += [StepInfo(info.id, n, tool, at, note, tuple(by_step.get(n, ())))
                    for n, tool, at, note in rows]
        return out

    def paths_after(self, run: str, step: int) -> set[str]:
        """Every path a step after ``step`` changed, in the timeline of ``run``."""
        found: set[str] = set()
        for info, first, last in self.chain(run):
            if last <= step:
                continue
            with self.store.lock:
                rows = self.store.db.execute(
                    "SELECT DISTINCT path FROM entries WHERE run=? AND n BETWEEN ? AND ?",
                    (info.id, max(first, step + 1), last)).fetchall()
            found.update(_path(r[0]) for r in rows)
        return found

    def state_at(self, run: str, step: int, rel: str) -> State:
        """The state of ``rel`` right after ``step`` (0: as the first run began)."""
        return self.states_at(run, step, {rel})[rel]

    def states_at(self, run: str, step: int, paths: set[str]) -> dict[str, State]:
        """The state of each of ``paths`` right after ``step``: its entry of the last
        step at or before it in the run whose range holds it, else that run's baseline."""
        chain = self.chain(run)
        info, first, last = next((seg for seg in reversed(chain)  # the run holding the step
                                  if not (step < seg[1] - 1 and seg[0].parent is not None)),
                                 chain[0])
        found: dict[str, State] = {}
        with self.store.lock:
            rows = self.store.db.execute(
                "SELECT path, state FROM entries WHERE run=? AND n BETWEEN ? AND ? ORDER BY n",
                (info.id, first, min(step, last))).fetchall()
        for key, state in rows:
            path = _path(key)
            if path in paths:
                found[path] = State.loads(state)
        for path in paths - found.keys():
            found[path] = self.start_state(info.id, path)
        return found

    def start_state(self, run: str, rel: str) -> State:
        """The state of ``rel`` when ``run`` began (its baseline)."""
        base = self.baseline(run)
        if base is None:
            return State("unknown", why="the first checkpoint of the run was never finished")
        return base.state(rel)

    def hashes(self, runs: Iterable[str]) -> set[str]:
        """Every blob the given runs refer to (entries, baselines and what they hold)."""
        live: set[str] = set()
        for run in runs:
            with self.store.lock:
                rows = self.store.db.execute(
                    "SELECT DISTINCT hash FROM entries WHERE run=? AND hash IS NOT NULL",
                    (run,)).fetchall()
            live.update(r[0] for r in rows)
            info = self.run(run)
            if info is not None and info.baseline is not None:
                live.add(info.baseline)
                base = self.baseline(run)
                if base is not None:
                    live.update(s.hash for s in base.files.values() if s.hash)
        return live

    def forget(self, runs: Iterable[str]) -> None:
        with self.store.transaction() as db:
            for run in runs:
                for table, key in (("entries", "run"), ("steps", "run"), ("runs", "id")):
                    db.execute(f"DELETE FROM {table} WHERE {key}=?", (run,))
                self._baselines.pop(run, None)


def _key(path: str) -> bytes:
    """A path as the tables keep it: its bytes (a name that is not UTF-8, kept by Python
    as surrogate escapes, cannot be SQLite text)."""
    return path.encode("utf-8", "surrogateescape")


def _path(key: bytes | str) -> str:
    return key.decode("utf-8", "surrogateescape") if isinstance(key, bytes) else key


def _info(row: tuple[object, ...]) -> RunInfo:
    run, root, *rest = row
    return RunInfo(str(run), _path(root), *rest)  # type: ignore[arg-type]
