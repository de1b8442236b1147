"""A command's own namespaces: PID, mount, network; set up by the launcher, stdlib only.

The launcher (``_landlock.py``, run as a script) calls :func:`run_isolated`. It enters a
new user namespace (mapping only its own uid and gid, so it works for an ordinary user
and for root alike), with a new mount namespace, a new PID namespace and, for
``network=False``, a new network namespace holding only a loopback device. In the mount
namespace it applies the mount plan the agent passed (``--mount KIND:PATH``, in order):

- ``tmpfs:PATH``  an empty private tmpfs over PATH (nosuid, nodev), gone with the command:
  how /tmp, /dev/shm and /run/user/<uid> hide the user's sockets (ssh-agent, tmux,
  gpg-agent, D-Bus) and shared memory;
- ``bind:PATH``   PATH as it was before any mount of the plan, bound back at PATH
  (nosuid, nodev): the root, the scratch folder and writable folders stay reachable
  under a tmpfs, and cannot be renamed away (a mount point cannot move);
- ``bind-ro:PATH`` the same, read-only: ``.git/config`` and ``.git/hooks``, the
  interpreter when it lives under /tmp;
- ``mask:PATH``   PATH replaced by an empty read-only file or folder (a daemon's socket);
- ``protect:PATH`` PATH (a protected file or folder of the root: ``.env``, ``.aws/``)
  replaced by an empty file or folder of mode 000, read-only: the command (which has no
  capability to override permissions) gets EACCES reading or listing it, and since it is
  a mount point it cannot be renamed, removed or hard-linked away (EBUSY, EXDEV). The
  mask is mounted onto the file reached by a walk that follows no link (through
  ``/proc/self/fd``), so a folder a background job renamed or swapped for a link since
  the plan was made cannot send it elsewhere: a protected path that is gone, or that a
  link now leads to, stops the command before it runs (the next plan finds the file).

Sources are opened before the first mount, so a later mount never hides one; the mode-000
file that ``protect`` binds lives on a small tmpfs mounted first on the plan's first
``tmpfs`` path, which that tmpfs then covers (nothing in the command's view names it). Then it
forks the namespace's PID 1 (:func:`_init`), which mounts a /proc of its own, starts the
command and reaps orphans; when the command exits, PID 1 exits and the kernel kills every
process left in the namespace: nothing a command starts can outlive it, however it
forks, and nothing inside can leave the namespace. The launcher waits outside, and on
SIGTERM from the agent (a timeout, a stopped job) kills PID 1, which takes the whole
namespace with it; it does the same by itself when the agent is gone (killed outright).

With ``proxy`` (a command limited to some hosts), the launcher connects to the toolbox's
proxy over its UNIX control socket before anything else, makes the network namespace,
opens a TCP listener on 127.0.0.1 inside it and sends that listening socket to the proxy
(``SCM_RIGHTS``), which accepts the command's connections on it from outside: the only
way out. The command gets ``HTTP_PROXY``/``HTTPS_PROXY`` (both cases) and ``ALL_PROXY``
pointing at it, ``NO_PROXY`` for loopback. What the proxy refuses goes to the notes file
the toolbox named (its path travels with the listener): one whole line each, never
inside a line the command writes; without one, it comes back over the control socket
and a helper forked by PID 1 writes it to the command's stderr.

Mounts happen before the command fences itself: Landlock forbids mounting afterwards,
and the command gives up every capability (in this user namespace too) before it execs,
so it cannot unmount or remount what hides the host (the kernel also locks these mounts
against a nested namespace).
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct

TYPE_CHECKING = False  # typing and enum (which `signal` pulls in) cost ~10 ms per command
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable, Sequence
else:
    import _signal as signal

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
# statvfs f_flag bits -> the mount flags a remount must keep (the kernel locks them on
# mounts inherited from a more privileged namespace; dropping one is EPERM).
_LOCKED = ((1, MS_RDONLY), (2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC),
           (1024, MS_NOATIME), (2048, MS_NODIRATIME), (4096, MS_RELATIME))
MOUNT_KINDS = ("tmpfs", "bind", "bind-ro", "mask", "protect")
_PR_SET_PDEATHSIG = 1
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_WAITED = {signal.SIGCHLD, signal.SIGTERM}


class SetupError(OSError):
    """The namespaces could not be made as asked; the command must not run."""


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    """The C library, loaded once (each CDLL costs ~50 us; a launch mounts a dozen times)."""
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(err, f"{what}: {os.strerror(err)}")


def parse_mount(spec: str) -> tuple[str, str]:
    """``KIND:PATH`` -> (kind, absolute path); ValueError names the allowed kinds."""
    kind, _, path = spec.partition(":")
    if kind not in MOUNT_KINDS or not path.startswith("/"):
        raise ValueError(f"bad --mount {spec!r}: want KIND:/absolute/path, KIND one of "
                         f"{', '.join(MOUNT_KINDS)}")
    return kind, os.path.normpath(path)


# -- the namespaces ---------------------------------------------------------------------


def enter(*, network: bool) -> None:
    """Unshare user, mount, PID (for our next child) and maybe network namespaces, map
    our own ids, and make every mount private so nothing we mount reaches the host."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | (0 if network else CLONE_NEWNET)
    libc = _libc()
    _check(libc.unshare(flags), "unshare")
    # Only our own ids: allowed to an ordinary user, and all a command needs (a root
    # agent's command stays uid 0 and owns what root owns).
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        try:
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
        except OSError as exc:
            raise SetupError(exc.errno or 1, f"writing /proc/self/{name}: {exc.strerror}") from exc
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")
    if not network:
        _loopback_up()


def _loopback_up() -> None:
    """A new network namespace has only ``lo``, and it is down: bring it up (loopback only)."""
    import _socket  # the C module: `socket` would pull in enum and selectors
    import fcntl

    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        req = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack_from("H", fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, req), 16)[0]
        fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))
    finally:
        sock.close()


# -- the mount plan ---------------------------------------------------------------------


def apply_mounts(plan: Sequence[tuple[str, str]]) -> None:
    """Apply ``(kind, path)`` mounts in order (see the module docstring)."""
    sources = {}
    for kind, path in plan:  # open every source before anything hides it
        if kind.startswith("bind") and path not in sources:
            try:
                sources[path] = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
            except FileNotFoundError:
                pass
    blank = _blank_file(plan) if any(kind == "protect" for kind, _ in plan) else None
    try:
        for kind, path in plan:
            if kind == "tmpfs":
                _tmpfs(path)
            elif kind == "mask":
                _mask(path)
            elif kind == "protect":
                _protect(path, blank)
            elif path in sources:
                _bind(sources[path], path, read_only=kind == "bind-ro")
    finally:
        for fd in [*sources.values(), *([blank] if blank is not None else [])]:
            os.close(fd)


def _mount(source: bytes | None, target: str, fstype: bytes | None, flags: int,
           data: bytes | None = None) -> None:
    _check(_libc().mount(source, os.fsencode(target), fstype, flags, data),
           f"mount {target}")


def _tmpfs(path: str) -> None:
    if not os.path.isdir(path) or os.path.islink(path):
        return  # nothing there to hide (no /run/user/0 for root, say)
    _mount(b"tmpfs", path, b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777")


def _bind(fd: int, path: str, *, read_only: bool) -> None:
    st = os.fstat(fd)
    if stat.S_ISLNK(st.st_mode):
        return  # a link is followed by its own rules; binding it would bind its target
    _mount_point(path, folder=stat.S_ISDIR(st.st_mode))
    _mount(f"/proc/self/fd/{fd}".encode(), path, None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (MS_RDONLY if read_only else 0)
    _mount(None, path, None, flags | _locked_flags(path))


def _mask(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        _mount(b"tmpfs", path, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
               b"size=4k,mode=0555")
    elif not stat.S_ISLNK(st.st_mode):
        _mount(b"/dev/null", path, None, MS_BIND)
        _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
               | MS_NOEXEC | _locked_flags(path))


def _blank_file(plan: Sequence[tuple[str, str]]) -> int:
    """An O_PATH fd of an empty mode-000 file on a tmpfs of its own, mounted on the first
    tmpfs path of the plan, which the plan then covers with the command's own tmpfs."""
    under = next((path for kind, path in plan if kind == "tmpfs" and os.path.isdir(path)
                  and not os.path.islink(path)), None)
    if under is None:
        raise SetupError(2, "no tmpfs in the mount plan to hold the protected-file mask")
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _mount(b"tmpfs", under, b"tmpfs", flags, b"size=4k,mode=0700")
    path = os.path.join(under, "protected")
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0))
    os.chmod(path, 0)
    # Read-only from now on: every bind of the file is too (no chmod back to readable).
    _mount(None, under, None, MS_REMOUNT | MS_RDONLY | flags)
    return os.open(path, os.O_PATH | os.O_CLOEXEC)


def _protect(path: str, blank: int | None) -> None:
    """``path`` covered by an unreadable, read-only, empty file or folder (mode 000),
    mounted onto the very file a no-link walk reaches (see the module docstring)."""
    fd = _reach(path)
    if fd is None:
        return  # a link named like a secret is judged by where it leads
    try:
        target = f"/proc/self/fd/{fd}"
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            _mount(b"tmpfs", target, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
                   b"size=4k,mode=000")
            return
        assert blank is not None
        _mount(f"/proc/self/fd/{blank}".encode(), target, None, MS_BIND)  # read-only: its fs is
    finally:
        os.close(fd)


def _reach(path: str) -> int | None:
    """An O_PATH descriptor of ``path`` reached from / without following a link; None when
    its last part is a link. SetupError when it is gone or a folder on the way is a link:
    it moved since the plan was made, and the command must not start with it unmasked."""
    parts = [p for p in path.split("/") if p]
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            try:
                step = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                raise SetupError(2, f"the protected {path} moved while the command was "
                                    "starting; run it again") from None
            os.close(fd)
            fd = step
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                if i == len(parts) - 1:
                    os.close(fd)
                    return None
                raise SetupError(40, f"a link now leads to the protected {path} (a folder "
                                     "above it was swapped while the command was starting); "
                                     "run it again")
        return fd
    except BaseException:
        try:
            os.close(fd)
        except OSError:
            pass
        raise


def _mount_point(path: str, *, folder: bool) -> None:
    """Make ``path`` exist (inside a fresh tmpfs it does not) as a folder or a file."""
    if os.path.lexists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if folder:
        os.mkdir(path)
    else:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))


def _locked_flags(path: str) -> int:
    found = os.statvfs(path).f_flag
    return sum(ms for st_flag, ms in _LOCKED if found & st_flag)


# -- the proxy: the only way out of a network namespace ----------------------------------

_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
               "all_proxy")
_LOOPBACK = "localhost,127.0.0.1,::1"


def _connect(path: str) -> object:
    import _socket  # the C module: `socket` would pull in enum and selectors

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        sock.close()
        raise SetupError(exc.errno or 1, f"cannot reach the toolbox's proxy at {path}: "
                         f"{exc.strerror}") from exc
    return sock


def _hand_over(control: object, notes: str | None = None) -> None:
    """A listener on 127.0.0.1 of this (new) network namespace, sent to the proxy with
    the path of the command's notes file; the command is told to use it."""
    import _socket

    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        port = listener.getsockname()[1]
        rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack("i", listener.fileno()))]
        message = b"L" + (os.fsencode(notes) if notes else b"")
        control.sendmsg([message], rights)  # type: ignore[attr-defined]
    except OSError as exc:
        raise SetupError(exc.errno or 1, f"cannot hand a listener to the proxy: {exc}") from exc
    finally:
        listener.close()
    for name in _PROXY_VARS:
        os.environ[name] = f"http://127.0.0.1:{port}"
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = _LOOPBACK


def _echo(control: object) -> None:
    """The proxy's refusals, onto the command's stderr (fd 2, inherited)."""
    while True:
        try:
            data = control.recv(4096)  # type: ignore[attr-defined]
        except OSError:
            return
        if not data:
            return
        try:
            os.write(2, data)
        except OSError:
            pass


# -- PID 1 and the launcher's wait ------------------------------------------------------


def run_isolated(plan: Sequence[tuple[str, str]], *, network: bool,
                 start: Callable[[], int], drop_stdin: Callable[[], None],
                 orphan_check: float, proxy: str | None = None,
                 notes: str | None = None, stopper: int = 0) -> int | None:
    """Enter the namespaces, mount ``plan``, run ``start`` (which execs the command) under
    a PID 1 of its own; return the command's wait status (None: stopped by the agent).
    ``drop_stdin`` and ``orphan_check`` are the reaper's (``_reaper.drop_stdin``: only
    the command reads its stdin; seconds between looks at whether the agent is alive).
    ``proxy``: the control socket of the proxy that is the command's only way out;
    ``notes``: the file its refusals go to (else the command's stderr); ``stopper``: a
    process besides our parent whose SIGTERM stops the command (the agent, under the warm
    launcher). Raises SetupError (nothing has run) when a namespace or a mount cannot be made."""
    starter = os.getppid()
    control = _connect(proxy) if proxy else None  # its path is hidden once /tmp is private
    enter(network=network and control is None)
    if control is not None:
        _hand_over(control, notes)
    apply_mounts(plan)
    # The working folder still points into the host's tree (it was entered before the
    # mounts): `..` from there would walk the host's /tmp. Enter it again through ours.
    os.chdir(os.getcwd())
    readable, writable = os.pipe()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
    init = os.fork()
    if init == 0:
        os.close(readable)
        _init(writable, old_mask, start, drop_stdin, control)
    os.close(writable)
    drop_stdin()
    try:
        return _wait_for_init(init, starter, readable, orphan_check, stopper)
    finally:
        os.close(readable)


def _init(report: int, old_mask: set[int | signal.Signals], start: Callable[[], int],
          drop_stdin: Callable[[], None], control: object = None) -> None:
    """PID 1: mount /proc, fork the command, reap everyone, report the command's status.
    Its exit ends the namespace: the kernel kills whatever is left. With a proxy it also
    forks the helper that echoes the proxy's refusals (no thread can start here: a
    process that unshared its PID namespace cannot make threads)."""
    code = 127
    try:
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the launcher died: end
        try:  # a host /proc the kernel will not re-mount
            _mount(b"proc", "/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except SetupError:
            pass
        child = os.fork()
        if child == 0:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; exec keeps it
                signal.signal(sig, signal.SIG_DFL)
            os.close(report)
            os._exit(start())
        drop_stdin()
        if control is not None and os.fork() == 0:
            os.close(report)
            _echo(control)
            os._exit(0)
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == child:
                os.write(report, struct.pack("i", status))
                code = 0
                break
    finally:
        os._exit(code)


def _wait_for_init(init: int, starter: int, report: int, orphan_check: float,
                   stopper: int = 0) -> int | None:
    stopped = False
    while True:
        info = signal.sigtimedwait(_WAITED, orphan_check)
        if info is None:
            if os.getppid() != starter and not stopped:  # the agent is gone: end it all
                stopped = True
                try:
                    os.kill(init, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            continue
        if info.si_signo == signal.SIGTERM:
            if info.si_pid in (starter, stopper or starter):  # the agent: out of time
                stopped = True
                try:
                    os.kill(init, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            continue
        pid, status = os.waitpid(init, os.WNOHANG)
        if pid == init:
            break
    got = os.read(report, 4)
    if stopped or len(got) != 4:
        return None if stopped else status
    return int(struct.unpack("i", got)[0])
