"""What a rewind does, path by path, before anything is touched: the plan.

``plan`` lists, for every path a step after the target changed, what the last checkpoint
saw there and what it should become (a ``Change``); across the start of a run that
continued another, a path that changed between the two runs is kept. ``materialize``
does the same from a run's beginning for a fresh copy of its tree (a fleet attempt that
starts from another's checkpoint), checking the copy by content.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from ..errors import LokiError, ToolError
from ..files import Root, Store
from ..results import NotRestored, RewindResult
from ._rewind import Change, apply, folders
from ._timeline import Timeline

__all__ = ["materialize", "plan"]

def plan(timeline: Timeline, run: str, last: int, step: int, root: Root,
         only: Iterable[str] | None) -> tuple[list[Change], list[NotRestored]]:
    """The changes that bring every path a step after ``step`` changed back to its state
    at ``step``, and the paths asked for that cannot be named."""
    paths = timeline.paths_after(run, step)
    refused: list[NotRestored] = []
    if only is not None:
        wanted: set[str] = set()
        for path in only:
            try:
                wanted.add(_relative(root, path))
            except LokiError as exc:
                refused.append(NotRestored(path=path, why=str(exc)))
        refused += [NotRestored(path=p, why="no step after this one changed it")
                    for p in sorted(wanted - paths)]
        paths &= wanted
    expected = timeline.states_at(run, last, paths)
    target = timeline.states_at(run, step, paths)
    crossed = _crossed(timeline, run, step, paths)
    changes = []
    for rel in sorted(paths):
        change = Change(rel, expected[rel], target[rel])
        if rel.endswith("/") and change.expected.kind == "unknown":  # loki does not look in
            change.refused = change.expected.why
        else:
            change.refused = crossed.get(rel, "")
        changes.append(change)
    return changes, refused


def _crossed(timeline: Timeline, run: str, step: int, paths: set[str]) -> dict[str, str]:
    """Why each of ``paths`` must be kept when the rewind goes back across the start of a
    run that continued another: it changed between the two runs, outside both."""
    why: dict[str, str] = {}
    for info, first, _ in timeline.chain(run):
        if info.parent is None or step >= first - 1:
            continue
        before = timeline.states_at(info.parent, first - 1, paths)
        for rel in paths:
            after = timeline.start_state(info.id, rel)
            if after.kind != "unknown" and not before[rel].same(after) and not (
                    before[rel].kind == after.kind == "absent"):
                why.setdefault(rel, f"changed between run {info.parent} and run {info.id}, "
                                    "outside both; kept, never overwritten")
    return why


def _relative(root: Root, path: str) -> str:
    """Root-relative form of a path as the user or model wrote it (a link named itself);
    PathError outside the root."""
    named = Path(os.path.normpath(root.path / os.fspath(path)))
    if named == root.path or not named.is_relative_to(root.path):
        raise ToolError(f"path {path!r} is not inside the root {root.path}", category="path")
    return root.rel(named)


def materialize(folder: Path, root: Root, run: str, step: int) -> RewindResult:
    """Make ``root`` (a fresh copy of the tree ``run`` began from: a fleet attempt's) hold
    the files as ``run`` left them right after ``step``: each path its steps up to there
    changed is put as it was then, where the copy holds what the run began from (checked
    by content); the others are listed."""
    store = Store(folder)
    timeline = Timeline(store)
    if timeline.run(run) is None:
        raise LokiError(f"no checkpoints of run {run!r} in {folder} (never kept, pruned, or "
                        "kept on another machine)")
    last = timeline.last_step(run)
    if not 0 <= step <= last:
        raise LokiError(f"run {run!r} has no checkpoint {step} (it has 0-{last})")
    paths: set[str] = set()
    for info in timeline.steps(run):
        if info.n <= step:
            paths.update(info.paths)
    start = timeline.states_at(run, 0, paths)
    target = timeline.states_at(run, step, paths)
    changes = [Change(p, start[p], target[p], by_content=True) for p in sorted(paths)
               if not p.endswith("/")]
    out = apply(replace(root, restores=True), store, changes, dry_run=False)
    out.done += folders(root, [], [p[:-1] for p in paths if p.endswith("/")
                                   and target[p].kind == "dir"], dry_run=False)
    return RewindResult(run=run, step=step, restored=out.done, not_restored=out.not_restored,
                        diff=out.diff)
