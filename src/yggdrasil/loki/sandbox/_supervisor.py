"""The toolbox's side of seccomp user notification: every exec of a command, decided here.

A :class:`Supervisor` listens on a UNIX socket in a private folder. Each command gets a
:class:`SupervisedCommand` (a token and a decision function) before it starts; its launcher sends
the listener of its filter with the token (``_usernotif.hand_over``) and a thread of
the session then answers every ``execve``/``execveat`` the command, or anything it starts
at any depth, makes: it reads the program's path and argv from the stopped process's
memory, finds the file that path reaches in the process's own view of the filesystem
(links followed one by one, from its root or working folder), asks the decision
function, checks that the call is still the one it read (``SECCOMP_IOCTL_NOTIF_ID_VALID``:
the process did not die and its pid was not reused), and lets it run or fails it with
the errno the decision gave. A path that reaches no file fails as the kernel would fail
it (ENOENT, ENOTDIR, ELOOP, EACCES), so a file that appears between the check and the exec
cannot slip through unchecked. When every process under the filter is gone the listener
hangs up and the thread ends.

What stays open: a process that changes its own memory (another thread, or a parent
sharing memory with a vfork child) or swaps the file between the check and the exec
runs something else than what was checked. The fence confines it either way.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import secrets
import select
import shutil
import socket
import stat
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import _usernotif
from ._listen import LazyServer, listening_socket
from ._loader import LOADERS, is_loader, loaded, shebang
from ._seccomp import load_library
from ._sockets import Connects, SocketPlaces, answer_connect

MAX_PATH = 4096
MAX_ARGS = 256  # argv words read; the rest is marked as cut (rules match leading words)
MAX_ARG = 8192  # bytes of one word; a longer word is cut there
_MAX_LINKS = 40
_O_PATH = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_HANDOVER_TIMEOUT = 10.0
EXEC_SYSCALLS = ("execve", "execveat")
_AT_EMPTY_PATH = 0x1000
_MAX_INTERPRETERS = 4  # scripts whose interpreter is a script: the kernel's BINPRM depth
_HEAD_BYTES = 256  # what the kernel reads of a file to find its #! line


@dataclass(frozen=True)
class Exec:
    """A program about to start: ``path`` as the caller gave it, the ``program`` file
    name reached after every link ('' when the path names no file), its ``identity``
    (device, inode), ``argv`` as read (``cut``: more words followed)."""

    pid: int
    path: str
    program: str
    identity: tuple[int, int] | None
    argv: tuple[str, ...]
    cut: bool = False
    size: int = -1  # of the file reached
    digest: Callable[[], bytes] = field(default=lambda: b"", compare=False, repr=False)


Decide = Callable[[Exec], int]  # 0: let it run; else the errno its exec fails with


class SupervisedCommand:
    """One command's supervision: ``token`` for its launcher, ``decide`` for its execs
    (None: not stopped), ``sockets`` for its UNIX connects (None: not stopped)."""

    def __init__(self, owner: _Server, decide: Decide | None,
                 sockets: SocketPlaces | None) -> None:
        self.token = secrets.token_hex(16)
        self.decide, self.sockets = decide, sockets
        self._owner = owner
        self.path = owner.path

    @property
    def connector(self) -> bool:
        """Its launcher starts the command's connector (``_connector``): it shares our
        network namespace, where some connects are only Landlock's to answer (abstract
        names under its scope) or may wait long (a blocking one to another host)."""
        return self.sockets is not None and self.sockets.shared_network

    @property
    def calls(self) -> str:
        """The system calls the launcher's filter stops, for ``--guard-calls``."""
        return ",".join([*(EXEC_SYSCALLS if self.decide else ()),
                         *(["connect"] if self.sockets else [])])

    def close(self) -> None:
        """No launcher may join it any more (one that did stays supervised to its end)."""
        self._owner.forget(self.token)


class Supervisor:
    """One per toolbox, started on first use; stopped when closed or collected."""

    def __init__(self) -> None:
        self._server = LazyServer(self, _Server)

    def session(self, decide: Decide | None = None, sockets: Sequence[str] | None = None,
                note: Callable[[str], None] = lambda _: None, *, tcp_fenced: bool = False,
                scoped: bool = False, shared_network: bool = True) -> SupervisedCommand:
        """A session stopping execs (``decide``) and UNIX connects outside ``sockets``
        (absolute places; ``note`` gets each refusal). ``tcp_fenced``, ``scoped``: the
        command's Landlock refuses TCP (ABI 4+) and scopes abstract names (ABI 6+);
        ``shared_network``: it is in our network namespace (not one of its own)."""
        server = self._server.get()
        places = (SocketPlaces(sockets, note, tcp_fenced=tcp_fenced, scoped=scoped,
                               shared_network=shared_network)
                  if sockets is not None else None)
        return server.open(SupervisedCommand(server, decide, places))

    def close(self) -> None:
        self._server.close()


class _Server:
    def __init__(self) -> None:
        lib = load_library()
        self.numbers = {int(lib.seccomp_syscall_resolve_name(n.encode())): n
                        for n in (*EXEC_SYSCALLS, "connect")}
        self.folder, self.path, self.sock = listening_socket("loki-guard-", "guard.sock")
        self.sessions: dict[bytes, SupervisedCommand] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, name="loki-guard", daemon=True).start()

    def open(self, session: SupervisedCommand) -> SupervisedCommand:
        with self.lock:
            self.sessions[session.token.encode()] = session
        return session

    def forget(self, token: str) -> None:
        with self.lock:
            self.sessions.pop(token.encode(), None)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # stopped
            threading.Thread(target=self._join, args=(conn,), daemon=True,
                             name="loki-guard-session").start()

    def _join(self, conn: socket.socket) -> None:
        """A launcher's token and listener: acknowledged, then served to the end."""
        fds: list[int] = []
        session = None
        try:
            conn.settimeout(_HANDOVER_TIMEOUT)
            token, fds, _, _ = socket.recv_fds(conn, 64, 2)
            with self.lock:  # one launcher per token: a job's is not kept after it joined
                session = self.sessions.pop(token, None)
            if not fds or session is None or len(fds) != 1 + session.connector:
                session = None
                return  # no ack: the launcher refuses to run the command
            _usernotif.acknowledge(conn)
        except OSError:
            session = None
            return
        finally:
            conn.close()
            if session is None:
                for fd in fds:
                    os.close(fd)
        connects = Connects(socket.socket(fileno=fds[1])) if len(fds) > 1 else None
        _usernotif.wake_synchronously(fds[0])
        try:
            _serve(fds[0], session, self.numbers, connects)
        finally:
            for owed in connects.close() if connects is not None else ():
                _usernotif.reply(fds[0], owed, error=errno.EPERM)
            os.close(fds[0])

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _serve(listener: int, session: SupervisedCommand, numbers: dict[int, str],
           connects: Connects | None) -> None:
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    if connects is not None:
        poller.register(connects.channel, select.POLLIN)
    while True:
        events = dict(poller.poll())
        if connects is not None and connects.channel.fileno() in events:
            _answer_connects(listener, connects, events[connects.channel.fileno()], poller)
        if listener not in events:
            continue
        if not events[listener] & select.POLLIN:
            return  # POLLHUP: no process is left under the filter
        try:
            notif = _usernotif.receive(listener)
        except OSError:
            return
        if notif is not None:
            _answer(listener, notif, session, numbers, connects)


def _answer_connects(listener: int, connects: Connects, event: int,
                     poller: select.poll) -> None:
    """Pass the connector's answers on; when it is gone, the connects it owes fail."""
    for notif_id, error in connects.answers():
        _usernotif.reply(listener, notif_id, error=error, done=not error)
    if event & (select.POLLHUP | select.POLLERR) and not event & select.POLLIN:
        poller.unregister(connects.channel)
        for owed in sorted(connects.pending):
            _usernotif.reply(listener, owed, error=errno.EPERM)
        connects.pending.clear()


def _answer(listener: int, notif: _usernotif.Notification, session: SupervisedCommand,
            numbers: dict[int, str], connects: Connects | None) -> None:
    error, done = errno.EPERM, False
    call = numbers.get(notif.nr)
    try:
        if call in EXEC_SYSCALLS and session.decide is not None:
            found = _read_exec(notif, call == "execveat")
            if isinstance(found, int):
                error = found
            elif _usernotif.still_waiting(listener, notif.id):  # what we read was its own
                error = next((e for e in map(session.decide, found) if e), 0)
        elif call == "connect" and session.sockets is not None:
            got = answer_connect(listener, notif, session.sockets, walk, connects)
            if got is None:
                return  # the connector makes it and answers (_answer_connects)
            error, done = got
            error = error if error or done else errno.EPERM  # never CONTINUE a connect
    except Exception:  # unreadable, or a bug here: fail the call, never let it through
        error, done = errno.EPERM, False
    _usernotif.reply(listener, notif.id, error=error, done=done)


def _read_exec(notif: _usernotif.Notification, at: bool) -> list[Exec] | int:
    """The program an exec would start, or the errno it fails with."""
    pid = notif.pid
    path_at, argv_at = (notif.args[1], notif.args[2]) if at else (notif.args[0], notif.args[1])
    memory = _usernotif.Memory(pid)
    try:
        raw = memory.string(path_at, MAX_PATH)
        if raw is None:
            return errno.ENAMETOOLONG
        pointers, cut = memory.pointers(argv_at, MAX_ARGS) if argv_at else ([], False)
        argv = []
        for address in pointers:
            word = memory.string(address, MAX_ARG)
            argv.append(os.fsdecode(word) if word is not None else "")
            cut = cut or word is None
    finally:
        memory.close()
    path = os.fsdecode(raw)
    if at and not path and notif.args[4] & _AT_EMPTY_PATH:
        start = f"/proc/{pid}/fd/{notif.args[0] & 0xFFFFFFFF}"
    else:
        dirfd = notif.args[0] & 0xFFFFFFFF if at else None
        start = (f"/proc/{pid}/cwd" if dirfd in (None, 0xFFFFFF9C)  # AT_FDCWD
                 else f"/proc/{pid}/fd/{dirfd}")
    return _programs(pid, path, start, tuple(argv), cut,
                     lambda: _read_env(pid, notif.args[3] if at else notif.args[2]))


def _programs(pid: int, path: str, start: str, argv: tuple[str, ...], cut: bool,
              env: Callable[[], list[str]]) -> list[Exec] | int:
    """Every program the exec starts in the process, outermost first: the file, then for
    a script the interpreter its ``#!`` line names (the kernel starts it without another
    exec, with ``interpreter [arg] script args...``), up to the kernel's depth; a dynamic
    loader (by name or content) is the program it loads. Else the errno it fails with."""
    found: list[Exec] = []
    for _ in range(_MAX_INTERPRETERS + 1):
        reached = _reach(pid, path, start)
        if isinstance(reached, int):
            return reached
        name, st, head = reached
        digest = _digest_of(pid, path, start)
        if is_loader(name) or (head.startswith(b"\x7fELF") and LOADERS.holds(st, digest)):
            got = loaded(argv, env(), f"/proc/{pid}/cwd", lambda p, s: _reach_file(pid, p, s))
            if got is not None:
                path, name, st_got, words = got
                identity = (st_got.st_dev, st_got.st_ino) if st_got is not None else None
                found.append(Exec(pid, path, name, identity, words, cut,
                                  st_got.st_size if st_got is not None else -1,
                                  _digest_of(pid, path, f"/proc/{pid}/cwd")))
                return found
        found.append(Exec(pid, path, name, (st.st_dev, st.st_ino), argv, cut, st.st_size,
                          digest))
        script = shebang(head)
        if script is None:
            return found
        interpreter, arg = script
        argv = (interpreter, *([arg] if arg is not None else []), path, *argv[1:])
        path, start = interpreter, f"/proc/{pid}/cwd"
    return errno.ELOOP  # deeper than the kernel goes: it fails the exec so


def _digest_of(pid: int, path: str, start: str) -> Callable[[], bytes]:
    """The SHA-256 of what ``path`` reaches, read once when first asked."""
    return functools.cache(lambda: _digest(pid, path, start))


def _digest(pid: int, path: str, start: str) -> bytes:
    """SHA-256 of the file ``path`` reaches for ``pid`` (b'' when it cannot be read)."""
    found = walk(pid, path, start)
    if isinstance(found, int):
        return b""
    parent, final, _ = found
    try:
        with open(f"/proc/self/fd/{final}", "rb") as fh:
            return hashlib.file_digest(fh, "sha256").digest()
    except OSError:
        return b""
    finally:
        os.close(parent)
        os.close(final)


def _read_env(pid: int, envp: int) -> list[str]:
    """The environment an exec passes (its first MAX_ARGS entries)."""
    memory = _usernotif.Memory(pid)
    try:
        pointers, _ = memory.pointers(envp, MAX_ARGS) if envp else ([], False)
        return [os.fsdecode(memory.string(a, MAX_ARG) or b"") for a in pointers]
    finally:
        memory.close()


def _reach(pid: int, path: str, start: str) -> tuple[str, os.stat_result, bytes] | int:
    """(file name reached, its stat, its first bytes when a regular file) following
    ``path`` as process ``pid`` sees it: from its root (absolute) or ``start``, one link
    at a time; else the errno."""
    found = walk(pid, path, start)
    if isinstance(found, int):
        return found
    parent, final, name = found
    try:
        st = os.fstat(final)
        return name, st, _head(final) if stat.S_ISREG(st.st_mode) else b""
    finally:
        os.close(parent)
        os.close(final)


def _reach_file(pid: int, path: str, start: str) -> tuple[str, os.stat_result] | int:
    found = _reach(pid, path, start)
    return found if isinstance(found, int) else found[:2]


def _head(final: int) -> bytes:
    """The first bytes of the file behind the O_PATH descriptor ``final`` (what the
    kernel reads to tell a script: BINPRM_BUF_SIZE); b'' when it cannot be read."""
    try:
        fd = os.open(f"/proc/self/fd/{final}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return b""
    try:
        return os.pread(fd, _HEAD_BYTES, 0)
    except OSError:
        return b""
    finally:
        os.close(fd)


def walk(pid: int, path: str, start: str) -> tuple[int, int, str] | int:
    """O_PATH descriptors of the folder holding what ``path`` reaches and of that file,
    and its name, walking as process ``pid`` sees the filesystem (from its root when
    absolute, else ``start``), one link at a time; else the errno. The caller closes both."""
    try:
        root = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return exc.errno or errno.EPERM
    here = parent = -1
    try:
        here = os.dup(root) if path.startswith("/") else os.open(start, os.O_PATH | os.O_CLOEXEC)
        name = os.path.basename(os.readlink(start)) if not path else ""
        parent = os.dup(here) if not path else os.open("..", _O_PATH, dir_fd=here)
        parts, links = deque(path.split("/")), 0
        while parts:
            part = parts.popleft()
            if part in ("", "."):
                continue
            step = os.open(part, _O_PATH, dir_fd=here)
            if stat.S_ISLNK(os.fstat(step).st_mode):
                target = os.readlink("", dir_fd=step)
                os.close(step)
                links += 1
                if links > _MAX_LINKS:
                    return errno.ELOOP
                if target.startswith("/"):
                    os.close(here)
                    here = os.dup(root)
                parts.extendleft(reversed(target.split("/")))
                continue
            os.close(parent)
            parent, here, name = here, step, part
        found = (parent, here, name)
        parent = here = -1  # the caller's now
        return found
    except OSError as exc:
        return exc.errno or errno.EPERM
    finally:
        for fd in (root, here, parent):
            if fd >= 0:
                os.close(fd)
