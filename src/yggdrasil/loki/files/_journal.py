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

Files that run code later (git config and hooks, ``*.pth``, ``sitecustomize.py``; the
shell names them) are copied before each command when they changed since the last copy
(:meth:`Journal.keep_originals`), so a command's change to one can be undone too. Bytecode
in ``__pycache__`` is a cache: revert removes what the run wrote there.

Before removing a file the run created, revert checks that it is still the one the run
last saw (same inode, size, mtime and ctime): a file another program re-created or
changed since is kept and listed, never removed.

Statuses, relative to the start of the run: ``created``, ``modified``, ``deleted``, and
``transient`` (created during the run and gone again).
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Callable, Collection, Iterable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import cast

from ..errors import LokiError
from ._copies import Copies, Copy, StoreCopies, StoredCopy
from ._gitfiles import (
    git_code_path,
    inert_hook,
    is_new_repo_config,
    settings_that_run_nothing,
)
from ._root import Root

DIFF_LIMIT = 1 << 20  # bytes: larger files get no line counts
Record = Callable[[str], None]  # hears each root-relative path the run changed
Kept = Copy | StoredCopy  # an original's bytes: in a temp pack, or in the checkpoint store


def _ignore(rel: str) -> None:
    """The ``record`` of a journal no toolbox listens to."""


Identity = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns


def identity(st: os.stat_result) -> Identity:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class Diff:
    """What a command changed in the root (found by ``shell``), as the journal hears it."""

    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    created_dirs: list[str] = field(default_factory=list)
    lost_dirs: list[str] = field(default_factory=list)  # skipped folders gone or replaced
    tracked: bool = True
    seen: dict[str, Identity] = field(default_factory=dict)  # created/modified files, as found

    def __bool__(self) -> bool:
        return bool(self.created or self.modified or self.deleted or self.lost_dirs)

    def lines(self) -> list[str]:
        """``created a.txt`` lines, in path order within each kind; lost folders last."""
        return [f"{verb} {path}" for verb, paths in
                (("created", self.created), ("modified", self.modified), ("deleted", self.deleted),
                 ("deleted", [d + "/" for d in self.lost_dirs]))
                for path in paths]


def is_bytecode(rel: str) -> bool:
    """A file in a ``__pycache__`` folder: removing it loses nothing (Python rebuilds it)."""
    return "__pycache__" in rel.split("/")[:-1]


@dataclass
class JournalEntry:
    existed: bool  # when the run first touched it
    exists: bool  # now, as far as the toolbox has seen
    backup: Kept | None = None
    mode: int = 0
    seen: Identity | None = None  # of a file the run created, when the run last saw it

    @property
    def undoable(self) -> bool:
        return not self.existed or self.backup is not None

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
    """What each path the run touched was, and how to put it back. ``record`` hears each
    path the run changed (a Toolbox given the journal makes it its own ``record``).
    ``copies``: where originals go (default: packs in a private temp folder; with
    checkpoints, the checkpoint store). ``first_touch(rel, entry)`` hears each path a
    write/edit tool is about to change for the first time, with its original (the
    checkpoints' baseline takes it when its walk has not reached that file yet)."""

    def __init__(self, root: Root, record: Record | None = None,
                 copies: Copies | StoreCopies | None = None) -> None:
        # Undo puts back what the user had: the rules that keep the model's tools off
        # git's config and hooks and the agent's settings (Root.restores) do not bind it.
        self.root = replace(root, restores=True)
        self.locks_git = root.locks_git  # else a command's change to one stays
        self.record: Record = record if record is not None else _ignore
        self.entries: dict[str, JournalEntry] = {}
        self.created_dirs: list[str] = []
        self._created_dirs: set[str] = set()  # the same, for membership tests
        self.originals: dict[str, tuple[Identity, Kept, int]] = {}  # see keep_originals
        self.copies = copies if copies is not None else Copies()  # the originals' bytes
        self.first_touch: Callable[[str, JournalEntry], None] | None = None

    def line_counts(self, rel: str) -> tuple[int, int] | None:
        """(lines added, lines removed) in ``rel`` since the run began, where both sides are
        known text of at most DIFF_LIMIT bytes; None otherwise (a command changed a file
        no copy was kept of, a deleted or binary file, a file too big to compare cheaply,
        a protected file: its bytes are not read)."""
        entry = self.entries.get(rel)
        if entry is None or not entry.exists:
            return None
        sides = self._sides(rel)
        if isinstance(sides, str):
            return None
        old, new = sides
        added = removed = 0
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
            if tag != "equal":
                removed, added = removed + i2 - i1, added + j2 - j1
        return added, removed

    def unified_diff(self, rel: str) -> str:
        """The unified diff of ``rel`` since the run began (``--- a/rel`` / ``+++ b/rel``),
        or one line saying why it cannot be shown (no copy of the original, binary, too
        big, protected)."""
        sides = self._sides(rel)
        if isinstance(sides, str):
            return f"# {rel}: {sides}\n"
        entry = self.entries.get(rel)
        old_name = f"a/{rel}" if entry is None or entry.existed else "/dev/null"
        new_name = f"b/{rel}" if entry is None or entry.exists else "/dev/null"
        lines = difflib.unified_diff(sides[0], sides[1], old_name, new_name, lineterm="")
        return "".join(f"{line}\n" for line in lines)

    def _sides(self, rel: str) -> tuple[list[str], list[str]] | str:
        """The lines of ``rel`` when the run began and now, or why they are not known."""
        entry = self.entries.get(rel)
        if entry is None or (entry.existed and entry.backup is None):
            return "changed by a command before a copy of it was kept: no diff"
        if self.root.covered(rel) is not None:
            return "protected: its bytes are not read"
        real = self.root.resolve(rel)
        now = self.root.stat(real) if entry.exists else None
        sizes = [now.st_size if now else 0, entry.backup.size if entry.backup else 0]
        if entry.exists and now is None:
            return "gone since it was last seen"
        if max(sizes) > DIFF_LIMIT:
            return f"larger than {DIFF_LIMIT} bytes: no diff"
        before = entry.backup.read() if entry.backup else b""
        after = self.root.read_bytes(real) if now is not None else b""
        if b"\0" in before or b"\0" in after:
            return "binary: no diff"
        old, new = (side.decode("utf-8", "replace").splitlines() for side in (before, after))
        return old, new

    def relative(self, paths: Iterable[str]) -> set[str]:
        """Root-relative forms of paths given as the user or model wrote them; a path
        outside the root is a PathError."""
        return {self._relative(p) for p in paths}

    def _relative(self, path: str) -> str:
        """The entry ``path`` names: the path itself when the run changed it (a link the
        run created is undone as a link, even one pointing outside the root), otherwise
        where it leads (an edit through a link changed the link's target)."""
        slash = "/" if path.endswith("/") else ""
        named = Path(os.path.normpath(self.root.path / os.fspath(path)))
        if named != self.root.path and named.is_relative_to(self.root.path):
            rel = self.root.rel(named)
            if rel + slash in self.entries:
                if self.root.protect is not None:  # no tool deletes a protected file
                    self.root.protect.check(rel, bool(slash))
                return rel + slash
        return self.root.rel(self.root.resolve(path)) + slash

    def discard(self) -> None:
        """Delete every original copy: statuses stay known, nothing can be restored now."""
        self.copies.discard()
        for entry in self.entries.values():
            entry.backup = None

    def private_dirs(self) -> list[Path]:
        return self.copies.dirs()

    # -- hearing about changes -------------------------------------------------------------

    def before_write(self, rel: str, real: Path) -> None:
        """A write/edit tool is about to change ``rel``: keep its original the first time."""
        if rel in self.entries:
            return
        st = self.root.stat(real)
        if st is None:
            self._note_missing_parents(real)
            entry = self.entries[rel] = JournalEntry(existed=False, exists=False)
        else:
            entry = self.entries[rel] = JournalEntry(existed=True, exists=True,
                                                     backup=self._copy(real),
                                                     mode=stat.S_IMODE(st.st_mode))
        if self.first_touch is not None:
            self.first_touch(rel, entry)

    def _copy(self, real: Path) -> Kept:
        with self.root.open_file(real) as fd:
            return self.copies.keep(fd)

    def keep_originals(self, rels: Iterable[str]) -> None:
        """Before a command: copy each of these files (they run code later) that the run
        has not touched yet, unless the copy kept already is of the same version."""
        for rel in rels:
            if rel in self.entries:
                continue
            real = self.root.path / PurePosixPath(rel)
            st = self._stat(real)
            kept = self.originals.get(rel)
            if st is None or not stat.S_ISREG(st.st_mode) or (
                    kept is not None and kept[0] == identity(st)):
                continue
            with suppress(LokiError, OSError):  # unreadable: it simply cannot be restored
                backup = self._copy(real)
                if kept is not None:
                    self.copies.drop(kept[1])
                self.originals[rel] = (identity(st), backup, stat.S_IMODE(st.st_mode))

    def _stat(self, real: Path) -> os.stat_result | None:
        try:
            return self.root.stat(real)
        except (LokiError, OSError):
            return None

    def after_write(self, rel: str) -> None:
        entry = self.entries.setdefault(rel, JournalEntry(existed=True, exists=True))
        entry.exists = True
        self._saw(rel, entry)
        self.record(rel)

    def after_remove(self, rel: str) -> None:
        """A tool (apply_patch) deleted ``rel``; its original was copied by before_write."""
        entry = self.entries.setdefault(rel, JournalEntry(existed=True, exists=False))
        entry.exists = False
        self._saw(rel, entry)
        self.record(rel)

    def after_command(self, diff: Diff) -> list[str]:
        """Record what a command changed; with git's code files read-only for the run
        (``Root.locks_git``), put back at once those it changed (a ``.git/commondir``
        naming a folder of the root, whose config then runs at the user's next ``git
        status``: a mount cannot cover a file that does not exist yet). The config of a
        repository the command made (``git init``, ``git clone``) stays, without the keys
        that may run commands; ``*.sample`` hooks, which git never runs, stay too. The
        paths put back or cleaned (with the keys dropped)."""
        self._record_command(diff)
        done: list[str] = []
        for rel in (*diff.created, *diff.modified, *diff.deleted):
            if self.root.holds_settings(rel):  # never the agent's: it would loosen its next run
                if self._put_back(rel):
                    done.append(rel)
                continue
            if not self.locks_git or not git_code_path(rel) or inert_hook(rel):
                continue
            if rel in diff.created and is_new_repo_config(rel):
                cleaned = self._clean_config(rel)  # a repository the command made keeps it
                if cleaned is not None:
                    done += [f"{rel} (kept without {', '.join(cleaned)})"] if cleaned else []
                    continue
            if self._put_back(rel):
                done.append(rel)
        return done

    def _clean_config(self, rel: str) -> list[str] | None:
        """Rewrite a new repository's config without the settings that may run commands;
        the keys dropped, or None when that cannot be done (it is then removed)."""
        real = self.root.path / PurePosixPath(rel)
        try:
            text = self.root.read_bytes(real, limit=1 << 20)
            found = settings_that_run_nothing(text) if text is not None else None
            if found is None:
                return None
            clean, dropped = found
            if dropped:
                self.root.write_atomic(real, clean)
                entry = self.entries.get(rel)
                if entry is not None:
                    self._saw(rel, entry)  # revert removes the file the run left there
        except (LokiError, OSError):
            return None
        return dropped

    def _put_back(self, rel: str) -> bool:
        entry = self.entries.get(rel)
        try:
            if entry is None or not entry.existed:
                self._remove(rel, folder=False)
                if entry is not None:
                    entry.exists, entry.seen = False, None
            elif entry.backup is not None:
                self._restore(rel, entry.backup, entry.mode)
                entry.exists = True
            else:
                return False
        except (LokiError, OSError):
            return False
        return True

    def _record_command(self, diff: Diff) -> None:
        for rel in diff.created_dirs:
            if rel not in self._created_dirs:
                self._created_dirs.add(rel)
                self.created_dirs.append(rel)
        lost = [d + "/" for d in diff.lost_dirs]  # skipped folders: their contents never copied
        for paths, existed, exists in ((diff.created, False, True), (diff.modified, True, True),
                                       (diff.deleted, True, False), (lost, True, False)):
            for rel in paths:
                entry = self.entries.get(rel)
                if entry is None:
                    entry = self.entries[rel] = self._first_seen(rel, existed, exists)
                entry.exists = exists
                self._saw(rel, entry, diff.seen.get(rel))
                self.record(rel)

    def _first_seen(self, rel: str, existed: bool, exists: bool) -> JournalEntry:
        kept = self.originals.pop(rel, None) if existed else None
        if kept is None:
            return JournalEntry(existed=existed, exists=exists)
        return JournalEntry(existed=True, exists=exists, backup=kept[1], mode=kept[2])

    def _saw(self, rel: str, entry: JournalEntry, known: Identity | None = None) -> None:
        """Remember which file the run left at ``rel`` (created ones: revert checks it)."""
        if entry.existed:
            return
        if not entry.exists:
            entry.seen = None
        elif known is not None:
            entry.seen = known
        else:
            st = self._stat(self.root.path / PurePosixPath(rel))
            entry.seen = identity(st) if st is not None else None

    def _note_missing_parents(self, real: Path) -> None:
        missing: list[str] = []
        parent = real.parent
        while parent != self.root.path and self.root.stat(parent) is None:
            missing.append(self.root.rel(parent))
            parent = parent.parent
        for d in reversed(missing):
            if d not in self._created_dirs:
                self._created_dirs.add(d)
                self.created_dirs.append(d)

    # -- undo --------------------------------------------------------------------------

    def revert(self, paths: Collection[str] | None = None) -> Reverted:
        """Put every path (or only ``paths``, root-relative) whose original is known back;
        never raises for one path.

        Created files are removed only when every other change can be undone too: when a
        command changed or deleted a file without a copy, a file the run created may hold
        the only copy of that data (``mv``, ``cp x x.bak; sed -i ... x``), so it stays.
        """
        done = Reverted()
        lost = sum(1 for r, e in self.entries.items() if not e.undoable and not is_bytecode(r))
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
                    self.copies.drop(entry.backup)
        dirs = [d for d in self.created_dirs
                if paths is None or any(p.startswith(d + "/") for p in paths)]
        for rel in sorted(dirs, key=lambda d: -d.count("/")):
            removed = False
            with suppress(LokiError, OSError):  # a folder that cannot go simply stays
                removed = self._remove(rel, folder=True)
            if removed:
                done.removed.append(f"{rel}/")
                self._created_dirs.discard(rel)
        self.created_dirs[:] = [d for d in self.created_dirs if d in self._created_dirs]
        return done

    def _revert_one(self, rel: str, entry: JournalEntry, done: Reverted) -> None:
        if not entry.existed:
            self._remove_created(rel, entry, done)
        elif entry.backup is not None:
            self._restore(rel, entry.backup, entry.mode)
            done.restored.append(rel)
        elif is_bytecode(rel):  # a cache: without it Python compiles the source again
            if entry.exists and self._remove(rel, folder=False):
                done.removed.append(rel)
        elif rel.endswith("/"):
            done.not_reverted[rel] = ("a folder whose contents are not tracked (.git, "
                                      "node_modules, a virtualenv...) was moved, deleted or "
                                      "replaced by a command; it cannot be put back")
        else:
            verb = "changed" if entry.exists else "deleted"
            done.not_reverted[rel] = (f"{verb} by a command (run/run_python); no copy of the "
                                      "original was kept")

    def _remove_created(self, rel: str, entry: JournalEntry, done: Reverted) -> None:
        """Remove a file the run created, if it is still the one the run left there."""
        st = self._stat(self.root.path / PurePosixPath(rel))
        if st is None:
            return
        if not entry.exists:
            done.not_reverted[rel] = ("the run created and then deleted it; the file there "
                                      "now was made by someone else since, so it is kept")
        elif entry.seen is not None and identity(st) != entry.seen:
            done.not_reverted[rel] = ("created by the run, but changed or replaced since "
                                      "(another inode, size or time); kept")
        elif self._remove(rel, folder=False):
            done.removed.append(rel)

    def rewound(self, rel: str, *, at_start: bool) -> None:
        """A rewind put ``rel`` back: as it was before the run (``at_start``: the run's
        change to it is gone, as after ``revert``) or as after some step (the change
        stands; the file there now is the run's)."""
        entry = self.entries.get(rel)
        if entry is None:
            return
        if at_start:
            del self.entries[rel]
            if entry.backup is not None:
                self.copies.drop(entry.backup)
            return
        entry.exists = self._stat(self.root.path / PurePosixPath(rel)) is not None
        self._saw(rel, entry)

    def _restore(self, rel: str, backup: Kept, mode: int) -> None:
        real = self.root.path / rel
        st = self.root.stat(real)
        if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
            self._remove(rel, folder=False)  # a link or FIFO now stands where the file was
        with backup.mapped() as data:
            # write_atomic takes bytes; a read-only map is a bytes-like view that the
            # kernel pages in, so a big original never sits on the heap.
            self.root.write_atomic(real, cast(bytes, data))
        with self.root.open_file(real) as fd:
            os.fchmod(fd, mode)

    def _remove(self, rel: str, *, folder: bool) -> bool:
        """Unlink (or rmdir) root/rel without following links; False when gone or not empty."""
        return self.root.remove(self.root.path / PurePosixPath(rel), folder=folder)
