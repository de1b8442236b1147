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

A path once masked stays masked while it exists, wherever it goes: a command cannot
rename or remove a masked path (it is a mount point), but it can rename a folder above
it (``mv config node_modules/``, a folder not walked) or make that folder look like a
virtualenv (a ``pyvenv.cfg``), which took the file out of the list. So each masked path
is remembered by identity (device, inode); one that is no longer where it was is looked
for in the whole tree, skipped folders included, and masked where it is found.
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


class MaskedPaths:
    """Every path masked so far, by identity: ``follow`` adds those still in the tree to
    a command's list, where they are now (see the module docstring)."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) -> root-relative

    def follow(self, root: str, found: list[str]) -> list[str]:
        """``found`` plus every path masked before that still exists, outermost only."""
        for rel in found:
            if (key := _identity(root, rel)) is not None:
                self._known[key] = rel
        keep = set(found)
        lost = {}
        for key, rel in self._known.items():
            if rel not in keep:
                if _identity(root, rel) == key:
                    keep.add(rel)
                else:
                    lost[key] = rel
        if lost:  # moved with a folder above it, or gone (the user removed it)
            moved = _find_identities(root, set(lost))
            for key in lost:
                if key in moved:
                    self._known[key] = moved[key]
                    keep.add(moved[key])
                else:
                    del self._known[key]
        return sorted(rel for rel in keep if not _inside(rel, keep))


def _identity(root: str, rel: str) -> tuple[int, int] | None:
    try:
        st = os.lstat(os.path.join(root, rel))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _find_identities(root: str, keys: set[tuple[int, int]]) -> dict[tuple[int, int], str]:
    """Where each (device, inode) of ``keys`` lives below ``root``: a walk of every folder
    (skipped ones too), links not followed, stopped once all are found."""
    found: dict[tuple[int, int], str] = {}
    inodes = {ino for _, ino in keys}
    stack = [""]
    while stack and len(found) < len(keys):
        folder = stack.pop()
        try:
            with os.scandir(os.path.join(root, folder)) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            try:
                if entry.inode() in inodes:
                    st = entry.stat(follow_symlinks=False)
                    if (st.st_dev, st.st_ino) in keys:
                        found[(st.st_dev, st.st_ino)] = rel
                if entry.is_dir(follow_symlinks=False):
                    stack.append(rel)
            except OSError:
                continue
    return found


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
