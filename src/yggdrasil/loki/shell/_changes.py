"""What a command changed in the root: a stat-only snapshot before and after, compared.

No file is opened: a file counts as modified when its (size, mtime_ns, inode, mode)
differs, so an atomic rename-over, a chmod and an in-place write all show. Like git's
racy-clean window, a rewrite to the same size within one filesystem timestamp tick of the
previous write can go unseen.

Folders that are tool state rather than project files are not walked: VCS metadata,
dependency trees, virtualenvs (any folder holding a ``pyvenv.cfg``) and caches. The
search tools skip these too (and more: every hidden entry); this list is kept here on
purpose, since a change to ``.env`` or ``.gitignore`` must be reported even though search
hides it.

Those folders are still watched from outside: a skipped folder that vanished, moved away
or was replaced by another one (a new inode) counts as a deletion nobody can undo
(``Diff.lost_dirs``), since its contents were never copied.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..files import Diff

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".jj", "node_modules", ".venv", "venv", "__pycache__",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".ipynb_checkpoints",
    ".cache", ".gradle", ".next", ".parcel-cache", ".turbo",
})
MAX_FILES = 250_000  # a bigger tree is not tracked (its walk would cost seconds per command)

Signature = tuple[int, int, int, int]  # size, mtime_ns, inode, mode


@dataclass
class Snapshot:
    files: dict[str, Signature] = field(default_factory=dict)  # root-relative POSIX paths
    dirs: set[str] = field(default_factory=set)
    skipped: dict[str, int] = field(default_factory=dict)  # skipped folder -> its inode
    linked: set[str] = field(default_factory=set)  # files with more than one hard link
    complete: bool = True  # False when the walk stopped at MAX_FILES


def snapshot(root: Path, *, skip: Iterable[Path] = (), limit: int = MAX_FILES,
             below: str = "", on_dir: Callable[[str, str], None] | None = None) -> Snapshot:
    """Stat every file below ``root`` (not following links), minus the skipped folders.

    ``below`` (a root-relative folder) walks only that subtree and counts it among the
    folders; ``on_dir(rel, path)`` hears every folder about to be listed, the start
    included (rel "" for the root), virtualenvs too (they are dropped from ``dirs``).
    """
    snap = Snapshot()
    skip_real = {os.fspath(p) for p in skip}
    start = os.path.join(os.fspath(root), below) if below else os.fspath(root)
    stack = [(start, below + "/" if below else "")]
    if below:
        snap.dirs.add(below)
    while stack:
        folder, prefix = stack.pop()
        if on_dir is not None:  # before listing: whatever appears after is still heard of
            on_dir(prefix[:-1], folder)
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue  # vanished or unreadable mid-walk: nothing to compare there
        if prefix and any(e.name == "pyvenv.cfg" for e in entries):
            snap.dirs.discard(prefix[:-1])
            _note_skipped(snap, prefix[:-1], folder)
            continue
        for entry in entries:
            rel = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in SKIP_DIRS:
                        _note_skipped(snap, rel, entry.path)
                    elif entry.path not in skip_real:
                        snap.dirs.add(rel)
                        stack.append((entry.path, rel + "/"))
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            snap.files[rel] = signature(st)
            if st.st_nlink > 1:
                snap.linked.add(rel)
        if len(snap.files) > limit:
            snap.complete = False
            break
    return snap


def _note_skipped(snap: Snapshot, rel: str, path: str) -> None:
    ino = skipped_inode(path)
    if ino is not None:
        snap.skipped[rel] = ino


def skipped_inode(path: str) -> int | None:
    """The inode of the (not followed) folder at ``path``; None when it is not one."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino if stat.S_ISDIR(st.st_mode) else None


def lost(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """Skipped folders of ``before`` that are gone from ``after`` or another folder now."""
    return sorted(rel for rel, ino in before.items() if after.get(rel) != ino)


def linked_inodes(folders: Iterable[str]) -> set[int]:
    """Inodes of the files below ``folders`` that have more than one hard link."""
    found: set[int] = set()
    for top in folders:
        for folder, _, names in os.walk(top):
            for name in names:
                try:
                    st = os.lstat(os.path.join(folder, name))
                except OSError:
                    continue
                if st.st_nlink > 1 and stat.S_ISREG(st.st_mode):
                    found.add(st.st_ino)
    return found


def signature(st: os.stat_result) -> Signature:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)


def diff(before: Snapshot, after: Snapshot) -> Diff:
    if not (before.complete and after.complete):
        return Diff(tracked=False)
    old, new = before.files, after.files
    found = Diff(created_dirs=sorted(after.dirs - before.dirs),
                 lost_dirs=lost(before.skipped, after.skipped))
    for path, sig in new.items():  # one pass; the (short) result lists are sorted after
        was = old.get(path)
        if was is None:
            found.created.append(path)
        elif was != sig:
            found.modified.append(path)
    if len(old) + len(found.created) != len(new):
        found.deleted = [p for p in old if p not in new]
    for paths in (found.created, found.modified, found.deleted):
        paths.sort()
    return found
