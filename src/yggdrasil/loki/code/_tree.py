"""The files of a root as the last whole walk listed them, kept current by change events.

After one walk of the root has parsed every source file it lists, the index keeps that
listing (a :class:`Tree`) and a :class:`~..shell.TreeWatch` (inotify, the watcher that
serves a command's ``changed``) started before the walk. A later question then costs no
walk: the events queued since the last question name the files to read again (a write
tool, a command, a job, an editor: the kernel reports them all), and the listing, the
skipped counts and the notes come from memory. What the events cannot settle alone (a
file created or deleted, a folder moved, an ignore file changed, the queue overflowed)
sends the index back to a walk, which re-reads only files whose stat changed.

Paths are kept as walk-order keys (``/`` as NUL, see ``search``), so the files below a
folder are one slice of a sorted list.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..files import Diff
from ..search import Skips
from ..shell import TreeWatch

__all__ = ["Tree", "start_watch"]

_IGNORE_NAMES = frozenset({".rgignore", ".ignore", ".gitignore"})


def start_watch(root: str) -> TreeWatch | None:
    """A watch of every folder of ``root``, or None (no inotify, limits, too many files)."""
    try:
        watch = TreeWatch(root)  # type: ignore[arg-type]
        watch.rebuild(())
    except OSError:
        return None
    if not watch.complete:
        watch.notify.close()
        return None
    return watch


@dataclass
class Tree:
    keys: list[str]  # every file the walk listed, as sorted walk-order keys
    skips: list[tuple[str, str]]  # (kind, key) of every entry the walk skipped
    watch: TreeWatch
    ignore_folders: set[str] = field(default_factory=set)  # folders holding an ignore file
    ignore_kinds: set[str] = field(default_factory=set)  # which ignore files there are
    stale: bool = False  # the watch itself can no longer be trusted

    @classmethod
    def of(cls, rels: Iterable[str], skips: Skips, watch: TreeWatch) -> Tree:
        keys = sorted(rel.replace("/", "\0") for rel in rels)
        found = [key.replace("\0", "/") for kind, key in skips.seen
                 if kind == "hidden" and key.rsplit("\0", 1)[-1] in _IGNORE_NAMES]
        return cls(keys, list(skips.seen), watch, {os.path.dirname(r) or "." for r in found},
                   {r.rsplit("/", 1)[-1] for r in found})

    def covers_watched(self) -> bool:
        """Whether every listed file lies where the watch hears events (it does not look
        inside .git, node_modules, virtualenvs...: the search walk may list those)."""
        for folder in self.watch.skipped:
            key = folder.replace("/", "\0") + "\0"
            at = bisect.bisect_left(self.keys, key)
            if at < len(self.keys) and self.keys[at].startswith(key):
                return False
        return True

    def lists(self, rel: str) -> bool:
        key = rel.replace("/", "\0")
        at = bisect.bisect_left(self.keys, key)
        return at < len(self.keys) and self.keys[at] == key

    def changes(self) -> Diff | None:
        """What changed since the last call (the watch's events folded in); None when the
        events cannot be trusted or do not settle the listing (walk again)."""
        try:
            found = self.watch.update(())
        except Exception:  # the watch's _Stale (overflow, root moved) or an OSError
            self.stale = True
            return None
        structural = (found.created or found.deleted or found.created_dirs
                      or found.lost_dirs)
        if structural or any(p.rsplit("/", 1)[-1] in _IGNORE_NAMES for p in found.modified):
            return None
        return found

    def answers(self, start: str) -> bool:
        """Whether a walk from ``start`` lists exactly this listing's files below it: it
        must not be skipped itself, and when ignore files of several kinds are about, none
        may lie above it (a walk from a folder ranks the kinds above it differently)."""
        if start == ".":
            return True
        if len(self.ignore_kinds) > 1 and any(
                f == "." or start.startswith(f + "/") for f in self.ignore_folders):
            return False
        key = start.replace("/", "\0")
        parts = key.split("\0")
        above = {"\0".join(parts[:n]) for n in range(1, len(parts) + 1)}
        return not any(k in above for _, k in self.skips)

    def under(self, start: str) -> list[str]:
        """The listed files below ``start``, in walk order, as root-relative paths."""
        if start == ".":
            chosen = self.keys
        else:
            key = start.replace("/", "\0")
            lo = bisect.bisect_left(self.keys, key + "\0")
            hi = bisect.bisect_left(self.keys, key + "\1")
            chosen = self.keys[lo:hi]
        return [k.replace("\0", "/") for k in chosen]

    def skipped(self, start: str) -> dict[str, int]:
        """grep's skipped counts for a walk from ``start``."""
        out = {"ignored": 0, "hidden": 0, "binary": 0, "protected": 0}
        prefix = None if start == "." else start.replace("/", "\0") + "\0"
        for kind, key in self.skips:
            if prefix is None or key.startswith(prefix):
                out[kind] += 1
        return out

    def close(self) -> None:
        self.watch.notify.close()
