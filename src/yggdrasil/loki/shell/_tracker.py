"""What a command changed, read from the root's shared changes feed (see ``_feed``).

:class:`ChangeTracker` answers "what did this command create, modify or delete?" with
``begin()`` before the command and ``end()`` after. Where it can, it reads the root's one
:class:`~._feed.TreeFeed` (the inotify view the code index reads too): ``begin`` moves
its cursor past whatever changed since the last command (write/edit tools, the user's
editor), ``end`` reads what changed since. Without inotify (not Linux, watch or instance
limits reached) and when the feed cannot say (a queue overflow) it falls back to two
full snapshots, which is always correct, just slower.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from ..files import Diff
from ._changes import Signature, Snapshot, diff, runs_code, snapshot, without_cache_deletions
from ._feed import Reader, TreeFeed, feed_for
from ._watch import TreeWatch

__all__ = ["ChangeTracker"]


class ChangeTracker:
    """``begin()`` before a command, ``end()`` after: what the command changed in the root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reader: Reader | None = None
        self.use_watch = sys.platform == "linux"
        self.before: Snapshot | None = None

    @property
    def feed(self) -> TreeFeed | None:
        return self.reader.feed if self.reader is not None else None

    @property
    def watch(self) -> TreeWatch | None:
        """The root's shared watch (``complete``: its view can be trusted)."""
        feed = self.feed
        return feed.watch if feed is not None else None

    def _complete(self) -> TreeWatch | None:
        watch = self.watch
        return watch if watch is not None and watch.complete else None

    def begin(self, skip: Iterable[Path] = ()) -> None:
        skip = list(skip)
        self.before = None
        if self.use_watch:
            try:
                self._catch_up(skip)
                return
            except OSError:  # no inotify, a watch/instance limit, or too big: scan instead
                self._give_up_watching()
        self.before = snapshot(self.root, skip=skip)

    def _catch_up(self, skip: list[Path]) -> None:
        """Move past what changed since the last command (not the command's) and keep
        the view as it is now, for a fallback."""
        if self.reader is None:
            self.reader = feed_for(self.root).reader(skip)
        feed = self.reader.feed
        with feed.lock:
            feed.catch_up(self.reader, skip)
            watch = feed.ready()
            self.before = Snapshot(dict(watch.files), set(watch.dirs), dict(watch.skipped),
                                   sentinel=set(watch.sentinel))

    def end(self, skip: Iterable[Path] = ()) -> Diff:
        skip = list(skip)
        before, self.before = self.before, None
        if before is None:
            return Diff(tracked=False)
        if self.reader is not None:
            found = self.reader.feed.read(self.reader, skip)
            if found is not None:
                return without_cache_deletions(found.diff)
        return without_cache_deletions(diff(before, snapshot(self.root, skip=skip)))

    def _view(self) -> tuple[dict[str, Signature], dict[str, int], set[str]]:
        """(files, skipped folders, sentinel files) as of the last begin(), copied."""
        feed, watch = self.feed, self._complete()
        if feed is not None and watch is not None:
            with feed.lock:
                return dict(watch.files), dict(watch.skipped), set(watch.sentinel)
        if self.before is not None:
            return self.before.files, self.before.skipped, self.before.sentinel
        return {}, {}, set()

    def tree(self) -> tuple[Iterable[str], Iterable[str]] | None:
        """(files, folders) of the root as of the last begin(), root-relative; the skipped
        folders are listed but not their contents; None when that view is not complete
        (too many files)."""
        feed, watch = self.feed, self._complete()
        if feed is not None and watch is not None:
            with feed.lock:
                return list(watch.files), [*watch.dirs, *watch.skipped]
        if self.before is not None and self.before.complete:
            return self.before.files.keys(), [*self.before.dirs, *self.before.skipped]
        return None

    def git_dirs(self) -> list[str]:
        """The root's ``.git`` folders and files (any depth), as absolute paths."""
        feed, watch = self.feed, self._complete()
        if feed is not None and watch is not None:
            with feed.lock:
                skipped = list(watch.skipped)
                pointer = ".git" in watch.files
        else:
            files, found, _ = self._view()
            skipped, pointer = list(found), ".git" in files
        rels = [r for r in skipped if r.rsplit("/", 1)[-1] == ".git"]
        rels += [".git"] if pointer else []  # a worktree's `gitdir:` pointer
        return [os.path.join(self.root, r) for r in rels]

    def code_files(self) -> list[str]:
        """Tracked files that run code later (see ``runs_code`` and ``sentinels``)."""
        feed, watch = self.feed, self._complete()
        if feed is not None and watch is not None:
            with feed.lock:
                return sorted(watch.code)
        files, _, sentinel = self._view()
        return sorted(sentinel | {r for r in files if runs_code(r)})

    def close(self) -> None:
        """Stop reading the feed (the last reader of a root closes its watch); the next
        ``begin`` reads it again."""
        if self.reader is not None:
            self.reader.feed.release(self.reader)
            self.reader = None

    def _give_up_watching(self) -> None:
        self.close()
        self.use_watch = False
