"""A command's connector: the process that makes the connects the supervisor answered.

The supervisor must decide and act on one copy of a connect: if it let the kernel carry
on (``SECCOMP_USER_NOTIF_FLAG_CONTINUE``), the kernel would read the descriptor and the
address again, and another thread of the command could have changed both since (dup2 an
AF_UNIX socket over the AF_INET one it checked; flip an abstract name into a path). So
the supervisor takes the socket (``pidfd_getfd``) and copies the address, and makes the
connect itself, or, where the answer is the command's Landlock domain's to give (an
abstract name under its scope, TCP under its rules) or may take long (a blocking socket
to another host), sends both here: this process connects that socket to that address
and tells it the result, which the command then gets.

The launcher forks it (twice: it is never a child of the command) after the fence and
before the seccomp listener, so it is under the command's Landlock domain (TCP rules,
the abstract-socket scope) and in its namespaces, but its own connects are not stopped.
It is not dumpable: the command (same user, no capability) can neither trace it nor
read or write its memory or descriptors; it leaves the command's process group. Its
threads take requests in turn, one always idle, so a blocking connect that waits holds
up no other; a non-blocking one answers at once (EINPROGRESS). It ends when the supervisor closes its end, or with the command (the
reaper, the PID namespace).

Standard library only: the launcher runs with ``-I -S``.
"""

from __future__ import annotations

import _socket
import ctypes
import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

REQUEST = struct.Struct("=Q")  # the notification's id; the address follows; the socket
ANSWER = struct.Struct("=Qi")  # in SCM_RIGHTS   ->   id, errno (0: connected)
MAX_REQUEST = REQUEST.size + 128  # sizeof(struct sockaddr_storage)
_PR_SET_DUMPABLE = 4
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine, -1)
_CLONE_PARENT, _SIGCHLD = 0x8000, 17


def start() -> Any:
    """Fork the connector as our sibling; our end of its channel (a SEQPACKET socket,
    close-on-exec)."""
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    if _fork_sibling() == 0:
        try:
            ours.close()
            _serve(theirs)
        finally:
            os._exit(0)
    theirs.close()
    return ours


def _fork_sibling() -> int:
    """fork(), but the child's parent is ours (the reaper, or the namespace's PID 1), so
    it is never a child the command would wait for: ``clone(CLONE_PARENT)``, one fork
    where a double fork costs two on the command's way to start. 0 in the child."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    pid = int(libc.syscall(_SYS_CLONE, ctypes.c_ulong(_CLONE_PARENT | _SIGCHLD),
                           ctypes.c_ulong(0), None, None, ctypes.c_ulong(0)))
    if pid >= 0:
        return pid
    first = os.fork()  # no clone here (another architecture's order): fork twice
    if first == 0:
        if os.fork() != 0:
            os._exit(0)
        return 0
    os.waitpid(first, 0)
    return first


class _Workers:
    """Threads that each take the next request off the channel and make it: one stays
    idle while one is free to start (up to ``_MAX_THREADS``), so a connect that waits
    (a far host, a full backlog) holds up no other."""

    def __init__(self, channel: Any, libc: Any) -> None:
        import _thread

        self.channel, self.libc, self.start = channel, libc, _thread.start_new_thread
        self.lock, self.idle, self.threads = _thread.allocate_lock(), 0, 0
        self.done = _thread.allocate_lock()
        self.done.acquire()

    def grow(self) -> None:
        """Start a thread unless one is idle already (the lock held)."""
        if self.idle == 0 and self.threads < _MAX_THREADS:
            self.idle += 1
            self.threads += 1
            self.start(self.work, ())

    def work(self) -> None:
        while True:
            try:
                data, ancillary, _, _ = self.channel.recvmsg(MAX_REQUEST, _socket.CMSG_SPACE(4))
            except InterruptedError:
                continue
            except OSError:
                data, ancillary = b"", []
            if not data:  # the supervisor is done with this command
                try:  # noqa: SIM105 (contextlib costs the launcher an import)
                    self.done.release()
                except RuntimeError:
                    pass  # another thread saw it first
                return
            with self.lock:
                self.idle -= 1
                self.grow()
            fds = _received(ancillary)
            if len(data) >= REQUEST.size and fds:
                _connect(self.libc, self.channel, data, fds)
            else:
                _close(fds)
            with self.lock:
                self.idle += 1


_MAX_THREADS = 64


def _serve(channel: Any) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return  # traceable: make nothing (the supervisor fails every connect then)
    _drop_descriptors(channel.fileno())
    os.setsid()  # out of the command's process group: its `kill 0` is not for us
    import _signal

    _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)
    workers = _Workers(channel, libc)
    with workers.lock:
        workers.grow()
    workers.done.acquire()  # the channel closed: every thread sees it and ends


def _connect(libc: Any, channel: Any, data: bytes, fds: list[int]) -> None:
    (notif_id,) = REQUEST.unpack_from(data)
    address = data[REQUEST.size:]
    try:
        failed = libc.connect(fds[0], ctypes.c_char_p(address), len(address)) != 0
        error = (ctypes.get_errno() or 1) if failed else 0
        channel.send(ANSWER.pack(notif_id, error))
    except OSError:
        pass  # the supervisor is gone: so is the command's wait
    finally:
        _close(fds)


def _received(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [v for (v,) in struct.iter_unpack("i", payload[: len(payload) // 4 * 4])]
    return fds


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:  # noqa: SIM105 (contextlib costs the launcher an import at every command)
            os.close(fd)
        except OSError:
            pass


def _drop_descriptors(keep: int) -> None:
    """Only the channel stays open: the command's pipes must end when the command does."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        if fd != null:
            os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 20)
