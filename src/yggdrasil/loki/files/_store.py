"""Blobs kept by content: one SQLite file of compressed, deduplicated file contents.

A blob is named by the SHA-256 of its bytes, so a file kept twice (by two steps, two
runs, two attempts of a fleet) is stored once. Its bytes are zlib-compressed (level 1:
the standard library's, ~100 MB/s on one core; code shrinks 3-5x). A file over
``CHUNK`` bytes is kept as a list of chunks, each a blob of its own (read and written
a chunk at a time, so a big file never sits in memory, and an edit in the middle of a
big file shares its other chunks).

SQLite gives what a store of many small writers needs: a commit is all or nothing (a
full disk rolls the write back, the file stays whole), several processes share it (a
fleet's attempts, ``loki rewind`` beside a running session), and small blobs read and
write faster than as files of their own (no inode per blob). Blobs are verified when
read: a damaged one (a power cut before the OS flushed it) is an error, never restored.

A step's checkpoint keeps what changed as it is and the compactor compresses it soon
after, in a thread of its own (``_compactor``): compressing is most of what keeping ten
files would cost a step.

``used`` (seconds since the epoch) is stamped when a blob is stored or found again; the
pruning of unreferenced blobs (``Store.collect``) spares the recently used ones, so a
blob a running session just stored, before anything refers to it, is never collected.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..errors import LokiError
from ._compactor import LEVEL, Compactor

__all__ = ["CHUNK", "Store", "StoreError"]

CHUNK = 4 << 20  # bytes per chunk of a big file
_BUSY_MS = 30_000  # a writer waits this long for another process's commit

_SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (
    hash TEXT PRIMARY KEY, size INTEGER NOT NULL, data BLOB, parts TEXT,
    used REAL NOT NULL, z INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""


class StoreError(LokiError):
    """The store cannot be opened, written (a full disk) or read (a damaged blob)."""


def digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


class Store:
    """The blobs (and, for ``checkpoints``, the tables beside them) in ``folder/store.db``.

    One connection per store object, shared by its threads under ``lock``; other processes
    open their own (SQLite's locks keep them apart, WAL lets readers go on meanwhile).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.lock = threading.RLock()
        self._depth = 0  # transactions open in the thread holding ``lock``
        self.compactor = Compactor(folder / "store.db", self.lock, self.transaction,
                                   lambda: self.db)
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.db = sqlite3.connect(folder / "store.db", timeout=_BUSY_MS / 1000,
                                      check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA auto_vacuum=INCREMENTAL")  # only takes on a new file
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")  # a commit is atomic, not fsynced
            self.db.execute("PRAGMA wal_autocheckpoint=0")  # folded by the compactor
            self.db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the checkpoint store in {folder}: {exc}") from exc

    def close(self) -> None:
        self.compactor.stop()
        with self.lock:
            self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE: the write lock at once, no deadlock
        between two processes that both read first); rolled back when the block raises.
        Nested in another of the same thread, it is part of that one (a batch of puts
        commits once). sqlite3.Error (a full disk...) becomes StoreError."""
        with self.lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self.db
                finally:
                    self._depth -= 1
                return
            try:
                self.db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"the checkpoint store cannot be written: {exc}") from exc
            self._depth = 1
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException as exc:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"the checkpoint store cannot be written: {exc}") from exc
                raise
            finally:
                self._depth = 0

    # -- writing ------------------------------------------------------------------------

    def put(self, data: bytes, *, fast: bool = False) -> str:
        """Keep ``data`` (at most CHUNK bytes); its hash. ``fast``: as it is, compressed
        soon after by the compactor (a step's checkpoint is not held up by zlib)."""
        with self.transaction() as db:
            key = digest(data)
            found = db.execute("UPDATE blobs SET used=? WHERE hash=?", (time.time(), key))
            if not found.rowcount:
                db.execute("INSERT INTO blobs (hash, size, data, used, z) VALUES (?, ?, ?, ?, ?)",
                           (key, len(data), data if fast else zlib.compress(data, LEVEL),
                            time.time(), 0 if fast else 1))
                if fast:
                    self.compactor.poke()
            return key

    def put_fd(self, fd: int, *, fast: bool = False) -> tuple[str, int]:
        """Keep the file open at ``fd`` (read from its start, as it is now); (hash, size).
        Each chunk of a big file commits on its own: a writer in another thread or process
        is never held up for long. ``fast``: see ``put``."""
        os.lseek(fd, 0, os.SEEK_SET)
        first = _read_full(fd, CHUNK)
        if len(first) < CHUNK:
            return self.put(first, fast=fast), len(first)
        whole = hashlib.sha256()
        parts: list[str] = []
        size = 0
        chunk = first
        while chunk:
            whole.update(chunk)
            parts.append(self.put(chunk, fast=fast))
            size += len(chunk)
            chunk = _read_full(fd, CHUNK)
        key = whole.hexdigest()
        with self.transaction() as db:
            found = db.execute("UPDATE blobs SET used=? WHERE hash=?", (time.time(), key))
            if not found.rowcount:
                db.execute("INSERT INTO blobs (hash, size, parts, used) VALUES (?, ?, ?, ?)",
                           (key, size, " ".join(parts), time.time()))
        return key, size

    # -- reading ------------------------------------------------------------------------

    def has(self, key: str) -> bool:
        with self.lock:
            return self.db.execute("SELECT 1 FROM blobs WHERE hash=?", (key,)).fetchone() is not None

    def size(self, key: str) -> int | None:
        with self.lock:
            row = self.db.execute("SELECT size FROM blobs WHERE hash=?", (key,)).fetchone()
        return None if row is None else int(row[0])

    def chunks(self, key: str) -> Iterator[bytes]:
        """The blob's bytes, a chunk at a time, each checked against its hash; StoreError
        when it is missing or damaged (then nothing of it should be used)."""
        with self.lock:
            row = self.db.execute("SELECT data, parts, z FROM blobs WHERE hash=?",
                                  (key,)).fetchone()
        if row is None:
            raise StoreError(f"blob {key[:12]} is not in the store (pruned?)")
        data, parts, packed = row
        if parts is None:
            yield self._checked(key, data, packed)
            return
        whole = hashlib.sha256()
        for part in parts.split():
            chunk = next(self.chunks(part))
            whole.update(chunk)
            yield chunk
        if whole.hexdigest() != key:
            raise StoreError(f"blob {key[:12]} is damaged (its chunks do not add up)")

    def read(self, key: str) -> bytes:
        return b"".join(self.chunks(key))

    def _checked(self, key: str, data: bytes, packed: int) -> bytes:
        try:
            raw = zlib.decompress(data) if packed else data
        except zlib.error as exc:
            raise StoreError(f"blob {key[:12]} is damaged: {exc}") from exc
        if digest(raw) != key:
            raise StoreError(f"blob {key[:12]} is damaged (its hash does not match)")
        return raw

    # -- size and pruning ----------------------------------------------------------------

    def settle(self) -> None:
        """Compress what was kept raw and fold the log into the database: then
        ``bytes_used`` is what the store takes (for a measure, a test)."""
        self.compactor.settle()
        with self.lock:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.db.execute("PRAGMA incremental_vacuum")

    def bytes_used(self) -> int:
        """The store's size on disk (the database and its write-ahead log)."""
        total = 0
        for name in ("store.db", "store.db-wal"):
            with suppress(OSError):
                total += (self.folder / name).stat().st_size
        return total

    def collect(self, live: Iterable[str], grace: float) -> int:
        """Delete the blobs not in ``live`` (with their chunks) and not used in the last
        ``grace`` seconds; the number deleted. Frees their pages for reuse and gives the
        free ones back to the filesystem."""
        keep = set(live)
        with self.lock:
            rows = self.db.execute("SELECT hash, parts FROM blobs WHERE parts IS NOT NULL "
                                   "AND hash IN (SELECT value FROM json_each(?))",
                                   (_json_list(keep),)).fetchall()
        for _, parts in rows:
            keep.update(parts.split())
        cutoff = time.time() - grace
        with self.transaction() as db:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS live (hash TEXT PRIMARY KEY)")
            db.execute("DELETE FROM live")
            db.executemany("INSERT OR IGNORE INTO live VALUES (?)", ((k,) for k in keep))
            gone = db.execute("DELETE FROM blobs WHERE used < ? AND hash NOT IN "
                              "(SELECT hash FROM live)", (cutoff,)).rowcount
            db.execute("DELETE FROM live")
        with self.lock:
            self.db.execute("PRAGMA incremental_vacuum")
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return gone


def _json_list(keys: set[str]) -> str:
    return "[" + ",".join(f'"{k}"' for k in keys) + "]"


def _read_full(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from ``fd``: short only at the end of the file."""
    parts: list[bytes] = []
    left = size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
