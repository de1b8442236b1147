"""Confined paths: the one place that decides whether a path is inside the agent root.

Every filesystem tool goes through :class:`Root`. A path is resolved (``..``, absolute
paths and every symlink followed) and must land at or below the root, compared by path
components, never by string prefix. Opening then walks the resolved path from a file
descriptor of the root, one component at a time with ``O_NOFOLLOW``, so a symlink swapped
in between the check and the open is refused instead of followed.

A Root may hold a :class:`~._protect.Protection`: then a protected path (``.env``,
``*.pem``...) is refused wherever a path is resolved or a file opened, for every tool.
"""

from __future__ import annotations

import ctypes
import errno
import os
import queue
import secrets
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from ..errors import PathError
from ..results import HOW_TO_ALLOW_GIT, printable
from ._gitfiles import git_code_path, settings_path
from ._protect import Protection

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def resolve_inside(root: Path, path: str | os.PathLike[str]) -> Path:
    """The absolute, symlink-free form of ``path`` (taken from ``root`` when relative).

    Raises PathError when it resolves outside ``root``; ``root`` must already be resolved.
    The path need not exist: the missing tail is kept as written, after its existing
    parent has been resolved.
    """
    text = os.fspath(path)
    if "\0" in text:
        raise PathError(f"path {text!r} contains a NUL byte")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:  # a lone surrogate in JSON that no file name can hold
        raise PathError(f"path '{printable(text)}' holds a character no file name can "
                        "(a lone surrogate); name the file as list_dir or find show it") from None
    try:
        real = Path(os.path.realpath(root / (text or ".")))
    except OSError as exc:  # a link swapped for a file between realpath's lstat and readlink
        raise PathError(f"path {text!r} changed while it was being resolved (a link was "
                        "swapped); try again") from exc
    if real != root and not real.is_relative_to(root):
        raise PathError(f"path {text!r} escapes the agent root; use a path inside {root}")
    return real


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "not a regular file"


@dataclass(frozen=True)
class Root:
    """An agent root: a resolved folder that every path must stay inside.

    ``protect``: the protected paths, refused by ``resolve`` and ``open_file`` (None or
    an empty Protection: nothing is protected). ``locks_git`` (the default, unless the
    user's fence settings allow git's files): the files git takes commands from
    (``.git/config``, hooks, ``commondir``: ``_gitfiles``) are never written through
    ``stage``/``write_atomic``, and commands get them read-only (``shell``). ``sealed``: root-relative paths of the user's own loki
    settings that lie inside the root (its configuration folder, with the trust store,
    when the root is the home folder); no tool writes them, nor the project's
    ``loki.toml``, unless ``restores`` (the journal's view, which puts back what the user
    had).
    """

    path: Path
    protect: Protection | None = field(default=None, compare=False)
    locks_git: bool = field(default=True, compare=False)
    restores: bool = field(default=False, compare=False)
    sealed: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def at(cls, path: str | os.PathLike[str], protect: Protection | None = None, *,
           locks_git: bool = True,
           sealed: Iterable[str | os.PathLike[str]] = ()) -> Root:
        """The root at ``path`` (an existing folder); ``sealed``: absolute paths of the
        user's settings, kept only where they lie inside the root."""
        real = Path(os.path.realpath(os.fspath(path)))
        if not real.is_dir():
            raise PathError(f"root {os.fspath(path)!r} is not an existing folder")
        inside = []
        for place in sealed:
            held = Path(os.path.realpath(os.fspath(place)))
            if held != real and held.is_relative_to(real):
                inside.append(held.relative_to(real).as_posix())
        return cls(real, protect or None, locks_git, sealed=tuple(inside))

    def holds_settings(self, rel: str) -> bool:
        """Whether the root-relative ``rel`` is the agent's own settings: the project's
        ``loki.toml``, or inside a sealed path (the user's configuration)."""
        return settings_path(rel) or any(rel == s or rel.startswith(s + "/")
                                         for s in self.sealed)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The resolved path inside the root; PathError when it escapes, ProtectedError
        when it (as named, or where its links lead) is or lies in a protected path."""
        real = resolve_inside(self.path, path)
        if self.protect is not None:
            self.protect.check(self.rel(real), os.path.isdir(real))
            named = Path(os.path.normpath(self.path / os.fspath(path)))
            if named != real and named.is_relative_to(self.path):  # a link named like a secret
                self.protect.check(self.rel(named), os.path.isdir(named))
        return real

    def protected(self, real: Path, is_dir: bool) -> str | None:
        """The glob protecting the resolved ``real`` (or a folder above it), or None."""
        if self.protect is None or real == self.path:  # nothing to match: ask no rel
            return None
        return self.covered(self.rel(real), is_dir)

    def covered(self, rel: str, is_dir: bool = False) -> str | None:
        """The glob protecting the root-relative ``rel`` (or a folder above it), or None."""
        if self.protect is None:
            return None
        hit = self.protect.covering(rel, is_dir)
        return hit[1] if hit is not None else None

    def rel(self, real: Path) -> str:
        """Root-relative POSIX form of a resolved path ('.' for the root itself)."""
        return "/".join(self._parts(real)) or "."

    def is_temporary(self, real: Path) -> bool:
        """True when ``real`` lies under the system temp dir (by path components)."""
        tmp = Path(os.path.realpath(tempfile.gettempdir()))
        return real == tmp or real.is_relative_to(tmp)

    # -- descriptor walks -------------------------------------------------------------

    def _parts(self, real: Path) -> tuple[str, ...]:
        """The components of ``real`` below the root (ValueError when it is not below it):
        ``relative_to``'s answer, without building a Path."""
        parts, mine = real.parts, self.path.parts
        if parts[: len(mine)] != mine:
            raise ValueError(f"{str(real)!r} is not in the subpath of {str(self.path)!r}")
        return parts[len(mine) :]

    @contextmanager
    def folder_fd(self, parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
        """An fd of the folder root/parts, reached without following any symlink."""
        fd = os.open(self.path, DIR_FLAGS)
        try:
            for i, part in enumerate(parts):
                nfd = _step_into(fd, part, "/".join(parts[: i + 1]), create=create)
                os.close(fd)
                fd = nfd
            yield fd
        finally:
            os.close(fd)

    def stat(self, real: Path) -> os.stat_result | None:
        """lstat of a resolved path walked from the root; None when it does not exist."""
        return self._stat_parts(self._parts(real))

    def stat_rel(self, rel: str) -> os.stat_result | None:
        """``stat`` of a root-relative POSIX path as the checkpoints record them ('a/b'),
        with no Path made of it (a rewind of 100,000 files asks 200,000 times)."""
        parts = tuple(part for part in rel.split("/") if part not in ("", "."))  # as
        if ".." in parts:  # PurePosixPath(rel).parts: 'd/' is 'd', '.' the root
            raise PathError(f"{rel!r} leaves the root")
        return self._stat_parts(parts)

    def _stat_parts(self, parts: tuple[str, ...]) -> os.stat_result | None:
        if not parts:
            return os.stat(self.path)
        try:
            with self.folder_fd(parts[:-1]) as dfd:
                return os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
        except (FileNotFoundError, _NotAFolder):
            return None

    @contextmanager
    def open_file(self, real: Path) -> Iterator[int]:
        """A read-only fd of a regular file; FIFOs, sockets and devices are refused."""
        parts = self._parts(real)
        if not parts:
            raise PathError(f"{self.rel(real)} is a folder, not a file")
        if self.protect is not None:  # every read of a file's bytes passes here
            self.protect.check(self.rel(real), False)
        try:
            with self.folder_fd(parts[:-1]) as dfd:
                fd = os.open(parts[-1], READ_FLAGS, dir_fd=dfd)
        except FileNotFoundError:
            raise PathError(f"{self.rel(real)} does not exist") from None
        except OSError as exc:
            raise _swapped(self.rel(real), exc) from exc
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise PathError(
                    f"{self.rel(real)} is {_kind(mode)}; only regular files can be read"
                )
            yield fd
        finally:
            os.close(fd)

    @overload
    def read_bytes(self, real: Path) -> bytes: ...
    @overload
    def read_bytes(self, real: Path, *, limit: int) -> bytes | None: ...

    def read_bytes(self, real: Path, *, limit: int | None = None) -> bytes | None:
        """The file's bytes; None when ``limit`` is given and the file is larger."""
        with self.open_file(real) as fd, os.fdopen(os.dup(fd), "rb") as fh:
            if limit is None:
                return fh.read()
            size = os.fstat(fd).st_size
            if size > limit:
                return None
            # the size read, and one byte more: a read of ``limit`` would make a buffer
            # that large for every file; one that grew since fstat is read on to the limit
            data = fh.read(size + 1)
            if len(data) > size:
                data += fh.read(limit + 1 - len(data))
            return None if len(data) > limit else data

    def write_atomic(self, real: Path, data: bytes) -> bool:
        """Replace ``real`` with ``data`` atomically; returns True when the file is new.

        The bytes go to a temp file beside the target, are flushed to disk, then renamed
        over it: a reader (or a crash) sees the old content or the new, never a part.
        An existing file keeps its permission bits, except setuid and setgid (a program
        rewritten by the agent must not keep running as its owner); missing parent
        folders are made.
        """
        staged = self.stage(real, data)
        try:
            self.commit(staged)
        except BaseException:
            self.discard(staged)
            raise
        return staged.created

    def check_writable(self, real: Path) -> None:
        """PathError when no tool may write ``real``: the agent's own settings, and while
        the root locks them, the files git takes commands from (``_gitfiles``). ``stage``
        checks it; a dry run asks too."""
        rel = self.rel(real)
        if self.restores:
            return
        if self.holds_settings(rel):
            raise PathError(f"{printable(rel)} is read-only for the tools: it holds the "
                            "agent's own settings (fence, rules, hosts); only the user changes "
                            "it")
        if self.locks_git and git_code_path(rel):
            raise PathError(f"{printable(rel)} is read-only for the tools: git (or hg) takes "
                            "commands from it (hooks, core.fsmonitor, aliases, another git "
                            f"folder), which would run outside the sandbox; {HOW_TO_ALLOW_GIT}")

    def stage(self, real: Path, data: bytes, mode: int | None = None, *,
              sync: bool = True) -> Staged:
        """Write ``data`` to a flushed temp file beside ``real``; ``commit`` renames it over.

        Several files staged first and committed after change nothing until the renames,
        which are quick: a failure while staging leaves every file as it was. ``mode`` is
        for a new file (a file moved there keeps its bits); an existing one keeps its own.
        ``sync=False`` leaves flushing the data to ``sync_all``, once for many files.
        """
        parts = self._parts(real)
        if not parts:
            raise PathError("the root itself is a folder, not a file")
        rel = self.rel(real)
        self.check_writable(real)
        with self.folder_fd(parts[:-1], create=True) as dfd:
            name = parts[-1]
            old = _lstat_at(dfd, name)
            if old is not None and not stat.S_ISREG(old.st_mode):
                raise PathError(f"{rel} is {_kind(old.st_mode)}; only regular files can be written")
            if old is not None:
                mode = stat.S_IMODE(old.st_mode)
            elif mode is None:
                mode = 0o666 & ~_UMASK
            mode &= ~_SET_ID
            return Staged(real, _write_temp_at(dfd, name, data, mode, sync),
                          created=old is None)

    def commit(self, staged: Staged, *, sync: bool = True) -> None:
        """Rename a staged temp file over its target (the folder is walked again, no link
        followed: a folder swapped since staging has no temp file, and the rename fails).
        ``sync=False`` leaves flushing the folder to ``sync_all``, once for many files."""
        with self.folder_fd(self._parts(staged.real)[:-1]) as dfd:
            replaced = _open_at(dfd, staged.real.name)  # its blocks freed by _LATER, not here
            try:
                os.rename(staged.temp, staged.real.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            finally:
                if replaced is not None:
                    _LATER.close(replaced)
            if sync:
                os.fsync(dfd)

    def sync_all(self) -> None:
        """Flush everything written on the root's filesystem to disk at once (syncfs):
        many files staged with ``sync=False`` are made durable by one call, and renames
        after a second one. Where syncfs is missing, os.sync does the same for every
        filesystem."""
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if _SYNCFS is None or _SYNCFS(fd) != 0:
                os.sync()
        finally:
            os.close(fd)

    def sync_folders(self, reals: Iterable[Path]) -> None:
        """Make the names in the folders of ``reals`` durable (renames, removals, files
        and folders made): an fsync of each such folder and of every folder above it up
        to the root, each once. Unlike ``sync_all`` it flushes no file's data: what was
        renamed there was flushed before."""
        folders: set[tuple[str, ...]] = set()
        for real in reals:
            parts = self._parts(real)[:-1]
            folders.update(parts[:n] for n in range(len(parts) + 1))
        try:
            for parts in sorted(folders, key=len, reverse=True):  # the deepest first
                with self.folder_fd(parts) as fd:
                    os.fsync(fd)
        except (OSError, PathError):  # a folder gone or swapped since: flush everything
            self.sync_all()

    def discard(self, staged: Staged) -> None:
        """Remove a staged temp file that will not be committed; never raises."""
        with suppress(OSError, PathError), self.folder_fd(self._parts(staged.real)[:-1]) as dfd:
            os.unlink(staged.temp, dir_fd=dfd)

    def symlink(self, real: Path, target: str) -> None:
        """Make a link at ``real`` pointing at ``target`` (text: never resolved or
        followed); the folders on its way are walked without following links (made
        when missing); FileExistsError when something is there."""
        parts = self._parts(real)
        if not parts:
            raise PathError("the root itself cannot be a link")
        self.check_writable(real)
        with self.folder_fd(parts[:-1], create=True) as dfd:
            os.symlink(target, parts[-1], dir_fd=dfd)

    def set_mode(self, real: Path, mode: int) -> None:
        """chmod the regular file ``real`` (setuid/setgid included: this puts back what
        a file had); never follows a link."""
        parts = self._parts(real)
        with self.folder_fd(parts[:-1]) as dfd:
            try:
                fd = os.open(parts[-1], os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
            except OSError as exc:
                raise _swapped(self.rel(real), exc) from exc
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise PathError(f"{self.rel(real)} is not a regular file")
                os.chmod(f"/proc/self/fd/{fd}", mode)  # fchmod refuses an O_PATH descriptor
            finally:
                os.close(fd)

    def remove(self, real: Path, *, folder: bool = False) -> bool:
        """Unlink the file (or, with ``folder``, rmdir the empty folder) ``real``; a link
        is removed itself, never followed. False when it is already gone (or something
        below a file), and for a folder also when it is not empty or not a folder."""
        parts = self._parts(real)
        if not parts:
            raise PathError("the root itself cannot be removed")
        try:
            with self.folder_fd(parts[:-1]) as dfd:
                if folder:
                    os.rmdir(parts[-1], dir_fd=dfd)
                else:
                    os.unlink(parts[-1], dir_fd=dfd)
        except (FileNotFoundError, NotADirectoryError, _NotAFolder):
            return False
        except OSError as exc:
            if folder:
                return False  # not empty: something else lives there now
            raise PathError(exc.strerror or str(exc)) from exc
        return True


@dataclass(frozen=True)
class Staged:
    """A file's new content waiting in a temp file beside it (see ``Root.stage``)."""

    real: Path
    temp: str  # name of the temp file, in the target's folder
    created: bool  # no file stood at ``real`` when it was staged


class _NotAFolder(PathError):
    """A component of the path is a file (or FIFO...): nothing can exist below it."""


def _step_into(fd: int, part: str, what: str, *, create: bool) -> int:
    """Open the folder ``part`` (root-relative ``what``) below ``fd``, making it when
    ``create``; ``fd`` stays open."""
    try:
        return os.open(part, DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        raise _not_entered(fd, part, what, exc) from exc
    with suppress(FileExistsError):
        os.mkdir(part, 0o777, dir_fd=fd)
    try:
        return os.open(part, DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        raise _not_entered(fd, part, what, exc) from exc


def _not_entered(fd: int, part: str, what: str, exc: OSError) -> PathError:
    """Why the folder ``part`` could not be opened: O_DIRECTORY|O_NOFOLLOW gives ENOTDIR
    for a file and for a symlink alike, so look at what is there."""
    st = _lstat_at(fd, part) if exc.errno == errno.ENOTDIR else None
    if st is not None and not (stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        noun = "a file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
        return _NotAFolder(f"{what} is {noun}, not a folder")
    return _swapped(what, exc)


def _swapped(what: str, exc: OSError) -> PathError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return PathError(f"{what} changed while it was being opened (a symlink appeared); try again")
    return PathError(f"{what}: {exc.strerror or exc}")


def _lstat_at(dfd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _write_temp_at(dfd: int, name: str, data: bytes, mode: int, sync: bool = True) -> str:
    """A new temp file beside ``name`` holding ``data``, flushed to disk (unless not
    ``sync``: the caller flushes many at once); its name."""
    tmp = f".{name}.loki-{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600, dir_fd=dfd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            if sync:
                os.fsync(fh.fileno())
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    return tmp


def _open_at(dfd: int, name: str) -> int | None:
    """A read-only descriptor of the file ``name`` about to be replaced, if any."""
    try:
        return os.open(name, READ_FLAGS, dir_fd=dfd)
    except OSError:
        return None


class _Closer:
    """Closes descriptors in a thread of its own. A file renamed over is freed when its
    last link and its last descriptor are gone; on ext4 freeing its blocks waits on the
    filesystem's journal (about a millisecond per file, far more on a busy disk). Holding
    the old file open over the rename and closing it here takes that wait off the
    caller's path; the new file is in place, and as durable, either way."""

    MAX_WAITING = 256  # descriptors queued at most; beyond, closed at once

    def __init__(self) -> None:
        self._fds: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def close(self, fd: int) -> None:
        if self._fds.qsize() >= self.MAX_WAITING:
            os.close(fd)
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="loki-close",
                                                daemon=True)
                self._thread.start()
        self._fds.put(fd)

    def _run(self) -> None:
        while True:
            with suppress(OSError):
                os.close(self._fds.get())


_LATER = _Closer()


def _syncfs() -> Callable[[int], int] | None:
    """libc's syncfs(fd), or None where there is none (not Linux)."""
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


_SYNCFS = _syncfs()
_SET_ID = stat.S_ISUID | stat.S_ISGID
# os.umask can only be read by setting it: do it once, at import, before threads start.
_UMASK = os.umask(0)
os.umask(_UMASK)
