"""An inotify view of a root: a stat snapshot kept current at a cost that grows with the
change, not with the tree.

:class:`TreeWatch` keeps one stat snapshot of the root current through inotify (a watch
per folder): ``update`` re-stats only the paths the kernel named and rewalks only folders
that appeared, moved or vanished. The verdict is the same as two full snapshots would
give (stat signatures compared, never contents), because every event only nominates a
path to re-stat. One per root, shared by its readers (``_feed``): the change tracker
(``_tracker``) and the code index. A queue overflow or a moved root raises
:class:`Stale`: the view is rebuilt by a walk.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..files import Diff
from ._changes import (
    SKIP_DIRS,
    Signature,
    identity_of,
    linked_inodes,
    lost,
    runs_code,
    sentinels,
    signature,
    skipped_inode,
    snapshot,
)

_MODIFY, _ATTRIB, _CLOSE_WRITE = 0x2, 0x4, 0x8
_MOVED_FROM, _MOVED_TO, _CREATE, _DELETE = 0x40, 0x80, 0x100, 0x200
_DELETE_SELF, _MOVE_SELF, _OVERFLOW, _IGNORED = 0x400, 0x800, 0x4000, 0x8000
_ONLYDIR, _DONT_FOLLOW, _EXCL_UNLINK, _ISDIR = 0x01000000, 0x02000000, 0x04000000, 0x40000000
_MASK = (_MODIFY | _ATTRIB | _CLOSE_WRITE | _MOVED_FROM | _MOVED_TO | _CREATE | _DELETE
         | _DELETE_SELF | _MOVE_SELF | _ONLYDIR | _DONT_FOLLOW | _EXCL_UNLINK)
_NONBLOCK, _CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name

Event = tuple[int, int, str]  # wd, mask, name


class _Inotify:
    """The three inotify calls through ctypes; raises OSError like os functions do."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._check(self.libc.inotify_init1(_NONBLOCK | _CLOEXEC))
        self._closer = weakref.finalize(self, os.close, self.fd)

    def _check(self, result: int) -> int:
        if result < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return result

    def add(self, path: str) -> int:
        return self._check(self.libc.inotify_add_watch(self.fd, os.fsencode(path), _MASK))

    def remove(self, wd: int) -> None:
        self.libc.inotify_rm_watch(self.fd, wd)  # fails harmlessly if already gone

    def events(self) -> Iterator[Event]:
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            pos = 0
            while pos < len(buf):
                wd, mask, _, size = _EVENT.unpack_from(buf, pos)
                name = buf[pos + _EVENT.size : pos + _EVENT.size + size].rstrip(b"\0")
                yield wd, mask, os.fsdecode(name)
                pos += _EVENT.size + size

    def close(self) -> None:
        self._closer()


class Stale(Exception):
    """The watched view can no longer be trusted (overflow, root moved): rescan."""


class TreeWatch:
    """A snapshot of ``root`` (files -> stat signature, folders) kept current by inotify."""

    def __init__(self, root: Path) -> None:
        self.root = os.fspath(root)
        self.notify = _Inotify()
        self.files: dict[str, Signature] = {}
        self.dirs: set[str] = set()
        self.skipped: dict[str, int] = {}  # folders not walked (.git, venvs) -> inode
        self.linked: set[str] = set()  # files with other hard links: re-stat after each command
        self._new_links: set[str] = set()
        self.sentinel: set[str] = set()  # files inside skipped folders that run code later
        self.code: set[str] = set()  # every tracked file that runs code later
        self.wd_of: dict[str, int] = {}
        self.dir_of: dict[int, str] = {}
        self.complete = False

    def rebuild(self, skip: Iterable[Path]) -> None:
        """Forget everything and walk the whole root again, watching every folder."""
        for wd in list(self.dir_of):
            self.notify.remove(wd)
        self.wd_of.clear()
        self.dir_of.clear()
        list(self.notify.events())  # drop what was queued for the old view
        snap = snapshot(Path(self.root), skip=skip, on_dir=self._watch)
        self.files, self.dirs, self.complete = snap.files, snap.dirs | {""}, snap.complete
        self.skipped, self.linked, self.sentinel = snap.skipped, snap.linked, snap.sentinel
        self.code = {r for r in self.files if runs_code(r)} | self.sentinel
        self._unwatch_untracked()

    def update(self, skip: Iterable[Path]) -> Diff:
        """Apply the queued events; return what they changed (raises Stale when unsure)."""
        candidates: set[str] = set()
        dirty: set[str] = set()
        for wd, mask, name in self.notify.events():
            if mask & _OVERFLOW:
                raise Stale("inotify queue overflowed")
            folder = self.dir_of.get(wd)
            if mask & _IGNORED:
                self.dir_of.pop(wd, None)
            if folder is None or folder not in self.dirs or mask & _IGNORED:
                continue
            if mask & (_DELETE_SELF | _MOVE_SELF):
                if folder == "":
                    raise Stale("the root itself was moved or deleted")
                dirty.add(folder)
                continue
            rel = f"{folder}/{name}" if folder else name
            if not mask & _ISDIR:
                candidates.add(rel)
            elif mask & (_CREATE | _DELETE | _MOVED_FROM | _MOVED_TO):
                dirty.add(rel)
        # A write through a hard link in a folder nobody watches ($TMPDIR, .git) raises no
        # event here: re-stat every file known to have another link, and those whose inode
        # has a link in the skipped (scratch) folders.
        skip_paths = {os.fspath(p) for p in skip}
        candidates |= self.linked | self._linked_from(skip_paths)
        return self._settle(candidates, _outermost(dirty), skip_paths)

    # -- folding events into the snapshot ------------------------------------------------

    def _settle(self, candidates: set[str], dirty: list[str], skip: set[str]) -> Diff:
        old_dirs = set(self.dirs)
        fresh: dict[str, Signature] = {}
        gone: list[str] = []
        if dirty:
            prefixes = tuple(d + "/" for d in dirty)
            candidates.update(f for f in self.files if f.startswith(prefixes))
            gone = self._lost_skipped(set(dirty), prefixes)
            for d in [d for d in self.dirs if d in dirty or d.startswith(prefixes)]:
                self._unwatch(d)
            for d in dirty:
                fresh.update(self._rewalk(d, skip))
        found = Diff(lost_dirs=gone)
        self._new_links.clear()
        self._fold((candidates | fresh.keys()) - self.sentinel, fresh, skip, found)
        # Files that run code inside skipped folders get no events: look at them each time.
        now = sentinels(self.root, self.skipped)
        self._fold(self.sentinel | now.keys(), now, skip, found, sentinel=True)
        self.sentinel = set(now)
        # A file that just got a second name: its other names changed too (link count).
        inodes = {self.files[r][2] for r in self._new_links if r in self.files}
        if inodes:  # (looking through every file costs ~10 ms per 10,000)
            twins = ({r for r, sig in self.files.items() if sig[2] in inodes} - candidates
                     - fresh.keys() - self.sentinel)
            self._fold(twins, {}, skip, found)
        for paths in (found.created, found.modified, found.deleted):
            paths.sort()
        found.created_dirs = sorted(self.dirs - old_dirs)
        return found

    def _fold(self, rels: set[str], fresh: dict[str, Signature], skip: set[str],
              found: Diff, *, sentinel: bool = False) -> None:
        for rel in sorted(rels):
            new = fresh[rel] if rel in fresh else self._stat(rel, skip)
            was = self.files.get(rel)
            if was is None and new is not None:
                found.created.append(rel)
            elif was is not None and new is None:
                found.deleted.append(rel)
            elif was != new:
                found.modified.append(rel)
            if new is not None and was != new:
                found.seen[rel] = identity_of(new)
            if new is None:
                self.files.pop(rel, None)
                self.linked.discard(rel)
                self.code.discard(rel)
            else:
                self.files[rel] = new
                if sentinel or runs_code(rel):
                    self.code.add(rel)

    def _linked_from(self, folders: set[str]) -> set[str]:
        """Tracked files sharing an inode with a multiply-linked file in ``folders``."""
        inodes = linked_inodes(folders)
        return {r for r, sig in self.files.items() if sig[2] in inodes} if inodes else set()

    def _lost_skipped(self, dirty: set[str], prefixes: tuple[str, ...]) -> list[str]:
        """Skipped folders at or below a dirty folder, forgotten; those gone or replaced."""
        near = {r: ino for r, ino in self.skipped.items() if r in dirty or r.startswith(prefixes)}
        for rel in near:
            del self.skipped[rel]
        now = {r: ino for r in near if os.path.dirname(r) in self.dirs
               and (ino := skipped_inode(os.path.join(self.root, r))) is not None}
        return lost(near, now)  # the rewalk of the dirty folders records what is there now

    def _rewalk(self, rel: str, skip: set[str]) -> dict[str, Signature]:
        path = os.path.join(self.root, rel)
        if (path in skip or not os.path.isdir(path) or os.path.islink(path)
                or os.path.dirname(rel) not in self.dirs):
            return {}
        if rel.rsplit("/", 1)[-1] in SKIP_DIRS:
            ino = skipped_inode(path)
            if ino is not None:
                self.skipped[rel] = ino
            return {}
        snap = snapshot(Path(self.root), below=rel, skip=map(Path, skip), on_dir=self._watch)
        self.dirs |= snap.dirs
        self.skipped.update(snap.skipped)
        self.linked |= snap.linked
        self._new_links |= snap.linked
        self._unwatch_untracked()
        return snap.files

    def _stat(self, rel: str, skip: set[str]) -> Signature | None:
        """The signature of a file that is still tracked there; None when gone."""
        parent = os.path.dirname(rel)
        path = os.path.join(self.root, rel)
        if parent not in self.dirs or path in skip:
            return None
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if stat.S_ISDIR(st.st_mode):
            return None
        if st.st_nlink < 2:
            self.linked.discard(rel)
        elif rel not in self.linked:
            self.linked.add(rel)
            self._new_links.add(rel)
        return signature(st)

    # -- watches ------------------------------------------------------------------------

    def _watch(self, rel: str, path: str) -> None:
        wd = self.notify.add(path)
        self.wd_of[rel] = wd
        self.dir_of[wd] = rel

    def _unwatch(self, rel: str) -> None:
        self.dirs.discard(rel)
        wd = self.wd_of.pop(rel, None)
        if wd is not None and self.dir_of.get(wd) == rel:
            del self.dir_of[wd]
            self.notify.remove(wd)

    def _unwatch_untracked(self) -> None:
        """Drop watches the walk placed on folders it then skipped (virtualenvs)."""
        for rel in [r for r in self.wd_of if r not in self.dirs]:
            self._unwatch(rel)


def _outermost(dirty: set[str]) -> list[str]:
    """The dirty folders that are not inside another dirty folder."""
    def inside_another(d: str) -> bool:
        parts = d.split("/")
        return any("/".join(parts[:n]) in dirty for n in range(1, len(parts)))

    return sorted(d for d in dirty if not inside_another(d))
