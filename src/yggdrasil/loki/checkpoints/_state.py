"""What one path of the root is at a checkpoint: a file (mode, content), a link, nothing.

``observe`` looks at a path as it is now, never following a link, and keeps a regular
file's bytes in the store. What cannot be kept says why (``why``): too big, unreadable,
protected, a FIFO. ``sig`` (size, mtime, inode, ctime) is what the path looked like
then, so a rewind can tell that someone else changed it since.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from ..errors import LokiError
from ..files import READ_FLAGS, Root, Store

__all__ = ["ABSENT", "Sig", "State", "lstat", "observe", "readlink", "sig_of"]

Kind = Literal["file", "link", "absent", "other", "unknown", "dir"]
Sig = tuple[int, int, int, int]  # size, mtime_ns, inode, ctime_ns


@dataclass(frozen=True)
class State:
    """A path's state: ``kind`` ``file`` (``mode``, ``hash`` of its bytes in the store,
    or None with ``why``), ``link`` (its target text in ``link``), ``absent``, ``other``
    (a FIFO, socket or device: not kept), ``unknown`` (no checkpoint saw it: ``why``),
    or ``dir`` (a folder the step made; its path ends with ``/``)."""

    kind: Kind
    mode: int = 0
    hash: str | None = None
    size: int = 0
    sig: Sig | None = None
    link: str | None = None
    why: str = ""

    def same(self, other: State) -> bool:
        """The same content and mode (the sig aside): restoring one over the other is a no-op."""
        if self.kind != other.kind:
            return False
        if self.kind == "file":
            return self.hash is not None and self.hash == other.hash and self.mode == other.mode
        if self.kind == "link":
            return self.link == other.link
        return self.kind == "absent"

    def dumps(self) -> str:
        return json.dumps([self.kind, self.mode, self.hash, self.size,
                           list(self.sig) if self.sig else None, self.link, self.why],
                          separators=(",", ":"))

    def listed(self) -> list[object]:
        return json.loads(self.dumps())

    @classmethod
    def loads(cls, text: str | list[object]) -> State:
        kind, mode, key, size, sig, link, why = json.loads(text) if isinstance(text, str) else text
        return cls(kind, int(mode), key, int(size),  # type: ignore[arg-type]
                   tuple(sig) if sig else None, link, why)  # type: ignore[arg-type]


ABSENT = State("absent")


def sig_of(st: os.stat_result) -> Sig:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def lstat(root: Root, rel: str) -> os.stat_result | None:
    """The path's own lstat, reached from the root without following any link; None
    when absent (or when a folder on its way is a link or a file: nothing is there)."""
    try:
        return root.stat_rel(rel)
    except (LokiError, OSError):
        return None


def observe(root: Root, rel: str, store: Store | None, max_file: int, *,
            fast: bool = False) -> State:
    """The state of ``rel`` now (its folder walked once from the root, no link
    followed); a regular file's bytes are kept in ``store`` (none: not kept; ``fast``:
    compressed later, off a step's path)."""
    if rel.endswith("/"):
        return State("unknown", why="a folder whose contents are not tracked (.git, "
                     "node_modules, a virtualenv...); it cannot be put back")
    *folder, name = PurePosixPath(rel).parts
    try:
        with root.folder_fd(tuple(folder)) as dfd:
            return _observe_at(root, rel, dfd, name, store, max_file, fast)
    except (LokiError, OSError):  # gone, or a folder on its way is a link or a file
        return ABSENT


def _observe_at(root: Root, rel: str, dfd: int, name: str, store: Store | None,
                max_file: int, fast: bool) -> State:
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return ABSENT
    sig, mode = sig_of(st), stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return State("link", mode, size=st.st_size, sig=sig, link=os.readlink(name, dir_fd=dfd))
    if not stat.S_ISREG(st.st_mode):
        return State("other", mode, sig=sig, why=_kind(st.st_mode))
    why = _not_kept(root, rel, st, store, max_file)
    if why:
        return State("file", mode, None, st.st_size, sig, why=why)
    assert store is not None
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dfd)
    except PermissionError:
        return State("file", mode, None, st.st_size, sig, why="unreadable (no read permission)")
    except OSError as exc:
        return State("file", mode, None, st.st_size, sig, why=f"could not be read: {exc}")
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or now.st_ino != st.st_ino:
            return observe(root, rel, store, max_file, fast=fast)  # replaced: look again
        key, size = store.put_fd(fd, fast=fast)
    finally:
        os.close(fd)
    return State("file", mode, key, size, sig_of(now))


def _not_kept(root: Root, rel: str, st: os.stat_result, store: Store | None,
              max_file: int) -> str:
    if root.covered(rel) is not None:
        return "protected: its bytes are never read"
    if st.st_size > max_file:
        return f"larger than {max_file} bytes (checkpoints.max_file): skipped as too big"
    if store is None:
        return "not kept: checkpointing had stopped"
    return ""


def readlink(root: Root, rel: str) -> str | None:
    parts = PurePosixPath(rel).parts
    try:
        with root.folder_fd(tuple(parts[:-1])) as dfd:
            return os.readlink(parts[-1], dir_fd=dfd)
    except (LokiError, OSError):
        return None


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO: only files and links are kept"
    if stat.S_ISSOCK(mode):
        return "a socket: only files and links are kept"
    return "a device: only files and links are kept"
