"""The first checkpoint of a run: every file of the root, kept once, in the background.

Restoring a file a command changed needs its bytes from before the command, and nothing
says in advance which files a command will touch: so the first checkpoint keeps every
file the change tracker watches (the folders it skips, ``.git``, ``node_modules``,
virtualenvs, are skipped here too, but for the files in them that run code). Like a
shadow git's first ``git add -A``, but compressed, deduplicated, and in a thread: the
write and edit tools go on meanwhile (the journal hands over each original it keeps
before a tool's first change, which wins over what the walk read), and a command waits
for the walk only when it starts before the walk is done.

A root seen before costs a stat walk: a file whose signature matches the last baseline
of the same root, and whose ctime is older than that run's start (so a same-size write
in the same clock tick cannot hide), takes its hash from there without being read (a
blob pruned meanwhile by another process would be found missing at a rewind, which
says so and writes nothing for that file).
"""

from __future__ import annotations

import logging
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from ..files import Root, Store, StoreError
from ..shell import snapshot
from ._state import State, observe
from ._timeline import Baseline, Timeline

__all__ = ["BaselineWalk"]

log = logging.getLogger("yggdrasil.loki.checkpoints")

RACY_NS = 2_000_000_000  # a file changed this close to when it was hashed is read again
BATCH_FILES = 256  # files per store transaction (a step's checkpoint waits at most one)


class BaselineWalk:
    """Takes run ``run``'s baseline in a thread; ``wait()`` blocks until it is there."""

    def __init__(self, root: Root, store: Store, timeline: Timeline, run: str, *,
                 max_file: int, max_bytes: int, skip: Callable[[], list[Path]]) -> None:
        self.root, self.store, self.timeline, self.run = root, store, timeline, run
        self.max_file, self.max_bytes, self.skip = max_file, max_bytes, skip
        self.offered: dict[str, State] = {}
        self.result: Baseline | None = None
        self.error = ""  # why the walk stopped short (a full disk...)
        self._done = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="loki-baseline", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def offer(self, rel: str, state: State) -> None:
        """The state of ``rel`` before the run's first change to it (from the journal)."""
        with self._lock:
            if self.result is None:
                self.offered.setdefault(rel, state)

    def done_now(self) -> None:
        """Take the baseline as found (a run that has ended): no walk."""
        self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def stop(self) -> None:
        """Stop the walk (the toolbox closes); what it found is not kept."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        if not self._thread.ident:  # never started: nobody waits for it
            self._done.set()

    def _run(self) -> None:
        try:
            base = self._walk()
            with self._lock:
                for rel, state in self.offered.items():
                    base.files[rel] = state
                self.result = base
            if not self._stop.is_set():
                self.timeline.set_baseline(self.run, base)
        except StoreError as exc:
            self.error = str(exc)
            with self._lock:
                self.result = Baseline(dict(self.offered), complete=False, note=self.error)
        except Exception as exc:  # a bug must not leave commands waiting forever
            log.exception("the first checkpoint failed")
            self.error = f"{type(exc).__name__}: {exc}"
            with self._lock:
                self.result = Baseline(dict(self.offered), complete=False, note=self.error)
        finally:
            self._done.set()

    def _walk(self) -> Baseline:
        snap = snapshot(self.root.path, skip=self.skip())
        known = self._known()
        base = Baseline(complete=snap.complete,
                        note="" if snap.complete else "the root holds too many files")
        read = 0
        unread = []
        for rel, sig in sorted(snap.files.items()):
            state = self._cached(known, rel, sig)
            if state is None:
                unread.append(rel)
            else:
                base.files[rel] = state
        for start in range(0, len(unread), BATCH_FILES):
            if self._stop.is_set():
                base.complete, base.note = False, "stopped"
                return base
            with self.store.transaction():
                for rel in unread[start:start + BATCH_FILES]:
                    state = observe(self.root, rel, self.store, self.max_file)
                    read += state.size if state.hash else 0
                    base.files[rel] = state
            if read > self.max_bytes:
                base.complete = False
                base.note = (f"the root holds more than {self.max_bytes} bytes of files "
                             "(checkpoints.max_bytes); files past that point are not covered")
                return base
        return base

    def _known(self) -> tuple[dict[str, State], int]:
        """The last finished baseline of this root, and when its run started (ns)."""
        for info in reversed(self.timeline.runs(str(self.root.path))):
            if info.id == self.run or info.baseline is None:
                continue
            try:
                found = self.timeline.baseline(info.id)
            except StoreError:
                continue
            if found is not None:
                return found.files, int(info.started * 1e9)
        return {}, 0

    def _cached(self, known: tuple[dict[str, State], int], rel: str,
                sig: tuple[int, int, int, int, int]) -> State | None:
        files, started = known
        was = files.get(rel)
        size, mtime, ino, mode, ctime = sig
        if (was is None or was.hash is None or was.sig != (size, mtime, ino, ctime)
                or was.mode != stat.S_IMODE(mode) or not stat.S_ISREG(mode)
                or ctime >= started - RACY_NS):
            return None
        return was  # its blob is there: the store keeps every blob of a run it keeps

    def catch_up(self, touched: set[str]) -> None:
        """Bring the finished baseline up to now for the files this run has not touched:
        the walk is spread over time, and someone may have changed a file it had passed
        before the run's first command (which must not be taken for the run's change)."""
        base = self.result
        if base is None or not base.complete or self.error:
            return
        snap = snapshot(self.root.path, skip=self.skip())
        if not snap.complete:
            return
        changed = False
        with self.store.transaction():
            for rel, (size, mtime, ino, mode, ctime) in snap.files.items():
                was = base.files.get(rel)
                if rel in touched or (was is not None and was.sig == (size, mtime, ino, ctime)
                                      and was.mode == stat.S_IMODE(mode)):
                    continue
                base.files[rel] = observe(self.root, rel, self.store, self.max_file)
                changed = True
            for rel in [r for r in base.files if r not in snap.files and r not in touched]:
                del base.files[rel]
                changed = True
        if changed:
            self.timeline.set_baseline(self.run, base)
