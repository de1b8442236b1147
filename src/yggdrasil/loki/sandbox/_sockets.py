"""UNIX sockets a command may connect to: only those in the places it works in.

A socket anywhere on disk may belong to a program that runs commands for whoever
connects (a tmux server, an ssh-agent, docker): a fenced command must not reach one
outside its places. Landlock (ABI 7) has no right for connecting to a pathname socket,
and a read-only mount does not stop ``connect``, so the supervisor stops every
``connect`` of a command (seccomp user notification) and decides and acts on one copy:

- it takes the command's socket itself (``pidfd_getfd``: the open socket, whatever the
  descriptor number holds a moment later) and reads the address once;
- for a UNIX socket and a path, it walks the path as the command sees the filesystem,
  links followed one at a time (``_supervisor.walk``), to the socket file, and allows
  it when that file, or a folder above it, is one of the command's places (the root, its
  scratch TMPDIR, writable folders, its private /tmp, and the user's ``unix_sockets``),
  compared by device and inode in the command's own mount view; a socket elsewhere gets
  EACCES and a note;
- the command's connector (``_connector``, inside its fence and namespaces) then
  connects the taken socket to the copied address, or to the checked file
  (``/proc/self/fd/<n>``), and the command gets its answer (0, EINPROGRESS, ECONNREFUSED...).

Nothing is ever let through to the kernel as it is (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``
would read the descriptor and the address again: a thread could dup2 an AF_UNIX socket
over the AF_INET one checked, or turn an abstract name into a path). TCP is still ruled
by Landlock and the network namespace (the connector has both), an abstract name by
Landlock's scope (ABI 6+: the command's own sockets only; older kernels: any).
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
from collections.abc import Callable, Sequence
from typing import Any

from . import _connector, _usernotif

_PIDFD_GETFD = 438  # the same number on every architecture (Linux 5.6)
_AF_UNIX = socket.AF_UNIX
_MAX_ADDRESS = 128  # sizeof(struct sockaddr_storage): the kernel takes no longer one
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


class Connects:
    """A command's connector channel (``_connector``) and the connects it still owes."""

    def __init__(self, channel: socket.socket) -> None:
        self.channel, self.pending = channel, set[int]()

    def ask(self, notif_id: int, sock: int, raw: bytes, checked: int = -1) -> int | None:
        """Have the connector connect ``sock`` to ``raw`` (or to the ``checked`` file):
        None, it answers later; else the errno the connect fails with now."""
        fds = [sock, *([checked] if checked >= 0 else [])]
        try:
            self.channel.sendmsg([_connector.REQUEST.pack(notif_id) + raw],
                                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                   struct.pack(f"{len(fds)}i", *fds))], socket.MSG_NOSIGNAL)
        except OSError:
            return errno.EPERM  # the connector is gone: nothing connects for this command
        self.pending.add(notif_id)
        return None

    def answers(self) -> list[tuple[int, int]]:
        """(notification id, errno) of the connects made since the last look."""
        got: list[tuple[int, int]] = []
        while True:
            try:
                data = self.channel.recv(_connector.ANSWER.size, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return got
            except OSError:
                data = b""
            if len(data) != _connector.ANSWER.size:
                return got
            notif_id, error = _connector.ANSWER.unpack(data)
            self.pending.discard(notif_id)
            got.append((notif_id, error))

    def close(self) -> list[int]:
        """Stop; the ids of the connects still owed (they fail: EPERM)."""
        self.channel.close()
        owed, self.pending = sorted(self.pending), set()
        return owed


def answer_connect(listener: int, notif: _usernotif.Notification, places: SocketPlaces,
                   walk: Callable[[int, str, str], Any], connects: Connects) -> int | None:
    """The errno a stopped connect fails with, or None: ``connects`` makes it on the
    socket taken here and answers later. Never lets the kernel carry on: it would read
    the descriptor and the address again, which another thread may have changed."""
    sock = _grab(notif.pid, notif.args[0] & 0xFFFFFFFF)
    if sock < 0:
        return -sock  # not a descriptor of the process (EBADF), or it is gone
    try:
        domain = _domain(sock)
        if domain < 0:
            return errno.ENOTSOCK
        raw = _address(notif)
        if isinstance(raw, int):
            return raw
        if not _usernotif.still_waiting(listener, notif.id):
            return errno.EPERM
        if domain == _AF_UNIX and _is_path(raw):
            path = os.fsdecode(raw[2:].split(b"\0", 1)[0])
            return _connect_checked(notif, sock, path, places, walk, connects)
        # Any other family, an abstract name (Landlock's scope decides in the connector,
        # in the command's domain), a disconnect or a bad address (the kernel says which).
        return connects.ask(notif.id, sock, raw)
    finally:
        os.close(sock)


def _is_path(raw: bytes) -> bool:
    return (len(raw) > 2 and struct.unpack_from("=H", raw)[0] == _AF_UNIX
            and raw[2] != 0)


def _connect_checked(notif: _usernotif.Notification, sock: int, path: str,
                     places: SocketPlaces, walk: Callable[[int, str, str], Any],
                     connects: Connects) -> int | None:
    pid = notif.pid
    found = walk(pid, path, f"/proc/{pid}/cwd")
    if isinstance(found, int):
        return found
    parent, final, _ = found
    try:
        if not _inside(parent, final, places.ids(pid, walk)):
            places.note(f"loki sandbox: refused connecting to the UNIX socket {path!r}: "
                        "commands reach only sockets in the root, their TMPDIR and writable "
                        "folders (the user may allow others: unix_sockets=[...])")
            return errno.EACCES
        return connects.ask(notif.id, sock, b"", final)
    finally:
        os.close(parent)
        os.close(final)


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
    """Our own descriptor of process ``pid``'s ``fd`` (the same open socket), or -errno."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return -errno.EPERM  # gone: nobody waits for the answer
    try:
        got = int(_c().syscall(ctypes.c_long(_PIDFD_GETFD), ctypes.c_int(pidfd),
                               ctypes.c_int(fd), ctypes.c_uint(0)))
        if got < 0:
            return -(ctypes.get_errno() if ctypes.get_errno() == errno.EBADF else errno.EPERM)
        return got
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
    (as the kernel's own copy fails: a length past a sockaddr_storage, memory it cannot
    read)."""
    length = ctypes.c_int32(notif.args[2] & 0xFFFFFFFF).value
    if length < 0 or length > _MAX_ADDRESS:
        return errno.EINVAL
    if length == 0:
        return b""
    memory = _usernotif.Memory(notif.pid)
    try:
        data = memory.read(notif.args[1], length)
    except OSError:
        return errno.EFAULT
    finally:
        memory.close()
    return data if len(data) == length else errno.EFAULT
