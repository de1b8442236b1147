"""One file watcher per root, shared: the changes feed that change tracking and the code
index both read.

A root's :class:`TreeFeed` owns its one :class:`TreeWatch` (one walk, one inotify
instance, one watch per folder) however many readers it has: each toolbox's change
tracker (what a command changed, see ``_watch``) and the code index (which files to read
again, see ``code._tree``). Whoever reads first folds the queued events into the watch's
snapshot; what that fold found is kept in a short log, so every other reader gets the
same changes on its next read, from where it last read (its :class:`Reader`'s cursor).
A reader that fell behind the log's cap, or whose view predates a rebuild (the queue
overflowed, the root moved), is told so (None) and looks again its own way.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..files import Diff
from ._watch import Stale, TreeWatch

__all__ = ["Reader", "TreeChange", "TreeFeed", "feed_for", "feeds"]

MAX_LOGGED = 200_000  # paths the log keeps for readers that have not read them yet


@dataclass
class TreeChange:
    """What one or more folds found: the files' diff, the folders that vanished, and
    whether the set of folders the watch does not enter (.git, venvs) changed."""

    diff: Diff = field(default_factory=Diff)
    gone_dirs: set[str] = field(default_factory=set)
    skips_changed: bool = False

    def size(self) -> int:
        d = self.diff
        return len(d.created) + len(d.modified) + len(d.deleted) + len(d.created_dirs) + 1


@dataclass(eq=False)
class Reader:
    """Where one reader of a feed is: the rebuild it saw (``epoch``) and the last fold.
    It keeps its feed alive; the feed keeps its readers weakly, so a root nobody reads
    any more lets its watch go (the inotify descriptor closes with it)."""

    feed: TreeFeed
    epoch: int
    seq: int


class TreeFeed:
    """The shared watch of one root and the log of what its folds found."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.lock = threading.RLock()
        self.watch: TreeWatch | None = None
        self.epoch = 0  # counts rebuilds: a reader of an older one must look again
        self.seq = 0  # counts folds
        self.builds = 0  # whole walks of the root (rebuilds of the watch)
        self.skip: list[Path] = []  # what the change tracker last said not to track
        self.log: deque[tuple[int, TreeChange]] = deque()
        self._logged = 0
        self._readers: weakref.WeakSet[Reader] = weakref.WeakSet()
        self._floor = 0  # folds older than this were dropped from the log
        self.closed = False

    # -- the watch ---------------------------------------------------------------------

    def ready(self, skip: Iterable[Path] | None = None) -> TreeWatch:
        """The watch, built (a walk of the root) when there is none or it cannot be
        trusted; raises OSError when the root cannot be watched whole."""
        with self.lock:
            if skip is not None:
                self.skip = list(skip)
            if self.watch is not None and self.watch.complete:
                return self.watch
            if self.watch is None:
                self.watch = TreeWatch(Path(self.root))
            self.watch.rebuild(self.skip)
            self.builds += 1
            self._restart()
            if not self.watch.complete:
                raise OSError("too many files to watch")
            return self.watch

    def _restart(self) -> None:
        self.epoch += 1
        self.log.clear()
        self._logged = 0
        self._floor = self.seq

    def _fold(self) -> None:
        """Fold the queued events into the watch and log what they changed."""
        watch = self.watch
        if watch is None or not watch.complete:
            raise Stale("the watch is not built")
        dirs, skipped = set(watch.dirs), dict(watch.skipped)
        try:
            found = watch.update(self.skip)
        except (Stale, OSError):
            watch.complete = False  # rebuilt by the next ready()
            self._restart()
            raise
        gone = dirs - watch.dirs
        moved = watch.skipped != skipped
        if not (found or found.created_dirs or gone or moved):
            return
        self.seq += 1
        change = TreeChange(found, gone, moved)
        self.log.append((self.seq, change))
        self._logged += change.size()
        self._trim()

    def _trim(self) -> None:
        behind = min((r.seq for r in self._readers if r.epoch == self.epoch), default=self.seq)
        while self.log and (self.log[0][0] <= behind or self._logged > MAX_LOGGED):
            seq, change = self.log.popleft()
            self._logged -= change.size()
            self._floor = max(self._floor, seq)

    # -- readers -----------------------------------------------------------------------

    def reader(self, skip: Iterable[Path] | None = None) -> Reader:
        """A new reader, its cursor at now (the watch built if needed); OSError as ready."""
        with self.lock:
            self.ready(skip)
            found = Reader(self, self.epoch, self.seq)
            self._readers.add(found)
            return found

    def catch_up(self, reader: Reader, skip: Iterable[Path] | None = None) -> None:
        """Move ``reader`` to now, whatever changed meanwhile (rebuilding a watch that
        cannot be trusted); OSError as ready."""
        with self.lock:
            if skip is not None:
                self.skip = list(skip)
            with contextlib.suppress(Stale, OSError):
                self._fold()
            self.ready()
            reader.epoch, reader.seq = self.epoch, self.seq
            self._readers.add(reader)
            self._trim()

    def read(self, reader: Reader, skip: Iterable[Path] | None = None) -> TreeChange | None:
        """What changed since ``reader`` last read (its cursor moves to now); None when
        that cannot be said (a rebuild since, the log's cap, a watch gone stale)."""
        with self.lock:
            if skip is not None:
                self.skip = list(skip)
            if reader.epoch != self.epoch or reader.seq < self._floor:
                return None
            try:
                self._fold()
            except (Stale, OSError):
                return None
            changes = [c for seq, c in self.log if seq > reader.seq]
            reader.seq = self.seq
            self._trim()
            return _merged(changes, self.watch)

    def release(self, reader: Reader) -> None:
        """``reader`` reads no more; the last one out closes the watch."""
        with self.lock:
            self._readers.discard(reader)
            if not self._readers:
                self.close()

    def close(self) -> None:
        with self.lock:
            if self.watch is not None:
                self.watch.notify.close()
                self.watch = None
            self._restart()
            with _registry_lock:
                if _feeds.get(self.root) is self:
                    del _feeds[self.root]
            self.closed = True


def _merged(changes: list[TreeChange], watch: TreeWatch | None) -> TreeChange:
    """Several folds' changes as one: what a single fold over their time would say."""
    if len(changes) == 1:  # a copy: each reader may add to its own
        one = changes[0]
        d = one.diff
        return TreeChange(Diff(list(d.created), list(d.modified), list(d.deleted),
                           list(d.created_dirs), list(d.lost_dirs), d.tracked, dict(d.seen)),
                      set(one.gone_dirs), one.skips_changed)
    if not changes:
        return TreeChange()
    first: dict[str, bool] = {}  # path -> it existed before the first change that names it
    last: dict[str, bool] = {}  # path -> it exists after the last
    out = TreeChange()
    for change in changes:
        d = change.diff
        for paths, existed, exists in ((d.created, False, True), (d.modified, True, True),
                                       (d.deleted, True, False)):
            for rel in paths:
                first.setdefault(rel, existed)
                last[rel] = exists
        out.diff.seen.update(d.seen)
        out.diff.lost_dirs += [r for r in d.lost_dirs if r not in out.diff.lost_dirs]
        out.diff.created_dirs += d.created_dirs
        out.gone_dirs |= change.gone_dirs
        out.skips_changed = out.skips_changed or change.skips_changed
    for rel, existed in first.items():
        exists = last[rel]
        if exists and not existed:
            out.diff.created.append(rel)
        elif exists:
            out.diff.modified.append(rel)
        elif existed:
            out.diff.deleted.append(rel)
    for paths in (out.diff.created, out.diff.modified, out.diff.deleted):
        paths.sort()
    dirs = watch.dirs if watch is not None else set()
    out.diff.created_dirs = sorted({d for d in out.diff.created_dirs if d in dirs})
    out.gone_dirs = {d for d in out.gone_dirs if d not in dirs}
    out.diff.seen = {r: i for r, i in out.diff.seen.items()
                     if r in out.diff.created or r in out.diff.modified}
    return out


_feeds: weakref.WeakValueDictionary[str, TreeFeed] = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()


def feed_for(root: str | os.PathLike[str]) -> TreeFeed:
    """The one feed of ``root`` in this process (made on first use; no walk yet)."""
    key = os.fspath(root)
    with _registry_lock:
        found = _feeds.get(key)
        if found is None or found.closed:
            found = _feeds[key] = TreeFeed(key)
        return found


def feeds() -> dict[str, TreeFeed]:
    """The feeds of this process by root (what is watched, for tests and status)."""
    with _registry_lock:
        return dict(_feeds)
