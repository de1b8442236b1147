"""A toolbox's checkpoints: one after every call that may change files, and rewind.

``Checkpoints`` hears every path the run changes (``note``: the toolbox's ``record``,
which the journal calls for tools, commands and background jobs alike), and after each
call keeps the state of those paths (``step``): a file's mode and bytes (in the store,
deduplicated), a link's target, or that it is gone. The first checkpoint (the baseline:
every file as the run found it) is taken in the background (``_baseline``), so what a
command changes can be put back too. ``rewind(step)`` puts the root's files back as
they were right after that step, through ``Root``; a rewind is a step of its own, so
a later rewind can undo it.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import LokiError, ToolError
from ..files import Journal, JournalEntry, Root, Store, StoreError
from ..results import CheckpointInfo, CheckpointList, NotRestored, RewindResult
from ._baseline import BaselineWalk
from ._plan import plan
from ._prune import prune
from ._rewind import apply, folders, lock_root, state_diff
from ._state import ABSENT, State, observe
from ._timeline import Timeline

__all__ = ["CheckpointLimits", "Checkpoints", "new_run_id"]

log = logging.getLogger("yggdrasil.loki.checkpoints")

BASELINE_WAIT = 3600.0  # seconds a command waits for the first checkpoint at most


def new_run_id() -> str:
    """A run's id: sortable by start time (the same shape as ``loop.new_run_id``)."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


@dataclass(frozen=True)
class CheckpointLimits:
    max_file: int = 64 << 20  # bytes: a bigger file is listed, its bytes not kept
    max_bytes: int = 2 << 30  # bytes: the store's size, pruned to it (oldest runs first)
    max_age: float = 14 * 86400.0  # seconds: runs older are pruned


class Checkpoints:
    """The checkpoints of one toolbox, as run ``run`` in the store at ``folder``."""

    def __init__(self, root: Root, folder: Path, *,
                 limits: CheckpointLimits = CheckpointLimits(), run: str | None = None,
                 new: bool = True) -> None:
        self.root = replace(root, restores=True)  # puts back what was
        self.journal: Journal | None = None
        self.folder = folder
        self.limits = limits
        self.store = Store(folder)
        self.timeline = Timeline(self.store)
        self.run = run or new_run_id()
        if new:
            self.timeline.new_run(self.run, str(root.path))
        elif self.timeline.run(self.run) is None:
            raise LokiError(f"no checkpoints of run {self.run!r} in {folder} (never kept, "
                            "or pruned)")
        self.n = 0  # the last step's number
        self.pending: dict[str, None] = {}  # paths changed since the last step
        self.stopped = ""  # why checkpointing stopped (a full disk): nothing more is kept
        self.unrecorded: set[str] = set()  # paths changed since it stopped
        self._told = False  # the stop was said in a call's result
        self._dirs_seen = 0
        self._caught_up = False  # the baseline was brought up to the first command
        self._begun = False  # the first checkpoint is being (or was) taken
        self._made: dict[str, str] = {}  # folders a rewind removed or made: "d/" -> how
        self._lock = threading.RLock()
        self.walk = BaselineWalk(self.root, self.store, self.timeline, self.run,
                                 max_file=limits.max_file, max_bytes=limits.max_bytes,
                                 skip=self._skipped)

    @classmethod
    def of_run(cls, run: str, folder: Path, root: Root, *,
               limits: CheckpointLimits = CheckpointLimits()) -> Checkpoints:
        """The checkpoints of a run that has ended (``loki rewind``): listed and rewound
        as its toolbox would, each rewind a step of that run. LokiError when the store
        holds no such run."""
        keeper = cls(root, folder, limits=limits, run=run, new=False)
        keeper.n = keeper.timeline.last_step(run)
        keeper.walk.result = keeper.timeline.baseline(run)
        keeper.walk.done_now()
        keeper._caught_up = keeper._begun = True
        return keeper

    def start(self, journal: Journal | None = None) -> Checkpoints:
        """Hear the journal's originals; the first checkpoint is taken from the first call
        on (``begin``); returns itself."""
        self.journal = journal
        if journal is not None:
            journal.first_touch = self._first_touch
            self._dirs_seen = len(journal.created_dirs)
        return self

    def begin(self) -> None:
        """Before a call: take the first checkpoint in the background, and prune the store
        (at most hourly), unless that has begun already. A toolbox that is only listed
        (``loki tools``) walks nothing."""
        if self._begun:
            return
        with self._lock:
            if self._begun:
                return
            self._begun = True
        self.walk.start()
        threading.Thread(target=self._prune, name="loki-prune", daemon=True).start()

    def _skipped(self) -> list[Path]:
        return self.journal.private_dirs() if self.journal is not None else []

    # -- hearing changes and taking steps ------------------------------------------------

    def note(self, rel: str) -> None:
        with self._lock:
            self.pending.setdefault(rel)

    def close(self) -> None:
        """Stop the first checkpoint's walk (a toolbox that closes before it began walks
        nothing after)."""
        with self._lock:
            self._begun = True
        self.walk.stop()

    def wait_baseline(self) -> None:
        """Before a command or a job starts: the first checkpoint must be whole, since a
        command's changes are kept only as a difference from it."""
        self.begin()
        if not self.walk.done:
            self.walk.wait(BASELINE_WAIT)
        if not self._caught_up:
            self._caught_up = True
            touched = set(self.journal.entries) if self.journal is not None else set()
            with self._lock:
                touched |= self.timeline.paths_after(self.run, 0) | set(self.pending)
            try:
                self.walk.catch_up(touched)
            except (StoreError, OSError) as exc:
                log.warning("the first checkpoint could not be brought up to date: %s", exc)

    def _first_touch(self, rel: str, entry: JournalEntry) -> None:
        if not entry.existed:
            self.walk.offer(rel, ABSENT)
            return
        key = getattr(entry.backup, "hash", None)
        size = getattr(entry.backup, "size", 0)
        why = "" if key else ("its original is kept only by this process's undo (larger than "
                              f"{self.limits.max_file} bytes, or the store could not take it)")
        self.walk.offer(rel, State("file", entry.mode, key, size, why=why))

    def step(self, tool: str, *, tracked: bool = True) -> int | None:
        """Keep the state of every path changed since the last step, as step n+1; its
        number (the last one's when nothing changed; None once checkpointing stopped)."""
        with self._lock:
            paths, self.pending = list(self.pending), {}
            dirs = self._new_dirs()
            made, self._made = self._made, {}
            if not (paths or dirs or made or self.stopped) and tracked:
                return self.n  # nothing changed: the root is as the last checkpoint holds it
            n = self.n + 1
            note = "" if tracked else ("a command's changes were not tracked (too many files "
                                       "in the root): a rewind past this step is partial")
            if self.stopped:
                self.unrecorded.update(paths)
                return None
            try:
                with self.store.transaction():  # one commit for the step (100,000 files...)
                    states = {rel: observe(self.root, rel, self.store, self.limits.max_file,
                                           fast=True) for rel in paths}
                    states.update((d + "/", State("dir")) for d in dirs)
                    states.update((d, State("dir") if how == "mkdir" else ABSENT)
                                  for d, how in made.items())
                    self.timeline.add_step(self.run, n, tool, states, note)
            except (StoreError, OSError, ValueError) as exc:  # ValueError: a bug of ours,
                self.stopped = f"checkpointing stopped at step {n}: {exc}"  # never the step's
                self.unrecorded.update(paths)
                log.warning("%s", self.stopped)
                return None
            self.n = n
            return n

    def unsaid_stop(self) -> str:
        """Why checkpointing stopped, the first time it is asked ('' otherwise)."""
        if self.stopped and not self._told:
            self._told = True
            return self.stopped
        return ""

    def _new_dirs(self) -> list[str]:
        if self.journal is None:
            return []
        made = self.journal.created_dirs[self._dirs_seen:]
        self._dirs_seen = len(self.journal.created_dirs)
        return list(made)

    def follow(self, run: str, step: int | None = None) -> None:
        """Continue ``run``'s timeline after its ``step`` (default: its last): this
        toolbox's steps number on from there, and a rewind may go back into it. Only
        before this toolbox's first step."""
        with self._lock:
            if self.n:
                raise LokiError("follow() must come before the first checkpoint")
            last = self.timeline.last_step(run)
            step = last if step is None else step
            if self.timeline.run(run) is None or not 0 <= step <= last:
                raise LokiError(f"run {run!r} has no checkpoint {step} (it has 0-{last})")
            with self.store.transaction() as db:
                db.execute("UPDATE runs SET parent=?, parent_step=? WHERE id=?",
                           (run, step, self.run))
            self.n = step

    # -- reading ---------------------------------------------------------------------------

    def listing(self) -> CheckpointList:
        steps = self.timeline.steps(self.run)
        infos = [CheckpointInfo(n=s.n, run=s.run, tool=s.tool, at=s.at,
                                paths=list(s.paths), note=s.note)
                 for s in steps]
        note = self.stopped or ("" if self.walk.done else
                                "the first checkpoint (every file as the run found it) is "
                                "still being taken")
        if self.walk.done and self.walk.error:
            note = f"the first checkpoint is partial: {self.walk.error}"
        return CheckpointList(run=self.run, checkpoints=infos, note=note)

    def step_diffs(self, each: int = 20_000, total: int = 200_000) -> dict[int, str]:
        """The diff each step of this run made to the files (from the state before it to
        the state after it), each cut to ``each`` characters and ``total`` in all."""
        out: dict[int, str] = {}
        used = 0
        for info in self.timeline.steps(self.run):
            if info.run != self.run or used >= total:
                continue
            paths = {p for p in info.paths if not p.endswith("/")}
            before = self.timeline.states_at(self.run, info.n - 1, paths)
            after = self.timeline.states_at(self.run, info.n, paths)
            text = "".join(state_diff(self.store, p, before[p], after[p]) for p in sorted(paths))
            room = min(each, total - used)
            if len(text) > room:
                text = text[:room] + f"\n# [cut at {room} of {len(text)} characters]\n"
            out[info.n] = text
            used += len(text)
        return out

    # -- rewinding -------------------------------------------------------------------------

    def rewind(self, step: int, paths: Iterable[str] | None = None, *,
               dry_run: bool = False, record: bool = True) -> tuple[RewindResult, list[str]]:
        """Put the root back as right after ``step``; the result, and the paths now as
        they were when this toolbox began (the journal forgets those). ``record``: take a
        step for the rewind now (else the calling tool's step holds it)."""
        if self.pending:
            self.step("(before rewind)")
        if not 0 <= step <= self.n:
            raise ToolError(f"there is no checkpoint {step}: this run has 0 (before its first "
                            f"step) to {self.n}", category="argument")
        self.wait_baseline()
        with lock_root(self.folder, self.root.path):
            return self._rewind(step, paths, dry_run, record)

    def _rewind(self, step: int, only: Iterable[str] | None, dry_run: bool,
                record: bool) -> tuple[RewindResult, list[str]]:
        changes, refused = plan(self.timeline, self.run, self.n, step, self.root, only)
        lost = self.unrecorded if only is None else self.unrecorded & set(only)
        refused += [NotRestored(path=p, why=f"changed after {self.stopped}: not covered")
                    for p in sorted(lost)]
        dirs = [c for c in changes if c.rel.endswith("/") and not c.refused]
        changes = [c for c in changes if c not in dirs]
        out = apply(self.root, self.store, changes, dry_run=dry_run)
        out.done += folders(self.root, [c.rel[:-1] for c in dirs if c.target.kind != "dir"],
                            [c.rel[:-1] for c in dirs if c.target.kind == "dir"],
                            dry_run=dry_run)
        result = RewindResult(run=self.run, step=step, dry_run=dry_run,
                              not_restored=[*refused, *out.not_restored], diff=out.diff,
                              **{"would_restore" if dry_run else "restored": out.done})
        if dry_run or not out.done:
            return result, []
        files = [r.path for r in out.done if r.action not in ("rmdir", "mkdir")]
        at_step = self.timeline.states_at(self.run, step, set(files))
        back = [p for p in files if self.timeline.start_state(self.run, p).same(at_step[p])]
        for path in files:
            self.note(path)
        with self._lock:
            self._made.update({r.path + "/": r.action for r in out.done
                               if r.action in ("rmdir", "mkdir")})
        if not record:
            return result, back
        return result.model_copy(update={"checkpoint": self.step("rewind")}), back

    # -- lifetime ----------------------------------------------------------------------------

    def _prune(self) -> None:
        try:
            prune(self.timeline, self.limits, keep={self.run})
        except (StoreError, OSError, LokiError):
            log.debug("pruning the checkpoint store failed", exc_info=True)
