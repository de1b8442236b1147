"""Seccomp user notification, both halves: the launcher's filter and the supervisor's reads.

The launcher (stdlib only, run with ``-I -S``) calls :func:`hand_over` in the command's
own process just before it execs the command: a filter that stops every ``execve`` and
``execveat`` (and ``connect``, when asked) and waits for an answer is loaded, and its
listener descriptor is sent to the toolbox's supervisor over a UNIX socket
(``SCM_RIGHTS``) with the session's token; the supervisor acknowledges with one byte
before the command may start. The filter is inherited by everything the command starts
and cannot be removed, so every program started below it is stopped until answered.

The supervisor's side (:func:`receive`, :func:`reply`, :func:`still_waiting`,
:class:`Memory`) speaks the kernel's ioctls on that descriptor and reads the stopped
process's memory through ``/proc/<pid>/mem``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

TYPE_CHECKING = False  # typing costs ~8 ms at every start of the command launcher
if TYPE_CHECKING:
    from typing import Any

_NOTIFY = 0x7FC00000  # SCMP_ACT_NOTIFY
_ALLOW = 0x7FFF0000
_ENOSYS = 0x00050000 | errno.ENOSYS
# struct seccomp_notif: id, pid, flags, then seccomp_data (nr, arch, ip, args[6])
_NOTIF = struct.Struct("=QII" + "iIQ6Q")
_RESP = struct.Struct("=QqiI")  # id, val, error, flags
_IOCTL_RECV = 0xC0502100  # _IOWR('!', 0, struct seccomp_notif)
_IOCTL_SEND = 0xC0182101  # _IOWR('!', 1, struct seccomp_notif_resp)
_IOCTL_ID_VALID = 0x40082102  # _IOW('!', 2, __u64)
_IOCTL_SET_FLAGS = 0x40082104  # _IOW('!', 4, __u64): its argument is the flags, by value
_SYNC_WAKE_UP = 1  # SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
FLAG_CONTINUE = 1  # SECCOMP_USER_NOTIF_FLAG_CONTINUE: let the call run as asked (it reads
# its arguments again: only for a call whose answer depends on nothing the process can change)
_ACK = b"k"


def _syscall_numbers(lib: ctypes.CDLL, names: tuple[str, ...]) -> list[int]:
    found = []
    for name in names:
        nr = int(lib.seccomp_syscall_resolve_name(name.encode()))
        if nr < 0:
            raise OSError(errno.ENOSYS, f"seccomp: no syscall {name} here")
        found.append(nr)
    return found


def hand_over(control: object, token: bytes, syscalls: tuple[str, ...], lib: ctypes.CDLL,
              connector: object = None) -> None:
    """Load a filter that stops ``syscalls`` for the supervisor, send it the listener
    over ``control`` (a connected UNIX socket), with ``connector``'s channel when given
    (``_connector``: it makes the connects the supervisor answers), and wait for its
    acknowledgement. ``lib`` is libseccomp (``_seccomp.load_library``). Raises OSError:
    the command must not run unsupervised."""
    lib.seccomp_notify_fd.argtypes = (ctypes.c_void_p,)
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise OSError(errno.ENOMEM, "seccomp_init failed")
    try:
        for nr in _syscall_numbers(lib, syscalls):
            _check(lib.seccomp_rule_add_array(ctx, _NOTIFY, nr, 0, None), "notify rule")
        if "connect" in syscalls:  # io_uring connects without a system call we could stop
            for nr in _syscall_numbers(lib, ("io_uring_setup",)):
                _check(lib.seccomp_rule_add_array(ctx, _ENOSYS, nr, 0, None), "io_uring rule")
        _check(lib.seccomp_load(ctx), "seccomp_load (user notification)")
        listener = int(lib.seccomp_notify_fd(ctx))
        if listener < 0:
            raise OSError(-listener, "seccomp: no listener descriptor")
    finally:
        lib.seccomp_release(ctx)
    import _socket

    try:
        fds = [listener, *([connector.fileno()] if connector is not None else [])]  # type: ignore[attr-defined]
        rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
        control.sendmsg([token], rights)  # type: ignore[attr-defined]
        if control.recv(1) != _ACK:  # type: ignore[attr-defined]
            raise OSError(errno.EPERM, "the toolbox's supervisor did not take the command")
    finally:
        os.close(listener)


def try_listening(lib: ctypes.CDLL) -> str:
    """Load a filter with a listener in this process ('' when it works, else why not):
    a process already under another supervisor's listener cannot get one (EBUSY)."""
    lib.seccomp_notify_fd.argtypes = (ctypes.c_void_p,)
    ctx = lib.seccomp_init(_ALLOW)
    try:
        nr = _syscall_numbers(lib, ("getcpu",))[0]  # a call this process no longer makes
        _check(lib.seccomp_rule_add_array(ctx, _NOTIFY, nr, 0, None), "notify rule")
        _check(lib.seccomp_load(ctx), "seccomp_load (user notification)")
    except OSError as exc:
        if exc.errno in (errno.EBUSY, errno.ECANCELED):  # libseccomp hides the kernel's EBUSY
            return ("the kernel gives this process no listener: a supervisor above it listens "
                    "already (a toolbox inside another one's command: that one checks its "
                    f"programs) [{exc.strerror}]")
        return str(exc)
    finally:
        lib.seccomp_release(ctx)
    return ""


def _check(result: int, what: str) -> None:
    if result < 0:  # libseccomp returns -errno
        raise OSError(-result, f"seccomp: {what}: {os.strerror(-result)}")


def acknowledge(sock: object) -> None:
    sock.sendall(_ACK)  # type: ignore[attr-defined]


# -- the supervisor's side ---------------------------------------------------------------


_libc_ioctl: Any = None


def _ioctl(fd: int, request: int, buf: ctypes.Array[ctypes.c_char] | int | None) -> int:
    global _libc_ioctl
    if _libc_ioctl is None:
        _libc_ioctl = ctypes.CDLL(None, use_errno=True).ioctl
        _libc_ioctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)
    return int(_libc_ioctl(fd, request, buf))


def wake_synchronously(listener: int) -> bool:
    """Ask the kernel to hand each stop to this supervisor, and its answer back, on the
    CPU that made it (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6): a round trip is two
    direct switches instead of two wake-ups through the scheduler. False where the kernel
    has no such flag (the stops work as before, only slower)."""
    return _ioctl(listener, _IOCTL_SET_FLAGS, _SYNC_WAKE_UP) == 0


class Notification:
    """A stopped system call: ``id``, ``pid``, syscall ``nr`` and its six ``args``."""

    __slots__ = ("args", "id", "nr", "pid")

    def __init__(self, raw: bytes) -> None:
        fields = _NOTIF.unpack(raw)
        self.id, self.pid, self.nr = fields[0], fields[1], fields[3]
        self.args = fields[6:12]


def receive(listener: int) -> Notification | None:
    """The next stopped call (blocks); None when it vanished first (the process died)."""
    buf = ctypes.create_string_buffer(_NOTIF.size)  # zeroed, as the kernel requires
    if _ioctl(listener, _IOCTL_RECV, buf) != 0:
        err = ctypes.get_errno()
        if err in (errno.ENOENT, errno.EINTR):
            return None
        raise OSError(err, os.strerror(err))
    return Notification(buf.raw)


def reply(listener: int, notif_id: int, *, error: int = 0, done: bool = False) -> None:
    """Answer a stopped call: let it run (``error`` 0), fail it with ``-error``, or
    (``done``) tell it it succeeded: the supervisor made it in its place."""
    flags = 0 if error or done else FLAG_CONTINUE
    buf = ctypes.create_string_buffer(_RESP.pack(notif_id, 0, -error if error else 0, flags),
                                      _RESP.size)
    _ioctl(listener, _IOCTL_SEND, buf)  # ENOENT: it died meanwhile; nothing to answer


def still_waiting(listener: int, notif_id: int) -> bool:
    """The call is still stopped: the process that made it has not changed since."""
    buf = ctypes.create_string_buffer(struct.pack("=Q", notif_id), 8)
    return _ioctl(listener, _IOCTL_ID_VALID, buf) == 0


class Memory:
    """Reads of a stopped process's memory (``/proc/<pid>/mem``)."""

    def __init__(self, pid: int) -> None:
        self.fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)

    def close(self) -> None:
        os.close(self.fd)

    def read(self, address: int, size: int) -> bytes:
        return os.pread(self.fd, size, address)

    def string(self, address: int, limit: int) -> bytes | None:
        """The NUL-terminated string at ``address``; None when longer than ``limit``."""
        out = b""
        while len(out) <= limit:
            chunk = os.pread(self.fd, 4096 - address % 4096, address)  # never past a page
            if not chunk:
                raise OSError(errno.EFAULT, "unreadable address")
            end = chunk.find(b"\0")
            if end >= 0:
                return out + chunk[:end]
            out += chunk
            address += len(chunk)
        return None

    def pointers(self, address: int, limit: int) -> tuple[list[int], bool]:
        """The NULL-terminated pointer array at ``address`` (at most ``limit``), and
        whether it went on past the limit."""
        found: list[int] = []
        while len(found) < limit:
            data = os.pread(self.fd, 8 * min(64, limit - len(found)), address)
            if len(data) < 8:
                raise OSError(errno.EFAULT, "unreadable address")
            for (value,) in struct.iter_unpack("=Q", data[: len(data) // 8 * 8]):
                if value == 0:
                    return found, False
                found.append(value)
            address += len(data) // 8 * 8
        return found, True
