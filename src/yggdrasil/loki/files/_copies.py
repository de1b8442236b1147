"""The journal's copies of originals, in a private temp folder (on disk: a big file costs
no memory).

With checkpoints on, the originals go to the checkpoint store instead (``StoreCopies``):
one store of file contents for both, deduplicated, and kept past the process's end, so
that ``loki rewind`` can put them back later; files larger than the store takes stay in
packs here.

Creating a file is what a copy costs most on a busy disk (ext4 waits on its journal for
each new inode), so small originals share pack files: one file takes many copies, each
starting at a page boundary (a restore maps it from there). A pack is deleted once none
of its copies is kept; an original of ``SHARED_BELOW`` bytes or more gets a pack of its
own, so dropping it frees its space at once, and a shared pack takes no more copies once
it holds ``PACK_SIZE`` bytes, so the space a dropped small copy keeps is bounded.
"""

from __future__ import annotations

import mmap
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ._store import Store, StoreError

__all__ = ["Copies", "Copy", "StoreCopies", "StoredCopy"]

SHARED_BELOW = 1 << 20
PACK_SIZE = 16 << 20
_PAGE = mmap.ALLOCATIONGRANULARITY


@dataclass(frozen=True)
class Copy:
    """An original's bytes: ``size`` bytes from ``offset`` of the file ``pack``."""

    pack: Path
    offset: int
    size: int

    def read(self) -> bytes:
        with open(self.pack, "rb") as fh:
            fh.seek(self.offset)
            return fh.read(self.size)

    @contextmanager
    def mapped(self) -> Iterator[bytes | mmap.mmap]:
        """The bytes as a read-only map the kernel pages in (b'' when empty)."""
        if not self.size:
            yield b""
            return
        with open(self.pack, "rb") as fh, mmap.mmap(fh.fileno(), self.size, offset=self.offset,
                                                    access=mmap.ACCESS_READ) as mapped:
            yield mapped


class Copies:
    """The packs of one journal: made on first use, removed with it (or by ``discard``)."""

    def __init__(self) -> None:
        self._dir: Path | None = None
        self._shared: Path | None = None  # the pack small copies go to now
        self._kept: dict[Path, int] = {}  # copies kept, per pack
        self._packs = 0  # names the packs; never reused

    def dirs(self) -> list[Path]:
        return [self._dir] if self._dir is not None else []

    def keep(self, fd: int) -> Copy:
        """A copy of the open file ``fd`` (read from its start)."""
        shared = os.fstat(fd).st_size < SHARED_BELOW
        pack = self._shared if shared else None
        if pack is None:
            pack = self._new_pack()
            if shared:
                self._shared = pack
        out = os.open(pack, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)  # no O_APPEND:
        try:  # sendfile refuses it
            end = os.fstat(out).st_size
            offset = end + -end % _PAGE
            os.lseek(out, offset, os.SEEK_SET)  # the gap reads as zeros
            size = _copy_fd(fd, out)
            if os.fstat(out).st_size != (offset + size if size else end):  # a short write
                raise OSError(f"the copy in {pack} was not written whole")
        except BaseException:
            if not self._kept.get(pack):
                self._forget(pack)
            raise
        finally:
            os.close(out)
        self._kept[pack] = self._kept.get(pack, 0) + 1
        if shared and offset + size >= PACK_SIZE:
            self._shared = None  # full: the next small copy starts a new pack
        return Copy(pack, offset, size)

    def drop(self, copy: Copy | StoredCopy) -> None:
        """``copy`` is not needed any more; its pack goes with the last copy in it."""
        if not isinstance(copy, Copy):
            return
        left = self._kept.get(copy.pack, 0) - 1
        if left > 0:
            self._kept[copy.pack] = left
        else:
            self._forget(copy.pack)

    def discard(self) -> None:
        """Delete every copy."""
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir, self._shared = None, None
        self._kept.clear()

    def _new_pack(self) -> Path:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="loki-undo-"))
            weakref.finalize(self, shutil.rmtree, self._dir, ignore_errors=True)
        self._packs += 1
        return self._dir / f"{self._packs:06d}"

    def _forget(self, pack: Path) -> None:
        self._kept.pop(pack, None)
        if pack == self._shared:
            self._shared = None
        pack.unlink(missing_ok=True)


def _copy_fd(fd: int, out: int) -> int:
    """The file ``fd`` written at ``out``'s position by the kernel (sendfile: no buffer in
    Python), or read and written where sendfile cannot; the number of bytes copied."""
    done = 0
    try:
        while sent := os.sendfile(out, fd, done, 1 << 30):
            done += sent
    except OSError:
        if done:
            raise
        os.lseek(fd, 0, os.SEEK_SET)
        while chunk := os.read(fd, 1 << 20):
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view):]
            done += len(chunk)
    return done


@dataclass(frozen=True)
class StoredCopy:
    """An original kept in the checkpoint store: ``hash`` names its bytes there."""

    store: Store
    hash: str
    size: int

    def read(self) -> bytes:
        return self.store.read(self.hash)

    @contextmanager
    def mapped(self) -> Iterator[bytes]:
        """The bytes (read whole: a stored original is at most the store's file limit)."""
        yield self.read()


class StoreCopies:
    """The journal's copies in the checkpoint store; files over ``max_file`` bytes in
    packs of a private temp folder, as ``Copies`` keeps them."""

    def __init__(self, store: Store, max_file: int) -> None:
        self.store = store
        self.max_file = max_file
        self.big = Copies()

    def dirs(self) -> list[Path]:
        return self.big.dirs()

    def keep(self, fd: int) -> Copy | StoredCopy:
        if os.fstat(fd).st_size <= self.max_file:
            try:
                key, size = self.store.put_fd(fd, fast=True)  # a tool waits
                return StoredCopy(self.store, key, size)
            except StoreError:  # a full disk: the undo still needs its copy (checkpoints
                pass  # say they stopped)
        return self.big.keep(fd)

    def drop(self, copy: Copy | StoredCopy) -> None:
        """A stored blob stays (checkpoints may refer to it; pruning collects it)."""
        if isinstance(copy, Copy):
            self.big.drop(copy)

    def discard(self) -> None:
        self.big.discard()
