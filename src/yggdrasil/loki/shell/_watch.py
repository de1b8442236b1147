"""What a command changed, at a cost that grows with the change, not with the tree.

:class:`ChangeTracker` answers "what did this command create, modify or delete?" with
``begin()`` before the command and ``end()`` after. Where it can, it keeps one stat
snapshot of the root current through inotify (a watch per folder): ``begin`` folds in
whatever changed since the last command (write/edit tools, the user's editor), ``end``
re-stats only the paths the kernel named and rewalks only folders that appeared, moved
or vanished. The verdict is the same as two full snapshots would give (stat signatures
compared, never contents), because every event only nominates a path to re-stat.

Without inotify (not Linux, watch or instance limits reached) and after a queue
overflow it falls back to two full snapshots, which is always correct, just slower.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
import sys
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..files import Diff
from ._changes import (
    SKIP_DIRS,
    Signature,
    Snapshot,
    diff,
    identity_of,
    linked_inodes,
    lost,
    runs_code,
    sentinels,
    signature,
    skipped_inode,
    snapshot,
    without_cache_deletions,
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


class _Stale(Exception):
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
        """Apply the queued events; return what they changed (raises _Stale when unsure)."""
        candidates: set[str] = set()
        dirty: set[str] = set()
        for wd, mask, name in self.notify.events():
            if mask & _OVERFLOW:
                raise _Stale("inotify queue overflowed")
            folder = self.dir_of.get(wd)
            if mask & _IGNORED:
                self.dir_of.pop(wd, None)
            if folder is None or folder not in self.dirs or mask & _IGNORED:
                continue
            if mask & (_DELETE_SELF | _MOVE_SELF):
                if folder == "":
                    raise _Stale("the root itself was moved or deleted")
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


class ChangeTracker:
    """``begin()`` before a command, ``end()`` after: what the command changed in the root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.watch: TreeWatch | None = None
        self.use_watch = sys.platform == "linux"
        self.before: Snapshot | None = None

    def begin(self, skip: Iterable[Path] = ()) -> None:
        skip = list(skip)
        self.before = None
        if self.use_watch:
            try:
                watch = self._refresh(skip)
                self.before = Snapshot(dict(watch.files), set(watch.dirs),  # for a fallback
                                       dict(watch.skipped), sentinel=set(watch.sentinel))
                return
            except OSError:  # no inotify, a watch/instance limit, or too big: scan instead
                self._give_up_watching()
        self.before = snapshot(self.root, skip=skip)

    def end(self, skip: Iterable[Path] = ()) -> Diff:
        skip = list(skip)
        before, self.before = self.before, None
        if before is None:
            return Diff(tracked=False)
        if self.watch is not None:
            try:
                return without_cache_deletions(self.watch.update(skip))
            except (_Stale, OSError):
                self.watch.complete = False  # the next begin() rebuilds the view
        return without_cache_deletions(diff(before, snapshot(self.root, skip=skip)))

    def _view(self) -> tuple[dict[str, Signature], dict[str, int], set[str]]:
        """(files, skipped folders, sentinel files) as of the last begin()."""
        if self.watch is not None and self.watch.complete:
            return self.watch.files, self.watch.skipped, self.watch.sentinel
        if self.before is not None:
            return self.before.files, self.before.skipped, self.before.sentinel
        return {}, {}, set()

    def tree(self) -> tuple[Iterable[str], Iterable[str]] | None:
        """(files, folders) of the root as of the last begin(), root-relative; the skipped
        folders are listed but not their contents; None when that view is not complete
        (too many files)."""
        if self.watch is not None and self.watch.complete:
            return self.watch.files.keys(), [*self.watch.dirs, *self.watch.skipped]
        if self.before is not None and self.before.complete:
            return self.before.files.keys(), [*self.before.dirs, *self.before.skipped]
        return None

    def git_dirs(self) -> list[str]:
        """The root's ``.git`` folders and files (any depth), as absolute paths."""
        files, skipped, _ = self._view()
        rels = [r for r in skipped if r.rsplit("/", 1)[-1] == ".git"]
        rels += [r for r in files if r == ".git"]  # a worktree's `gitdir:` pointer
        return [os.path.join(self.root, r) for r in rels]

    def code_files(self) -> list[str]:
        """Tracked files that run code later (see ``runs_code`` and ``sentinels``)."""
        if self.watch is not None and self.watch.complete:
            return sorted(self.watch.code)
        files, _, sentinel = self._view()
        return sorted(sentinel | {r for r in files if runs_code(r)})

    def _refresh(self, skip: list[Path]) -> TreeWatch:
        """The watched view, brought up to date (rebuilt when it cannot be trusted)."""
        if self.watch is None:
            self.watch = TreeWatch(self.root)
        if self.watch.complete:
            try:
                self.watch.update(skip)  # changes made between commands are not the command's
                return self.watch
            except _Stale:
                pass
        self.watch.rebuild(skip)
        if not self.watch.complete:
            raise OSError("too many files to watch")
        return self.watch

    def close(self) -> None:
        """Close the watch (its inotify descriptor); the next ``begin`` builds it again."""
        if self.watch is not None:
            self.watch.notify.close()
            self.watch = None

    def _give_up_watching(self) -> None:
        if self.watch is not None:
            self.watch.notify.close()
        self.watch = None
        self.use_watch = False
