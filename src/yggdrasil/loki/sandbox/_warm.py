"""The warm launcher, its server half: one launcher process per toolbox that forks a
launcher for each command (stdlib only, loaded by ``_landlock.py --warm``).

A cold launcher is a Python start (``python -I -S``), ctypes and the sibling modules
loaded, then the fence: ~10 ms of every ~20 ms command was the start. The warm launcher
pays it once: started by the toolbox (``_warm_client``) with a UNIX SEQPACKET socket
as its stdin, it loads everything a launch needs and waits. For each command the toolbox
sends one byte with four descriptors (``SCM_RIGHTS``): the command's report socket, its
stdin, stdout and stderr. The server forks at once and goes back to waiting; the child:

1. (the server sends its pid with a pidfd of it over the report socket: the toolbox
   signals the launcher through it, never through a pid that may be reused)
2. reads the request there: the working folder, the launcher's arguments (exactly those
   of a cold launch, ``launcher_argv``), the environment;
3. takes the descriptors as 0, 1 and 2, starts a session of its own, enters the folder,
   takes the environment, and runs ``_landlock._launch``: the same code as a cold launch
   (namespaces, mounts, Landlock, the seccomp filters, the capability drop, the reaper),
   with the agent also allowed to stop it (SIGTERM, as a cold launcher's parent may).

The server reaps each child and writes its wait status on its report socket. When the
toolbox's end closes it takes no more commands; it exits once its launchers have ended,
or at once when the agent is gone (killed outright): each launcher then sees its parent
change and kills its command, as a cold launcher does when the agent dies.
"""

from __future__ import annotations

import _socket
import contextlib
import os
import select
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
else:
    import _signal as signal

_FDS = 4  # report socket, stdin, stdout, stderr
_INT = struct.Struct("i")
_LINGER_CHECK = 0.2  # seconds between looks at whether the agent is alive, once closed


def serve(control_fd: int, launch: Callable[[list[str], int], int]) -> int:
    """Serve launch requests on ``control_fd`` until the toolbox closes it (see the module
    docstring); ``launch(args, agent_pid)`` runs one launcher and returns its exit code."""
    import fcntl  # noqa: F401  (loaded once: a network namespace's loopback needs it)
    import gc

    gc.disable()  # few objects, no cycles: a collection would only touch (copy) the
    gc.freeze()  # pages every forked launcher shares with us
    agent = os.getppid()
    control = _socket.socket(fileno=control_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the agent's Ctrl-C is the agent's
    reports: dict[int, _socket.socket] = {}
    poller = select.poll()
    poller.register(control.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    accepting = True
    while accepting or reports:
        ready = poller.poll(None if accepting else _LINGER_CHECK * 1000)
        _drain(wake_r)
        _reap(reports)
        if accepting and any(fd == control.fileno() for fd, _ in ready):
            try:
                data, ancillary, _, _ = control.recvmsg(1, _socket.CMSG_SPACE(_FDS * 4))
            except InterruptedError:
                continue
            fds = _descriptors(ancillary)
            if not data:
                accepting = False
                poller.unregister(control.fileno())
                for fd in fds:
                    os.close(fd)
                continue
            if len(fds) != _FDS:
                for fd in fds:
                    os.close(fd)
                continue
            report = _socket.socket(fileno=fds[0])
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                code = 126
                try:
                    for other in reports.values():
                        other.close()
                    control.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    code = _child(report, fds[1:], launch, agent)
                finally:
                    sys.stderr.flush()
                    os._exit(code)
            for fd in fds[1:]:
                os.close(fd)
            reports[pid] = report
            _announce(report, pid)
        if not accepting and os.getppid() != agent:
            return 0  # the agent is gone: the launchers see us go and kill their commands
    return 0


def _announce(report: _socket.socket, pid: int) -> None:
    """Tell the toolbox the launcher's pid, with a pidfd of it (taken before we could
    have reaped it, so it names that process and no other)."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # (out of descriptors) it must not run unannounced: the toolbox then
        os.kill(pid, signal.SIGKILL)  # reads its status where the pid should be, and
        return  # starts the command cold
    try:
        report.sendmsg([_INT.pack(pid)],
                       [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _INT.pack(pidfd))])
    except OSError:
        pass  # the toolbox gave up on it; the launcher finds no request and ends
    finally:
        os.close(pidfd)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _reap(reports: dict[int, _socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        report = reports.pop(pid, None)
        if report is None:
            continue
        with contextlib.suppress(OSError):  # the toolbox stopped waiting
            report.sendall(_INT.pack(status))
        report.close()


def _descriptors(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += [n for (n,) in struct.iter_unpack("i", data[:usable])]
    return fds


def _read_exactly(sock: _socket.socket, size: int) -> bytes:
    got = b""
    while len(got) < size:
        chunk = sock.recv(size - len(got))
        if not chunk:
            raise EOFError("the toolbox closed the request")
        got += chunk
    return got


def _child(report: _socket.socket, stdio: list[int], launch: Callable[[list[str], int], int],
           agent: int) -> int:
    """One command's launcher, forked from the server (see the module docstring)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    (size,) = _INT.unpack(_read_exactly(report, _INT.size))
    fields = [os.fsdecode(f) for f in _read_exactly(report, size).split(b"\0")]
    report.close()
    cwd, count = fields[0], int(fields[1])
    args, env = fields[2 : 2 + count], fields[2 + count :]
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
        os.close(fd)
    os.setsid()
    try:
        os.chdir(cwd)
    except OSError as exc:
        print(f"loki sandbox: cannot enter {cwd}: {exc.strerror}", file=sys.stderr)
        return 126
    os.environ.clear()
    os.environ.update(dict(entry.split("=", 1) for entry in env if "=" in entry))
    return launch(args, agent)
