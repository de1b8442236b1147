"""What a command changed in the root: a stat-only snapshot before and after, compared.

No file is opened: a file counts as modified when its (size, mtime_ns, inode, mode,
ctime_ns) differs, so an atomic rename-over, a chmod and an in-place write all show, and
so does a same-size rewrite whose mtime was put back (``touch -r``, ``cp -p``): only the
kernel sets ctime.

Folders that are tool state rather than project files are not walked: VCS metadata,
dependency trees, virtualenvs (any folder holding a ``pyvenv.cfg``) and caches. The
search tools skip these too (and more: every hidden entry); this list is kept here on
purpose, since a change to ``.env`` or ``.gitignore`` must be reported even though search
hides it. Inside them, the few files that run code later are still looked at on every
snapshot (:func:`sentinels`): a repository's ``config``, ``config.worktree``,
``commondir`` and ``hooks/*`` (``.git``), ``hgrc`` (``.hg``), and a virtualenv's
``site-packages/*.pth``, ``sitecustomize.py`` and ``usercustomize.py``. ``__pycache__``
is walked like any folder: bytecode there runs on the next import, and commands write
theirs elsewhere (``PYTHONPYCACHEPREFIX``), so what appears there is reported.

Those folders are still watched from outside: a skipped folder that vanished, moved away
or was replaced by another one (a new inode) counts as a deletion nobody can undo
(``Diff.lost_dirs``), since its contents were never copied.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..files import Diff, settings_path
from ..results import FileChange

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".jj", "node_modules", ".venv", "venv",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".ipynb_checkpoints",
    ".cache", ".gradle", ".next", ".parcel-cache", ".turbo",
})
MAX_FILES = 250_000  # a bigger tree is not tracked (its walk would cost seconds per command)

Signature = tuple[int, int, int, int, int]  # size, mtime_ns, inode, mode, ctime_ns
# Files that run code when something later starts (an interpreter, git): their originals
# are kept before each command so that revert() can put them back.
STARTUP_NAMES = frozenset({"sitecustomize.py", "usercustomize.py", ".git"})
_GIT_FILES = ("config", "config.worktree", "commondir")
_SITE_CODE = ("*.pth", "sitecustomize.py", "usercustomize.py")


@dataclass
class Snapshot:
    files: dict[str, Signature] = field(default_factory=dict)  # root-relative POSIX paths
    dirs: set[str] = field(default_factory=set)
    skipped: dict[str, int] = field(default_factory=dict)  # skipped folder -> its inode
    linked: set[str] = field(default_factory=set)  # files with more than one hard link
    sentinel: set[str] = field(default_factory=set)  # files found by sentinels()
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
    if not below:  # a partial walk (TreeWatch's rewalk) leaves them to the caller
        found = sentinels(os.fspath(root), snap.skipped)
        snap.files.update(found)
        snap.sentinel = set(found)
    return snap


def runs_code(rel: str) -> bool:
    """A tracked file that runs code later: ``*.pth``, ``sitecustomize.py``, a ``.git``
    file; or decides what runs later: the project's ``loki.toml`` (kept before each
    command so the journal can put it back)."""
    name = rel.rsplit("/", 1)[-1]
    return name in STARTUP_NAMES or name.endswith(".pth") or settings_path(rel)


def sentinels(root: str, skipped: Iterable[str]) -> dict[str, Signature]:
    """The files that run code later inside the skipped folders, with their signatures."""
    found: dict[str, Signature] = {}
    for rel in skipped:
        folder = os.path.join(root, rel)
        for path in _sentinel_paths(folder, rel.rsplit("/", 1)[-1]):
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                found[rel + path[len(folder):]] = signature(st)
    return found


def _sentinel_paths(folder: str, name: str) -> list[str]:
    if name == ".git":
        hooks = os.path.join(folder, "hooks")
        try:
            hooked = [os.path.join(hooks, n) for n in os.listdir(hooks)]
        except OSError:
            hooked = []
        return [*(os.path.join(folder, n) for n in _GIT_FILES), *hooked]
    if name == ".hg":
        return [os.path.join(folder, "hgrc")]
    if not os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
        return []
    escaped = glob.escape(folder)
    return [p for pattern in _SITE_CODE
            for p in glob.glob(f"{escaped}/lib*/python*/site-packages/{pattern}")]


def is_cache(rel: str) -> bool:
    """Bytecode in a ``__pycache__`` folder: deleting it loses nothing."""
    return "__pycache__" in rel.split("/")[:-1]


def without_cache_deletions(found: Diff) -> Diff:
    """Deleting bytecode is not a change worth reporting (nor one that loses data)."""
    if any(map(is_cache, found.deleted)):
        found.deleted = [p for p in found.deleted if not is_cache(p)]
    return found


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


def identity_of(sig: Signature) -> tuple[int, int, int, int]:
    """The journal's (inode, size, mtime_ns, ctime_ns) of a file with this signature."""
    return (sig[2], sig[0], sig[1], sig[4])


def signature(st: os.stat_result) -> Signature:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode, st.st_ctime_ns)


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
        else:
            continue
        found.seen[path] = identity_of(sig)
    if len(old) + len(found.created) != len(new):
        found.deleted = [p for p in old if p not in new]
    for paths in (found.created, found.modified, found.deleted):
        paths.sort()
    return found



def file_changes(found: Diff) -> list[FileChange]:
    """What a diff says changed, as data: created, modified and deleted files in path order
    within each kind, then the lost folders (``name/``)."""
    return [FileChange(path=path, change=verb) for verb, paths in
            (("created", found.created), ("modified", found.modified),
             ("deleted", found.deleted), ("deleted", [d + "/" for d in found.lost_dirs]))
            for path in paths]
