"""The pure-Python walk: the files ripgrep would visit, in ``rg --sort path`` order.

It opens every folder from a descriptor of its parent with ``O_NOFOLLOW`` (the first
one through :class:`Root`), so it never follows a link, not even one swapped in while
it walks (an ignore file that is a link is read where it points inside the root, since
ripgrep reads it too). It skips what ripgrep skips, in ripgrep's order of precedence:

1. ``.git`` (always, silently); protected entries (always: ``Root.protect``; a protected
   folder counts once, its contents are never listed); unless ``include_ignored``, hidden
   names;
2. unless ``include_ignored``, ignore files: ``.rgignore`` lines beat ``.ignore`` lines,
   which beat ``.gitignore`` lines; within a kind the deepest folder wins; the rules of
   the folders above the start folder come last (``Query.parent_rules``);
3. files whose name does not match ``Query.name_glob`` (silently);
4. anything that is neither a folder nor a regular file (links, FIFOs...), silently.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from ..errors import PathError
from ..files import DIR_FLAGS, READ_FLAGS, Root
from ._found import Query, Skips
from ._globs import IgnoreFile, glob_matcher

IGNORE_NAMES = (".rgignore", ".ignore", ".gitignore")  # highest precedence first
_IGNORE_CAP = 1 << 20  # bytes of an ignore file read


@dataclass(frozen=True)
class Level:
    """The ignore files of one folder on the way down."""

    folder: str  # root-relative; '.' for the root
    files: tuple[IgnoreFile | None, ...]  # in IGNORE_NAMES order

    def relative(self, rel: str) -> str:
        return rel if self.folder == "." else rel[len(self.folder) + 1 :]


@dataclass(frozen=True)
class Visit:
    """A file to search: its root-relative path and how to open it (valid until next)."""

    rel: str
    dir_fd: int
    name: str


class Walker:
    def __init__(self, root: Root, query: Query, skips: Skips) -> None:
        self.root, self.query, self.skips = root, query, skips
        self.protect = root.protect
        self.parents = IgnoreFile("\n".join(query.parent_rules)) if query.parent_rules else None
        self.name_rx = (glob_matcher(query.name_glob, literal_separator=False)
                        if query.name_glob else None)

    def files(self) -> Iterator[Visit]:
        parts = () if self.query.start == "." else tuple(self.query.start.split("/"))
        if self.query.start_is_file:
            # Root owns the descriptor walk; a file named explicitly is always searched.
            with self.root.folder_fd(parts[:-1]) as dfd:
                yield Visit(self.query.start, dfd, parts[-1])
            return
        with self.root.folder_fd(parts) as fd:
            yield from self._folder(fd, self.query.start, ())

    def _folder(self, fd: int, folder: str, levels: tuple[Level, ...]) -> Iterator[Visit]:
        try:
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return  # unreadable folder: ripgrep reports it on stderr and goes on
        if not self.query.include_ignored:
            levels = (*levels, self._level(fd, folder, {e.name for e in entries}))
        for entry in entries:
            rel = entry.name if folder == "." else f"{folder}/{entry.name}"
            if entry.name == ".git":
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if self.protect is not None and self.protect.entry(rel, is_dir) is not None:
                self.skips.add("protected", rel)
                continue
            if not self.query.include_ignored and self._skipped(entry.name, rel, is_dir, levels):
                continue
            if is_dir:
                yield from self._subfolder(fd, entry.name, rel, levels)
            elif entry.is_file(follow_symlinks=False) and self._wanted(entry.name):
                yield Visit(rel, fd, entry.name)

    def _subfolder(self, fd: int, name: str, rel: str, levels: tuple[Level, ...]) -> Iterator[Visit]:
        try:
            sub = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError:
            return
        try:
            yield from self._folder(sub, rel, levels)
        finally:
            os.close(sub)

    def _wanted(self, name: str) -> bool:
        return self.name_rx is None or self.name_rx.fullmatch(name) is not None

    def _skipped(self, name: str, rel: str, is_dir: bool, levels: tuple[Level, ...]) -> bool:
        if name.startswith("."):
            self.skips.add("hidden", rel)
            return True
        if self._ignored(rel, is_dir, levels):
            self.skips.add("ignored", rel)
            return True
        return False

    def _ignored(self, rel: str, is_dir: bool, levels: tuple[Level, ...]) -> bool:
        for kind in range(len(IGNORE_NAMES)):
            for level in reversed(levels):
                rules = level.files[kind]
                if rules and (hit := rules.match(level.relative(rel), is_dir)) is not None:
                    return hit
        if self.parents and (hit := self.parents.match(rel, is_dir)) is not None:
            return hit
        return False

    def _level(self, fd: int, folder: str, names: set[str]) -> Level:
        return Level(folder, tuple(
            _read_rules(self.root, fd, folder, name) if name in names else None
            for name in IGNORE_NAMES
        ))


class PathCheck:
    """Whether the walk from the root lists one path, without walking: for an index that
    hears of a new file and must decide what grep would say of it. Ignore files are read
    once per folder for the life of the check."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self.walker = Walker(root, Query(root.path, "."), Skips())
        self.levels: dict[str, Level | None] = {}

    def skipped(self, rel: str, *, folder: bool = False) -> tuple[str, str] | None:
        """None when the walk lists the file ``rel`` (enters the ``folder``); else (kind,
        path) of the entry it skips on the way ('hidden', 'ignored', 'protected'; '' :
        skipped silently, such as ``.git``, a link or a FIFO)."""
        parts = rel.split("/")
        levels: tuple[Level, ...] = ()
        for n, name in enumerate(parts, 1):
            here = "/".join(parts[:n])
            is_dir = folder or n < len(parts)
            level = self._level("/".join(parts[: n - 1]) or ".")
            if level is None:
                return "", here  # a folder on the way is gone or not a folder
            levels = (*levels, level)
            if name == ".git":
                return "", here
            if self.walker.protect is not None and self.walker.protect.entry(here, is_dir):
                return "protected", here
            if name.startswith("."):
                return "hidden", here
            if self.walker._ignored(here, is_dir, levels):
                return "ignored", here
        if folder:
            return None
        try:
            with self.root.folder_fd(tuple(parts[:-1])) as fd:
                st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except (PathError, OSError):
            return "", rel
        return None if stat.S_ISREG(st.st_mode) else ("", rel)

    def _level(self, folder: str) -> Level | None:
        if folder not in self.levels:
            try:
                with self.root.folder_fd(() if folder == "." else tuple(folder.split("/"))) as fd:
                    self.levels[folder] = self.walker._level(fd, folder, set(IGNORE_NAMES))
            except (PathError, OSError):
                self.levels[folder] = None
        return self.levels[folder]


def read_ignore_text(root: Root, dir_fd: int, folder: str, name: str) -> str | None:
    """The text (first MB) of ignore file ``name`` in the root-relative ``folder``, open
    as ``dir_fd``; None unless it is a regular file (a FIFO is not read).

    A link is followed as ripgrep follows it, but only to a file inside the root, which
    is then opened through :class:`Root` (itself never following a link).
    """
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a link
            return None
        return _read_linked(root, name if folder == "." else f"{folder}/{name}")
    with os.fdopen(fd, "rb") as fh:
        return _read_text(fh)


def _read_linked(root: Root, rel: str) -> str | None:
    try:
        with root.open_file(root.resolve(rel)) as fd, os.fdopen(os.dup(fd), "rb") as fh:
            return _read_text(fh)
    except (PathError, OSError):
        return None


def _read_text(fh: BinaryIO) -> str | None:
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        return None
    return fh.read(_IGNORE_CAP).decode("utf-8", "replace")


def _read_rules(root: Root, dir_fd: int, folder: str, name: str) -> IgnoreFile | None:
    text = read_ignore_text(root, dir_fd, folder, name)
    return (IgnoreFile(text) or None) if text else None
