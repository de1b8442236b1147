"""The files of a root as the last whole walk listed them, kept current by change events.

After one walk of the root has parsed every source file it lists, the index keeps that
listing (a :class:`Tree`) and a reader of the root's one changes feed
(:class:`~..shell.TreeFeed`: the inotify watch that also serves a command's ``changed``,
shared, never a second one) taken before the walk. A later question then costs no walk:
what the feed heard since the last question names the files to read again (a write
tool, a command, a job, an editor: the kernel reports them all), and the listing, the
skipped counts and the notes come from memory. A file created or deleted is put in or
taken out of the listing as the walk would (``search.PathCheck`` reads the ignore files
on its way down). What the events cannot settle alone (an ignore file changed, a folder
the watch does not enter appeared or vanished, the queue overflowed) sends the index
back to a walk, which re-reads only files whose stat changed.

Paths are kept as walk-order keys (``/`` as NUL, see ``search``), so the files below a
folder are one slice of a sorted list.
"""

from __future__ import annotations

import bisect
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..files import Diff
from ..search import Skips
from ..shell import Reader, TreeWatch, feed_for

__all__ = ["Tree", "start_watch"]

_IGNORE_NAMES = frozenset({".rgignore", ".ignore", ".gitignore"})
MAX_BLIND = 250_000  # listed files the watch cannot hear of (more: walk on each call)
BLIND_EACH = 4_000  # of those, statted on each call (more: a turn each, by rotation)


def _mtime(path: str) -> int:
    try:
        st = os.lstat(path)
    except OSError:
        return -1
    return st.st_mtime_ns if stat.S_ISDIR(st.st_mode) else -1


def start_watch(root: str) -> Reader | None:
    """A reader of the root's changes feed from now (its one watch of every folder, built
    when no one watches the root yet), or None (no inotify, limits, too many files)."""
    try:
        return feed_for(root).reader()
    except OSError:
        return None


@dataclass
class Tree:
    keys: list[str]  # every file the walk listed, as sorted walk-order keys
    skips: dict[str, str]  # key -> kind of every entry the walk skipped
    reader: Reader
    ignore_folders: set[str] = field(default_factory=set)  # folders holding an ignore file
    ignore_kinds: set[str] = field(default_factory=set)  # which ignore files there are
    stale: bool = False  # the watch itself can no longer be trusted
    blind: list[str] = field(default_factory=list)  # listed files the watch hears nothing of
    blind_dirs: dict[str, int] = field(default_factory=dict)  # their folders -> mtime_ns
    blind_at: int = 0  # where the next call's share of the blind files starts
    skips_changed: int = 0  # counts changes to ``skips`` (summaries recount them)
    listed: set[str] = field(default_factory=set)  # the keys again, for lists()

    def __post_init__(self) -> None:
        self.listed = set(self.keys)

    @classmethod
    def of(cls, rels: Iterable[str], skips: Skips, reader: Reader) -> Tree:
        keys = sorted(rel.replace("/", "\0") for rel in rels)
        found = [key.replace("\0", "/") for kind, key in skips.seen
                 if kind == "hidden" and key.rsplit("\0", 1)[-1] in _IGNORE_NAMES]
        return cls(keys, {key: kind for kind, key in skips.seen}, reader,
                   {os.path.dirname(r) or "." for r in found},
                   {r.rsplit("/", 1)[-1] for r in found})

    @property
    def watch(self) -> TreeWatch:
        watch = self.reader.feed.watch
        if watch is None:
            raise OSError("the root's watch was closed")
        return watch

    def see_blind(self) -> bool:
        """Note the listed files in folders the watch does not enter (it skips .git,
        node_modules, virtualenvs and any folder *named* venv, such as the standard
        library's package): each call stats their folders, and them (up to BLIND_EACH a
        call; more take turns). False when there are too many to keep."""
        root = self.watch.root
        for folder in self.watch.skipped:
            key = folder.replace("/", "\0") + "\0"
            at = bisect.bisect_left(self.keys, key)
            while at < len(self.keys) and self.keys[at].startswith(key):
                self.blind.append(self.keys[at].replace("\0", "/"))
                at += 1
            if len(self.blind) > MAX_BLIND:
                return False
        for rel in self.blind:
            parts = rel.split("/")[:-1]
            for n in range(1, len(parts) + 1):
                here = "/".join(parts[:n])
                if here not in self.blind_dirs and here not in self.watch.dirs:
                    self.blind_dirs[here] = _mtime(os.path.join(root, here))
        return True

    def blind_changes(self) -> list[str] | None:
        """The blind files to stat again this call; None when one of their folders
        changed (a file came, went or was renamed there). Up to ``BLIND_EACH`` files a
        call: a tree with more (a virtualenv's site-packages, node_modules) stats each
        of them every few calls instead of falling back to a walk on every call; an
        edit inside such a folder that adds no file is then seen a few calls late."""
        root = self.watch.root
        if any(_mtime(os.path.join(root, d)) != t for d, t in self.blind_dirs.items()):
            return None
        if len(self.blind) <= BLIND_EACH:
            return self.blind
        start = self.blind_at % len(self.blind)
        self.blind_at = start + BLIND_EACH
        share = self.blind[start:start + BLIND_EACH]
        return share + self.blind[:BLIND_EACH - len(share)]

    def lists(self, rel: str) -> bool:
        return rel.replace("/", "\0") in self.listed

    def changes(self) -> tuple[Diff, set[str]] | None:
        """What changed since the last call (the watch's events folded in) and the folders
        that vanished; None when the events cannot be trusted or do not settle the
        listing (walk again)."""
        change = self.reader.feed.read(self.reader)
        if change is None:  # the feed cannot say (overflow, root moved, fell behind)
            self.stale = True
            return None
        found = change.diff
        if found.lost_dirs or change.skips_changed:
            return None  # a folder the watch does not enter came or went
        paths = (*found.created, *found.modified, *found.deleted)
        if any(p.rsplit("/", 1)[-1] in _IGNORE_NAMES for p in paths):
            return None
        return found, set(change.gone_dirs)

    def add(self, rel: str) -> None:
        key = rel.replace("/", "\0")
        at = bisect.bisect_left(self.keys, key)
        if at == len(self.keys) or self.keys[at] != key:
            self.keys.insert(at, key)
            self.listed.add(key)

    def remove(self, rel: str) -> bool:
        key = rel.replace("/", "\0")
        at = bisect.bisect_left(self.keys, key)
        if at < len(self.keys) and self.keys[at] == key:
            del self.keys[at]
            self.listed.discard(key)
            return True
        return False

    def skip(self, kind: str, rel: str) -> None:
        key = rel.replace("/", "\0")
        if key not in self.skips:
            self.skips[key] = kind
            self.skips_changed += 1

    def unskip_gone(self, rel: str, root: str) -> None:
        """Forget skipped entries at or above ``rel`` that no longer exist."""
        parts = rel.split("/")
        for n in range(1, len(parts) + 1):
            key = "\0".join(parts[:n])
            if key in self.skips and not os.path.lexists(os.path.join(root, *parts[:n])):
                del self.skips[key]
                self.skips_changed += 1

    def answers(self, start: str) -> bool:
        """Whether a walk from ``start`` lists exactly this listing's files below it: it
        must not be skipped itself, and when ignore files of several kinds are about, none
        may lie above it (a walk from a folder ranks the kinds above it differently)."""
        if start == ".":
            return True
        if len(self.ignore_kinds) > 1 and any(
                f == "." or start.startswith(f + "/") for f in self.ignore_folders):
            return False
        parts = start.split("/")
        return not any("\0".join(parts[:n]) in self.skips for n in range(1, len(parts) + 1))

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
        for key, kind in self.skips.items():
            if prefix is None or key.startswith(prefix):
                out[kind] += 1
        return out

    def close(self) -> None:
        self.reader.feed.release(self.reader)
