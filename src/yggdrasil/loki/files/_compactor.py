"""Compressing the store's blobs, and folding its write-ahead log, off the caller's path.

A step's checkpoint keeps what changed as it is (``Store.put(fast=True)``): compressing
20 KB of code costs ~0.4 ms here, most of what a step of ten files would cost. A thread
compresses those blobs soon after: it reads a few, compresses them holding no lock, and
writes them back in one short transaction on the store's own connection (under its
lock: a step waits at most that long, never on SQLite's busy sleeps). When nothing is
left it folds the write-ahead log into the database, on a connection of its own (a
PASSIVE checkpoint: it never blocks a writer; SQLite's own, which would run inside a
step's commit, is turned off), and ends; the next raw blob starts it again.
"""

from __future__ import annotations

import sqlite3
import threading
import zlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

__all__ = ["LEVEL", "Compactor"]

LEVEL = 1  # zlib: fast; higher levels cost 3-5x the time for ~15% less space
BATCH = 16  # blobs compressed per transaction
WAL_PAGES = 4096  # fold the log into the database past this many pages (16 MiB)

Transaction = Callable[[], AbstractContextManager[sqlite3.Connection]]


class Compactor:
    """The compressing thread of one store: runs while there is work, then ends."""

    def __init__(self, path: Path, lock: threading.RLock, transaction: Transaction,
                 db: Callable[[], sqlite3.Connection]) -> None:
        self.path = path
        self.lock = lock
        self.transaction = transaction
        self.db = db
        self.idle = threading.Event()
        self.idle.set()
        self._again = False
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def poke(self) -> None:
        """There are raw blobs: compress them soon."""
        with self._guard:
            if self._stopped:
                return
            self.idle.clear()
            self._again = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="loki-compact",
                                                daemon=True)
                self._thread.start()

    def settle(self, timeout: float = 600.0) -> bool:
        """Wait until every raw blob is compressed (for a measure, a test)."""
        self.poke()
        return self.idle.wait(timeout)

    def stop(self) -> None:
        with self._guard:
            self._stopped = True
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._guard:
                self._again = False
            try:
                while not self._stopped and self._compress():
                    pass
                self._fold()
            except sqlite3.Error:
                pass  # a full disk, a closed store: the blobs stay as they are, still whole
            with self._guard:
                if not self._again or self._stopped:
                    self._thread = None
                    self.idle.set()
                    return

    def _compress(self) -> int:
        with self.lock:
            rows = self.db().execute("SELECT hash, data FROM blobs WHERE z=0 LIMIT ?",
                                     (BATCH,)).fetchall()
        if not rows:
            return 0
        packed = [(zlib.compress(data, LEVEL), key) for key, data in rows]  # no lock held
        with self.transaction() as db:
            db.executemany("UPDATE blobs SET data=?, z=1 WHERE hash=? AND z=0", packed)
        return len(rows)

    def _fold(self) -> None:
        with sqlite3.connect(self.path, timeout=1.0, isolation_level=None) as db:
            busy, log, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if not busy and log > WAL_PAGES:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
