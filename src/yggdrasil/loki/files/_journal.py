"""The run's journal: what each touched path was before the run, and how to put it back.

Every path the run touches gets an entry saying whether it existed when the run first
touched it and whether it exists now. Before a write or edit tool changes an existing
file for the first time, its bytes and mode are copied to a private temp folder (on
disk, so a big file costs no memory). That is enough to undo:

- a path that did not exist before the run is removed, whoever made it, unless some other
  change cannot be undone (then it may hold the only copy of that data, and it stays);
- a path a write/edit tool touched first is restored from its copy, byte for byte;
- a file a command (run, run_python) changed or deleted before any tool had copied it
  cannot be restored: the revert report lists it as not reverted, with the reason; so
  cannot a folder that is not tracked inside (``.git/``, ``node_modules/``, a virtualenv)
  that a command moved, deleted or replaced (its entry ends with ``/``).

Statuses, relative to the start of the run: ``created``, ``modified``, ``deleted``, and
``transient`` (created during the run and gone again).
"""

from __future__ import annotations

import difflib
import mmap
import os
import shutil
import stat
import tempfile
import weakref
from collections.abc import Callable, Collection, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import cast

from ..errors import LokiError
from ._root import Root

DIFF_LIMIT = 1 << 20  # bytes: larger files get no line counts
Record = Callable[[str], None]  # hears each root-relative path the run changed


@dataclass
class Diff:
    """What a command changed in the root (found by ``shell``), as the journal hears it."""

    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    created_dirs: list[str] = field(default_factory=list)
    lost_dirs: list[str] = field(default_factory=list)  # skipped folders gone or replaced
    tracked: bool = True

    def __bool__(self) -> bool:
        return bool(self.created or self.modified or self.deleted or self.lost_dirs)

    def lines(self) -> list[str]:
        """``created a.txt`` lines, in path order within each kind; lost folders last."""
        return [f"{verb} {path}" for verb, paths in
                (("created", self.created), ("modified", self.modified), ("deleted", self.deleted),
                 ("deleted", [d + "/" for d in self.lost_dirs]))
                for path in paths]


@dataclass
class Entry:
    existed: bool  # when the run first touched it
    exists: bool  # now, as far as the toolbox has seen
    backup: Path | None = None
    mode: int = 0

    @property
    def status(self) -> str:
        if self.existed:
            return "modified" if self.exists else "deleted"
        return "created" if self.exists else "transient"


@dataclass
class Reverted:
    """What ``Toolbox.revert`` did: restored and removed paths, and what it could not undo."""

    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    not_reverted: dict[str, str] = field(default_factory=dict)  # path -> why

    def __str__(self) -> str:
        lines = [f"restored {p}" for p in self.restored] + [f"removed {p}" for p in self.removed]
        lines += [f"not reverted {p}: {why}" for p, why in self.not_reverted.items()]
        return "\n".join(lines) or "nothing to revert"


class Journal:
    def __init__(self, root: Root, record: Record) -> None:
        self.root = root
        self.record = record
        self.entries: dict[str, Entry] = {}
        self.created_dirs: list[str] = []
        self._store: Path | None = None
        self._copies = 0  # names the copies; never reused, even after a revert

    @property
    def store(self) -> Path:
        """The private folder of original copies, made on first use, removed with the journal."""
        if self._store is None:
            self._store = Path(tempfile.mkdtemp(prefix="loki-undo-"))
            weakref.finalize(self, shutil.rmtree, self._store, ignore_errors=True)
        return self._store

    def line_counts(self, rel: str) -> tuple[int, int] | None:
        """(lines added, lines removed) in ``rel`` since the run began, where both sides are
        known text of at most DIFF_LIMIT bytes; None otherwise (a command changed a file
        no copy was kept of, a deleted or binary file, a file too big to compare cheaply)."""
        entry = self.entries.get(rel)
        if entry is None or not entry.exists or (entry.existed and entry.backup is None):
            return None
        real = self.root.resolve(rel)
        now = self.root.stat(real)
        sizes = [now.st_size if now else DIFF_LIMIT + 1,
                 entry.backup.stat().st_size if entry.backup else 0]
        if max(sizes) > DIFF_LIMIT:
            return None
        before = entry.backup.read_bytes() if entry.backup else b""
        after = self.root.read_bytes(real)
        if b"\0" in before or b"\0" in after:
            return None
        old, new = (side.decode("utf-8", "replace").splitlines() for side in (before, after))
        added = removed = 0
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
            if tag != "equal":
                removed, added = removed + i2 - i1, added + j2 - j1
        return added, removed

    def relative(self, paths: Iterable[str]) -> set[str]:
        """Root-relative forms of paths given as the user or model wrote them; a path
        outside the root is a PathError."""
        return {self.root.rel(self.root.resolve(p)) + ("/" if p.endswith("/") else "")
                for p in paths}

    def private_dirs(self) -> list[Path]:
        return [self._store] if self._store is not None else []

    # -- hearing about changes -------------------------------------------------------------

    def before_write(self, rel: str, real: Path) -> None:
        """A write/edit tool is about to change ``rel``: keep its original the first time."""
        if rel in self.entries:
            return
        st = self.root.stat(real)
        if st is None:
            self._note_missing_parents(real)
            self.entries[rel] = Entry(existed=False, exists=False)
            return
        self._copies += 1
        backup = self.store / f"{self._copies:06d}"
        with self.root.open_file(real) as fd, os.fdopen(os.dup(fd), "rb") as src, \
                open(backup, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        self.entries[rel] = Entry(existed=True, exists=True, backup=backup,
                                  mode=stat.S_IMODE(st.st_mode))

    def after_write(self, rel: str) -> None:
        entry = self.entries.setdefault(rel, Entry(existed=True, exists=True))
        entry.exists = True
        self.record(rel)

    def after_remove(self, rel: str) -> None:
        """A tool (apply_patch) deleted ``rel``; its original was copied by before_write."""
        entry = self.entries.setdefault(rel, Entry(existed=True, exists=False))
        entry.exists = False
        self.record(rel)

    def after_command(self, diff: Diff) -> None:
        for rel in diff.created_dirs:
            if rel not in self.created_dirs:
                self.created_dirs.append(rel)
        lost = [d + "/" for d in diff.lost_dirs]  # skipped folders: their contents never copied
        for paths, existed, exists in ((diff.created, False, True), (diff.modified, True, True),
                                       (diff.deleted, True, False), (lost, True, False)):
            for rel in paths:
                entry = self.entries.setdefault(rel, Entry(existed=existed, exists=exists))
                entry.exists = exists
                self.record(rel)

    def _note_missing_parents(self, real: Path) -> None:
        missing: list[str] = []
        parent = real.parent
        while parent != self.root.path and self.root.stat(parent) is None:
            missing.append(self.root.rel(parent))
            parent = parent.parent
        self.created_dirs += [d for d in reversed(missing) if d not in self.created_dirs]

    # -- undo --------------------------------------------------------------------------

    def revert(self, paths: Collection[str] | None = None) -> Reverted:
        """Put every path (or only ``paths``, root-relative) whose original is known back;
        never raises for one path.

        Created files are removed only when every other change can be undone too: when a
        command changed or deleted a file without a copy, a file the run created may hold
        the only copy of that data (``mv``, ``cp x x.bak; sed -i ... x``), so it stays.
        """
        done = Reverted()
        lost = sum(1 for e in self.entries.values() if e.existed and e.backup is None)
        for rel, entry in list(self.entries.items()):
            if paths is not None and rel not in paths:
                continue
            try:
                if lost and not entry.existed:
                    done.not_reverted[rel] = (
                        f"created by the run; kept because {lost} other change(s) cannot be "
                        "undone and this file may hold their data")
                    continue
                self._revert_one(rel, entry, done)
            except (LokiError, OSError) as exc:
                done.not_reverted[rel] = f"could not put it back: {exc}"
                continue
            if rel not in done.not_reverted:
                del self.entries[rel]
                if entry.backup is not None:
                    entry.backup.unlink(missing_ok=True)
        dirs = [d for d in self.created_dirs
                if paths is None or any(p.startswith(d + "/") for p in paths)]
        for rel in sorted(dirs, key=lambda d: -d.count("/")):
            removed = False
            with suppress(LokiError, OSError):  # a folder that cannot go simply stays
                removed = self._remove(rel, folder=True)
            if removed:
                done.removed.append(f"{rel}/")
                self.created_dirs.remove(rel)
        return done

    def _revert_one(self, rel: str, entry: Entry, done: Reverted) -> None:
        if not entry.existed:
            if self._remove(rel, folder=False):
                done.removed.append(rel)
        elif entry.backup is not None:
            self._restore(rel, entry.backup, entry.mode)
            done.restored.append(rel)
        elif rel.endswith("/"):
            done.not_reverted[rel] = ("a folder whose contents are not tracked (.git, "
                                      "node_modules, a virtualenv...) was moved, deleted or "
                                      "replaced by a command; it cannot be put back")
        else:
            verb = "changed" if entry.exists else "deleted"
            done.not_reverted[rel] = (f"{verb} by a command (run/run_python); no copy of the "
                                      "original was kept")

    def _restore(self, rel: str, backup: Path, mode: int) -> None:
        real = self.root.path / rel
        st = self.root.stat(real)
        if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
            self._remove(rel, folder=False)  # a link or FIFO now stands where the file was
        with open(backup, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                self.root.write_atomic(real, b"")
            else:
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                    # write_atomic takes bytes; a read-only map is a bytes-like view that
                    # the kernel pages in, so a big original never sits on the heap.
                    self.root.write_atomic(real, cast(bytes, mapped))
        with self.root.open_file(real) as fd:
            os.fchmod(fd, mode)

    def _remove(self, rel: str, *, folder: bool) -> bool:
        """Unlink (or rmdir) root/rel without following links; False when gone or not empty."""
        return self.root.remove(self.root.path / PurePosixPath(rel), folder=folder)
