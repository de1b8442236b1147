"""Which protected paths of the root a command gets masked (``Root.protect``).

Before each command the tracker's view of the root (kept current by inotify, see
``_watch``) is matched against the protected globs, so the list is as fresh as the
command: a ``.env`` made by an earlier command, by a tool or by the user is masked from
the next command on. Only the outermost protected path is listed (a protected folder
covers its contents). Each path is matched once, so a command costs the paths that are
new since the last one (and a set difference over the tree), not a match per file.

Folders the tracker does not walk (``.git``, ``node_modules``, virtualenvs, caches) are
not looked into: what matches there is package data (certifi's ``cacert.pem``), and
masking it would break the tools that read it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, KeysView

from ..files import Protection
from ._changes import SKIP_DIRS

_MAX_REMEMBERED = 1_000_000  # paths; past this the memory is dropped and rebuilt


class ProtectedPaths:
    """The protected paths of a tree, each path matched once: later calls match only the
    paths they have not seen (set differences, at C speed) and keep the hits."""

    def __init__(self, protect: Protection) -> None:
        self.protect = protect
        self._seen: set[str] = set()
        self._hits: set[str] = set()
        self._seen_dirs: set[str] = set()
        self._hit_dirs: set[str] = set()

    def outermost(self, files: Iterable[str], dirs: Iterable[str]) -> list[str]:
        """Root-relative protected paths among ``files`` and ``dirs``, none inside another."""
        if len(self._seen) > _MAX_REMEMBERED:
            self._seen.clear()
            self._hits.clear()
        files = files if isinstance(files, (set, KeysView)) else set(files)
        dirs = {d for d in dirs if d}
        new = files - self._seen
        self._hits.update(rel for rel in new if self.protect.entry(rel, False) is not None)
        self._seen.update(new)
        new = dirs - self._seen_dirs
        self._hit_dirs.update(rel for rel in new if self.protect.entry(rel, True) is not None)
        self._seen_dirs.update(new)
        covered = self._hit_dirs & dirs
        outer = [d for d in covered if not _inside(d, covered)]
        found = [f for f in self._hits & files if not _inside(f, covered)]
        return sorted(outer + found)


def _inside(rel: str, folders: set[str]) -> bool:
    """Whether a folder above ``rel`` is one of ``folders``."""
    parent = rel.rpartition("/")[0]
    while parent:
        if parent in folders:
            return True
        parent = parent.rpartition("/")[0]
    return False


def walk_protected(root: str, protect: Protection) -> list[str]:
    """The same list from a walk of its own (a tree too big for the tracker's view)."""
    found: list[str] = []
    stack = [""]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(os.path.join(root, folder)) as it:
                entries = list(it)
        except OSError:
            continue
        if folder and any(e.name == "pyvenv.cfg" for e in entries):
            continue
        for entry in entries:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if protect.entry(rel, is_dir) is not None:
                found.append(rel)
            elif is_dir and entry.name not in SKIP_DIRS:
                stack.append(rel)
    return sorted(found)
