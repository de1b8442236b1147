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
- then it connects the taken socket itself, to the copied address or, for a path, to
  the file it checked (``/proc/self/fd/<n>``), and the command gets the kernel's answer
  (0, EINPROGRESS, EAGAIN, ECONNREFUSED...). Where that answer is the command's Landlock
  domain's to give (an abstract name under its scope, TCP under its rules), or the
  connect may wait long (a blocking socket to another host: it would hold up the
  command's other calls), the command's connector (``_connector``, a process inside its
  fence and namespaces) makes it instead and sends the answer back.

Nothing is ever let through to the kernel as it is (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``
would read the descriptor and the address again: a thread could dup2 an AF_UNIX socket
over the AF_INET one checked, or turn an abstract name into a path). TCP is still ruled
by Landlock and the network namespace, an abstract name by Landlock's scope (ABI 6+: the
command's own sockets only; older kernels: any).
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
_PIDFD_THREAD = os.O_EXCL  # a pidfd of one thread, not of a process (Linux 6.9)
_AF_UNIX = socket.AF_UNIX
_MAX_ADDRESS = 128  # sizeof(struct sockaddr_storage): the kernel takes no longer one
_MAX_DEPTH = 256  # folders walked up from a socket to the filesystem's root
_libc: Any = None


class _IoVec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("len", ctypes.c_size_t))


def _c() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
        _libc.process_vm_readv.restype = ctypes.c_ssize_t
        _libc.process_vm_readv.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong,
                                           ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong)
    return _libc


class SocketPlaces:
    """Where a command's UNIX sockets may be: ``places`` (absolute paths, resolved in
    the command's own view on its first connect); ``note`` gets each refusal. What the
    command's Landlock domain decides: ``tcp_fenced`` (TCP connect refused: ABI 4+, no
    network), ``scoped`` (abstract names: the domain's own only, ABI 6+); and whether it
    shares our network namespace (else its abstract names and hosts are its own)."""

    def __init__(self, places: Sequence[str], note: Callable[[str], None], *,
                 tcp_fenced: bool = False, scoped: bool = False,
                 shared_network: bool = True) -> None:
        self.places = list(places)
        self.note = note
        self.tcp_fenced, self.scoped = tcp_fenced, scoped
        self.shared_network = shared_network
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

    def ask(self, notif_id: int, sock: int, raw: bytes) -> tuple[int, bool] | None:
        """Have the connector connect ``sock`` to ``raw``: None, it answers later; else
        (the errno the connect fails with now, False)."""
        fds = [sock]
        try:
            self.channel.sendmsg([_connector.REQUEST.pack(notif_id) + raw],
                                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                   struct.pack(f"{len(fds)}i", *fds))], socket.MSG_NOSIGNAL)
        except OSError:
            return errno.EPERM, False  # the connector is gone: nothing connects for it
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


Answer = tuple[int, bool] | None  # (errno, connected) now; None: the connector answers


def answer_connect(listener: int, notif: _usernotif.Notification, places: SocketPlaces,
                   walk: Callable[[int, str, str], Any], connects: Connects | None) -> Answer:
    """Decide a stopped connect and make it on the socket taken here, with the address
    read here. Never lets the kernel carry on: it would read the descriptor and the
    address again, which another thread may have changed meanwhile."""
    sock = _grab(notif.pid, notif.args[0] & 0xFFFFFFFF)
    if sock < 0:
        return -sock, False  # not a descriptor of the process (EBADF), or it is gone
    try:
        domain = _domain(sock)
        if domain < 0:
            return errno.ENOTSOCK, False
        raw = _address(notif)
        if isinstance(raw, int):
            return raw, False
        if not _usernotif.still_waiting(listener, notif.id):
            return errno.EPERM, False
        if domain == _AF_UNIX and _is_path(raw):
            path = os.fsdecode(raw[2:].split(b"\0", 1)[0])
            return _connect_checked(sock, notif.pid, path, places, walk)
        if places.tcp_fenced and _is_tcp(sock, domain, raw):
            return errno.EACCES, False  # Landlock's answer to the command's own connect
        if connects is not None and _by_connector(sock, domain, raw, places):
            return connects.ask(notif.id, sock, raw)
        return _connect(sock, raw)
    finally:
        os.close(sock)


def _is_tcp(sock: int, domain: int, raw: bytes) -> bool:
    """A connect Landlock refuses under TCP rules with no port allowed: a stream socket of
    the Internet families (TCP; MPTCP and SCTP's stream sockets too: stricter), to an
    address (an AF_UNSPEC disconnect is allowed)."""
    return (domain in (socket.AF_INET, socket.AF_INET6) and _type(sock) == socket.SOCK_STREAM
            and _family(raw) != socket.AF_UNSPEC)


def _by_connector(sock: int, domain: int, raw: bytes, places: SocketPlaces) -> bool:
    """Only the connector gets the kernel's answer: one that depends on the command's
    Landlock domain (an abstract name under its scope), or one that may wait long (a
    blocking socket to another host), which here would hold up the command's other
    stopped calls. The rest is the same whoever connects (the socket keeps its network
    namespace): made here, one round trip less."""
    if domain == _AF_UNIX:
        return places.scoped and len(raw) > 2 and raw[2] == 0 and _family(raw) == _AF_UNIX
    return os.get_blocking(sock) and not _loopback(domain, raw)


def _family(raw: bytes) -> int:
    return int(struct.unpack_from("=H", raw)[0]) if len(raw) >= 2 else -1


def _loopback(domain: int, raw: bytes) -> bool:
    """A loopback address (answered at once, no wait for another host)."""
    if domain == socket.AF_INET and len(raw) >= 8 and _family(raw) == socket.AF_INET:
        return raw[4] == 127
    if domain == socket.AF_INET6 and len(raw) >= 24 and _family(raw) == socket.AF_INET6:
        ip = raw[8:24]
        return ip == bytes(15) + b"\1" or (ip[:12] == bytes(10) + b"\xff\xff" and ip[12] == 127)
    return False


def _is_path(raw: bytes) -> bool:
    return len(raw) > 2 and _family(raw) == _AF_UNIX and raw[2] != 0


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
        target = f"/proc/self/fd/{final}".encode()  # the file checked, not the path again
        return _connect(sock, struct.pack("=H", _AF_UNIX) + target + b"\0")
    finally:
        os.close(parent)
        os.close(final)


def _connect(sock: int, raw: bytes) -> tuple[int, bool]:
    """Connect our copy of the command's socket to ``raw`` (a sockaddr): (errno, done)."""
    if _c().connect(sock, ctypes.c_char_p(raw), len(raw)) != 0:
        return ctypes.get_errno() or errno.ECONNREFUSED, False
    return 0, True


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
    try:  # the calling thread's own table (Linux 6.9+), else its process's
        pidfd = os.pidfd_open(pid, _PIDFD_THREAD)
    except OSError:
        try:
            pidfd = os.pidfd_open(_process_of(pid))
        except (OSError, ValueError):
            return -errno.EPERM  # gone: nobody waits for the answer
    try:
        got = int(_c().syscall(ctypes.c_long(_PIDFD_GETFD), ctypes.c_int(pidfd),
                               ctypes.c_int(fd), ctypes.c_uint(0)))
        if got < 0:
            return -(ctypes.get_errno() if ctypes.get_errno() == errno.EBADF else errno.EPERM)
        return got
    finally:
        os.close(pidfd)


def _process_of(tid: int) -> int:
    """The process (thread group) of thread ``tid``: pidfd_open takes only those before 6.9."""
    with open(f"/proc/{tid}/status", "rb") as fh:
        for line in fh:
            if line.startswith(b"Tgid:"):
                return int(line.split()[1])
    raise ValueError(f"no Tgid for {tid}")


def _domain(fd: int) -> int:
    return _option(fd, socket.SO_DOMAIN)  # -1: not a socket (the kernel answers ENOTSOCK)


def _type(fd: int) -> int:
    return _option(fd, socket.SO_TYPE)


def _option(fd: int, name: int) -> int:
    value = ctypes.c_int(0)
    size = ctypes.c_uint32(ctypes.sizeof(value))
    if _c().getsockopt(fd, socket.SOL_SOCKET, name, ctypes.byref(value),
                       ctypes.byref(size)) != 0:
        return -1
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
    data = ctypes.create_string_buffer(length)
    local = _IoVec(ctypes.addressof(data), length)
    remote = _IoVec(notif.args[1], length)
    got = _c().process_vm_readv(notif.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    return data.raw if got == length else errno.EFAULT  # one call: /proc/<pid>/mem takes 3
