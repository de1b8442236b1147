"""UNIX sockets a command may connect to: only those in the places it works in.

A socket anywhere on disk may belong to a program that runs commands for whoever
connects (a tmux server, an ssh-agent, docker): a fenced command must not reach one
outside its places. Landlock (ABI 7) has no right for connecting to a pathname socket,
and a read-only mount does not stop ``connect``, so the supervisor stops every
``connect`` of a command (seccomp user notification) and, for a UNIX socket:

- takes the command's socket itself (``pidfd_getfd``: the same socket, so its real
  family decides, not an address a racing thread could still change);
- reads the address once, and walks its path as the command sees the filesystem, links
  followed one at a time (``_supervisor.walk``), to the socket file;
- allows it when that file, or a folder above it, is one of the command's places (the
  root, its scratch TMPDIR, writable folders, its private /tmp, and the user's
  ``unix_sockets``), compared by device and inode in the command's own mount view;
- then connects the socket itself, through ``/proc/self/fd/<the file it checked>``, and
  tells the command it connected: the path is never read again, so nothing can swap it
  between the check and the connect. A socket elsewhere gets EACCES and a note.

Other families (TCP: Landlock and the network namespace rule them) go on untouched. An
abstract address (no file) is left to the kernel, where Landlock (ABI 6+) scopes abstract
sockets to the command's own; a thread that rewrites the address between the read and
the kernel's own read could turn it into a path (see the docs: what remains).
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
from collections.abc import Callable, Sequence
from typing import Any

from . import _usernotif

_PIDFD_GETFD = 438  # the same number on every architecture (Linux 5.6)
_AF_UNIX = socket.AF_UNIX
_MAX_ADDRESS = 110  # sizeof(struct sockaddr_un)
_MAX_DEPTH = 256  # folders walked up from a socket to the filesystem's root
_libc: Any = None


def _c() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


class SocketPlaces:
    """Where a command's UNIX sockets may be: ``places`` (absolute paths, resolved in
    the command's own view on its first connect); ``note`` gets each refusal."""

    def __init__(self, places: Sequence[str], note: Callable[[str], None]) -> None:
        self.places = list(places)
        self.note = note
        self._ids: set[tuple[int, int]] | None = None

    def ids(self, pid: int, walk: Callable[[int, str, str], Any]) -> set[tuple[int, int]]:
        if self._ids is None:
            found = set()
            for place in self.places:
                got = walk(pid, place, "/")
                if isinstance(got, int):
                    continue
                parent, final, _ = got
                st = os.fstat(final)
                found.add((st.st_dev, st.st_ino))
                os.close(parent)
                os.close(final)
            self._ids = found
        return self._ids


def answer_connect(listener: int, notif: _usernotif.Notification, places: SocketPlaces,
                   walk: Callable[[int, str, str], Any]) -> tuple[int, bool]:
    """(errno, done) for a stopped connect: (0, False) lets it run as it is."""
    sock = _grab(notif.pid, notif.args[0] & 0xFFFFFFFF)
    if sock < 0:
        return 0, False  # not a descriptor we can take: the kernel answers it (EBADF...)
    try:
        if _domain(sock) != _AF_UNIX:
            return 0, False
        raw = _address(notif)
        if isinstance(raw, int):
            return raw, False
        if not _usernotif.still_waiting(listener, notif.id):
            return errno.EPERM, False
        family, address = struct.unpack_from("=H", raw)[0], raw[2:]
        if family == socket.AF_UNSPEC or (address[:1] == b"\0" and _own_network(notif.pid)):
            return _connect(sock, raw)  # a disconnect, or its own namespace's abstract names
        if address[:1] == b"\0":
            return 0, False  # abstract, in our network namespace: Landlock's scope decides
        path = os.fsdecode(address.split(b"\0", 1)[0])
        return _connect_checked(sock, notif.pid, path, places, walk)
    finally:
        os.close(sock)


def _connect_checked(sock: int, pid: int, path: str, places: SocketPlaces,
                     walk: Callable[[int, str, str], Any]) -> tuple[int, bool]:
    found = walk(pid, path, f"/proc/{pid}/cwd")
    if isinstance(found, int):
        return found, False
    parent, final, _ = found
    try:
        if not _inside(parent, final, places.ids(pid, walk)):
            places.note(f"loki sandbox: refused connecting to the UNIX socket {path!r}: "
                        "commands reach only sockets in the root, their TMPDIR and writable "
                        "folders (the user may allow others: unix_sockets=[...])")
            return errno.EACCES, False
        target = f"/proc/self/fd/{final}".encode()
        return _connect(sock, struct.pack("=H", _AF_UNIX) + target + b"\0")
    finally:
        os.close(parent)
        os.close(final)


def _connect(sock: int, raw: bytes) -> tuple[int, bool]:
    """Connect our copy of the command's socket to ``raw`` (a sockaddr): (errno, done)."""
    if _c().connect(sock, ctypes.c_char_p(raw), len(raw)) != 0:
        return ctypes.get_errno() or errno.ECONNREFUSED, False
    return 0, True


def _own_network(pid: int) -> bool:
    """Process ``pid`` lives in another network namespace than ours (its own)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


def _inside(parent: int, final: int, ids: set[tuple[int, int]]) -> bool:
    st = os.fstat(final)
    if (st.st_dev, st.st_ino) in ids:
        return True
    here = os.dup(parent)
    try:
        for _ in range(_MAX_DEPTH):
            st = os.fstat(here)
            if (st.st_dev, st.st_ino) in ids:
                return True
            up = os.open("..", os.O_PATH | os.O_CLOEXEC, dir_fd=here)
            above = os.fstat(up)
            os.close(here)
            here = up
            if (above.st_dev, above.st_ino) == (st.st_dev, st.st_ino):
                return False  # the root
        return False
    finally:
        os.close(here)


def _grab(pid: int, fd: int) -> int:
    """Our own descriptor of process ``pid``'s ``fd`` (the same open socket), or -1."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return -1
    try:
        got = int(_c().syscall(ctypes.c_long(_PIDFD_GETFD), ctypes.c_int(pidfd),
                               ctypes.c_int(fd), ctypes.c_uint(0)))
        return got if got >= 0 else -1
    finally:
        os.close(pidfd)


def _domain(fd: int) -> int:
    value = ctypes.c_int(0)
    size = ctypes.c_uint32(ctypes.sizeof(value))
    if _c().getsockopt(fd, socket.SOL_SOCKET, socket.SO_DOMAIN, ctypes.byref(value),
                       ctypes.byref(size)) != 0:
        return -1  # not a socket: the kernel answers ENOTSOCK
    return value.value


def _address(notif: _usernotif.Notification) -> bytes | int:
    """The address the command passed, read once, or the errno its connect fails with
    (never let through: what the kernel would read again may differ)."""
    length = int(notif.args[2] & 0xFFFFFFFF)
    if length > _MAX_ADDRESS or length < 2:
        return errno.EINVAL
    memory = _usernotif.Memory(notif.pid)
    try:
        data = memory.read(notif.args[1], length)
    except OSError:
        return errno.EFAULT
    finally:
        memory.close()
    if len(data) < length:
        return errno.EFAULT
    family = struct.unpack_from("=H", data)[0]
    if family not in (_AF_UNIX, socket.AF_UNSPEC) or (family == _AF_UNIX and length <= 2):
        return errno.EINVAL
    return data
