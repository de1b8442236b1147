"""Landlock, through ctypes, and the launcher that applies it in a command's own process.

The parent never restricts itself. It starts::

    python -I -S .../_landlock.py --abi N [--no-network] [--write PATH]... [--hide PATH]... -- argv...

and this file, run as a script, sets ``no_new_privs``, restricts itself with a Landlock
ruleset (write only below the given folders, read and execute everything but the hidden
paths, optionally no TCP connect/bind), gives up every capability (a root agent's
commands stay uid 0 but lose root's powers) and then ``execvp``s ``argv``: the command and
everything it starts inherit the fence. It does that in a forked child: the launcher
itself stays outside the fence as the command's reaper (``_reaper.py``) and kills whatever
the command leaves behind. ``--abi 0`` only reaps (no fence, no capability drop). It
imports only light standard modules (it runs before every command) and is run by path
with ``-I``, so that a ``yggdrasil`` package inside the agent root (on PYTHONPATH for
run_python) can never stand in for it.

``python -m yggdrasil.loki.sandbox`` prints what this machine supports.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from importlib.machinery import SourceFileLoader
from types import ModuleType

TYPE_CHECKING = False  # typing costs ~8 ms at every command's start
if TYPE_CHECKING:
    from collections.abc import Sequence

# Syscall numbers: every architecture shares the generic table for calls added after 424.
_SYSCALLS = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}
_ARCHES = {"x86_64", "amd64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x", "i686", "armv7l"}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAP_VERSION_3 = 0x20080522
_EINVAL = 22

# Filesystem access rights, by the ABI that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
_FS_LATEST = (1 << 16) - 1  # ABI 5 and later
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # valid on a non-folder
_READ = EXECUTE | READ_FILE | READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

# The only devices a command may open (read, write, ioctl): discarding output, random
# numbers, POSIX shared memory (multiprocessing's semaphores live in /dev/shm). The rest of
# /dev is not even readable: the user's terminals (/dev/tty, /dev/pts/N, where a command
# could inject keystrokes or escape sequences), /dev/ptmx (a new pty is only usable through
# /dev/pts, which would expose the user's ones too), raw disks, consoles, kmsg. Commands
# run without a controlling terminal anyway; /dev/fd and /dev/std* lead into /proc.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/shm")
_DEV = "/dev"


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64))


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32))


class SandboxStatus:
    """What this machine offers: the Landlock ABI (0 when absent) and, if absent, why."""

    __slots__ = ("abi", "reason")

    def __init__(self, abi: int, reason: str = "") -> None:
        self.abi = abi
        self.reason = reason

    def __repr__(self) -> str:
        return f"SandboxStatus(abi={self.abi}, reason={self.reason!r})"

    @property
    def available(self) -> bool:
        return self.abi > 0

    @property
    def network_control(self) -> bool:
        return self.abi >= 4

    def __str__(self) -> str:
        if not self.available:
            return f"Landlock unavailable: {self.reason}"
        net = "can block TCP" if self.network_control else "cannot block network (ABI < 4)"
        return f"Landlock ABI {self.abi} available ({net})"


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    """The C library, loaded once (a CDLL and its function lookups cost ~50 us each: a
    launch makes dozens of calls)."""
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def _syscall(name: str, *args: object) -> int:
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(ctypes.c_long(_SYSCALLS[name]), *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock_{name}: {os.strerror(err)}")
    return result


_cached: SandboxStatus | None = None


def landlock_status() -> SandboxStatus:
    """Ask the kernel for its Landlock ABI (once per process); never raises."""
    global _cached
    if _cached is None:
        _cached = _probe()
    return _cached


def _probe() -> SandboxStatus:
    if sys.platform != "linux":
        return SandboxStatus(0, f"Landlock is a Linux feature; this is {sys.platform}")
    machine = os.uname().machine.lower()
    if machine not in _ARCHES:
        return SandboxStatus(0, f"no known Landlock syscall numbers for {machine}")
    try:
        abi = _syscall("create_ruleset", None, ctypes.c_size_t(0),
                       ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError as exc:
        return SandboxStatus(0, _why(exc.errno or 0))
    except (AttributeError, TypeError) as exc:  # no syscall() in this libc
        return SandboxStatus(0, f"cannot make syscalls through ctypes: {exc}")
    return SandboxStatus(abi)


def _why(err: int) -> str:
    if err == 38:  # ENOSYS
        return f"the kernel ({os.uname().release}) does not implement Landlock (needs Linux 5.13+)"
    if err == 95:  # EOPNOTSUPP
        return "Landlock is built into the kernel but disabled at boot (add it to lsm=)"
    return f"the Landlock probe failed: {os.strerror(err)}"


# -- the ruleset ------------------------------------------------------------------------


def handled_fs(abi: int) -> int:
    return _FS_BY_ABI.get(abi, _FS_LATEST)


def _add_path(ruleset: int, path: str, rights: int, *, strict: bool = True) -> None:
    """Allow ``rights`` below ``path``. Read rules (not strict) never follow a symlink: a
    link beside a hidden path (pytest-current -> the test folder) would grant its target."""
    flags = os.O_PATH | os.O_CLOEXEC | (0 if strict else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return  # an optional device this machine lacks, or a dangling link
    except OSError:
        if strict:
            raise
        return  # a read rule we cannot place only leaves that path unreadable
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISLNK(mode):
            return  # what it points to is readable or not by its own rules
        if not stat.S_ISDIR(mode):
            rights &= _FILE_RIGHTS
        attr = _PathBeneathAttr(rights, fd)
        _syscall("add_rule", ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                 ctypes.byref(attr), ctypes.c_uint32(0))
    finally:
        os.close(fd)


def readable_roots(hidden: list[str]) -> list[str]:
    """Folders and files to grant read on so that everything but ``hidden`` is readable.

    Landlock only allows, never denies: to hide /home/u/.ssh, "/" is replaced by each of
    its entries but "home", "/home" by each of its entries but "u", and so on down.
    (Listing folders is granted everywhere apart from this, so names stay visible.)
    """
    allowed = {"/"}
    for secret in sorted(hidden, key=len):  # a hidden folder before anything inside it
        above = next((a for a in allowed if secret == a or secret.startswith(a.rstrip("/") + "/")),
                     None)
        if above is None:
            continue  # inside a folder hidden already
        allowed.discard(above)
        below = secret[len(above):].strip("/")
        here = above
        for part in below.split("/") if below else []:
            try:
                names = os.listdir(here)
            except OSError:
                names = []
            allowed.update(os.path.join(here, n) for n in names if n != part)
            here = os.path.join(here, part)
    return sorted(allowed)


def restrict_self(writable: list[str], *, network: bool, abi: int,
                  hidden: list[str] | tuple[str, ...] = ()) -> None:
    """Fence this process (and what it execs): write below ``writable`` only, read the
    rest but ``hidden``."""
    fs = handled_fs(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if (not network and abi >= 4) else 0
    scoped = 0
    if abi >= 6:  # no signals to processes outside the fence (the agent, the user's shell),
        scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX  # nor abstract UNIX sockets made outside
    attr = _RulesetAttr(fs, net, scoped)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _syscall("create_ruleset", ctypes.byref(attr), ctypes.c_size_t(size),
                       ctypes.c_uint32(0))
    # Device nodes are never allowed: a root-owned command could otherwise mknod the disk
    # inside the root and write through it.
    write = fs & ~(MAKE_CHAR | MAKE_BLOCK)
    try:
        _add_path(ruleset, "/", READ_DIR)  # listing stays possible everywhere: names only
        for path in readable_roots([*hidden, _DEV]):
            _add_path(ruleset, path, _READ & fs, strict=False)
        for path in (*writable, *DEVICES):
            _add_path(ruleset, path, write)
        if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        _syscall("restrict_self", ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def restrict_reads(readable: Sequence[str], *, abi: int,
                   executable: Sequence[str] = ()) -> None:
    """Fence this process (and what it execs) to reading ``readable`` and running files
    below ``executable``: no write, create or delete anywhere, no TCP connect/bind (ABI 4+),
    no signals or abstract UNIX sockets out of the fence (ABI 6+). For parsers of untrusted
    input (the table worker, ripgrep): even a parser taken over cannot leave these paths."""
    fs = handled_fs(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX if abi >= 6 else 0
    attr = _RulesetAttr(fs, net, scoped)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _syscall("create_ruleset", ctypes.byref(attr), ctypes.c_size_t(size),
                       ctypes.c_uint32(0))
    try:
        for path in readable:
            _add_path(ruleset, os.path.realpath(path), (READ_FILE | READ_DIR) & fs, strict=False)
        for path in executable:
            _add_path(ruleset, os.path.realpath(path), _READ & fs, strict=False)
        if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        _syscall("restrict_self", ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def drop_capabilities() -> None:
    """Leave this process (and what it execs) with no capability at all, keeping its uid.

    Landlock scopes ptrace and /proc/<pid>/environ, but CAP_SYS_PTRACE and the DAC
    overrides of a root agent would carry a command past those checks. A root command
    stays uid 0 (so it still owns root's files) but without capabilities; the bounding
    set goes too, so exec'ing as uid 0 cannot grant them back.
    """
    libc = _libc()
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    if not any(d.permitted or d.effective or d.inheritable for d in data) and os.geteuid():
        return  # an ordinary user: nothing to give up
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before 4.3: none
    cap = 0
    while libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if ctypes.get_errno() != _EINVAL:  # EINVAL: past the last capability this kernel knows
        raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap}) failed")
    if libc.capset(ctypes.byref(header), (_CapData * 2)()) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


# -- the launcher -----------------------------------------------------------------------


def launcher_argv(python: str, writable: list[str], *, network: bool, abi: int,
                  argv: list[str], hidden: list[str] | tuple[str, ...] = (),
                  namespaces: bool = False, mounts: Sequence[tuple[str, str]] = (),
                  no_setid: bool = False, proxy: str | None = None,
                  proxy_notes: str | None = None,
                  guard: tuple[str, str, str] | None = None,
                  connector: bool = False) -> list[str]:
    """The argv that runs ``argv`` under the fence (see the module docstring).

    ``namespaces``: run it in namespaces of its own (``_namespace``), applying ``mounts``
    (``(kind, path)`` pairs) there; ``no_setid``: the seccomp filter of ``_seccomp``;
    ``proxy`` (with namespaces): the control socket of the proxy that is then the
    command's only way out (a network namespace of its own, loopback TCP allowed);
    ``proxy_notes``: a file the proxy's refusals are appended to, one line each (else
    they go to the command's stderr, where they may split a line the command writes);
    ``guard``: (socket path, token, comma-separated syscalls) of the toolbox's supervisor,
    which then decides those calls of the command (``_supervisor``: exec, connect);
    ``connector``: start the command's connector for it (``_connector``).
    """
    rules = ["--abi", str(abi), *([] if network else ["--no-network"])]
    if proxy:
        rules += ["--proxy", proxy]
        rules += ["--proxy-notes", proxy_notes] if proxy_notes else []
    if guard:
        rules += ["--guard", guard[0], "--guard-token", guard[1], "--guard-calls", guard[2]]
        rules += ["--connector"] if connector else []
    rules += [*(["--ns"] if namespaces else []), *(["--no-setid"] if no_setid else [])]
    for flag, paths in (("--write", writable), ("--hide", hidden)):
        for path in paths:
            rules += [flag, path]
    for kind, path in mounts:
        rules += ["--mount", f"{kind}:{path}"]
    return [python, "-I", "-S", os.path.abspath(__file__), *rules, "--", *argv]


_USAGE = ("usage: _landlock.py --abi N [--no-network] [--ns] [--no-setid] [--write PATH]... "
          "[--hide PATH]... [--mount KIND:PATH]... [--proxy SOCKET [--proxy-notes FILE]] "
          "[--guard SOCKET --guard-token T --guard-calls execve,execveat,connect [--connector]] "
          "-- argv...  |  --status  "
          "|  --probe  |  --warm")
_SWITCHES = ("--no-network", "--ns", "--no-setid", "--connector")
_GUARDED = ("execve", "execveat", "connect")


def _parse(args: list[str]) -> tuple[dict[str, list[str]], set[str], list[str]]:
    """(--abi/--write/--hide/--mount values, switches given, argv)."""
    values: dict[str, list[str]] = {"--abi": [], "--write": [], "--hide": [], "--mount": [],
                                     "--proxy": [], "--proxy-notes": [], "--guard": [],
                                     "--guard-token": [], "--guard-calls": []}
    switches: set[str] = set()
    i = 0
    while i < len(args) and args[i] != "--":
        flag = args[i]
        if flag in _SWITCHES:
            switches.add(flag)
            i += 1
        elif flag in values and i + 1 < len(args):
            values[flag].append(args[i + 1])
            i += 2
        else:
            raise ValueError(f"unexpected argument {flag!r}")
    argv = args[i + 1 :]
    if len(values["--abi"]) != 1 or not values["--abi"][0].isdigit() or not argv:
        raise ValueError("need --abi N and a command after --")
    if values["--proxy"] and "--ns" not in switches:
        raise ValueError("--proxy needs --ns: only a network namespace makes it the only way out")
    if not len(values["--guard"]) == len(values["--guard-token"]) == len(values["--guard-calls"]):
        raise ValueError("--guard needs --guard-token and --guard-calls")
    if any(c not in _GUARDED for v in values["--guard-calls"] for c in v.split(",")):
        raise ValueError(f"--guard-calls takes some of {', '.join(_GUARDED)}")
    return values, switches, argv


def _connect_guard(path: str) -> object:
    """Connected to the toolbox's supervisor (before any mount hides its folder)."""
    import _socket  # the C module: `socket` would pull in enum and selectors

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(30)
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def _launch(args: list[str], stopper: int = 0) -> int:
    """Run one command under the fence ``args`` ask for; its exit code. ``stopper``: a
    process besides our parent whose SIGTERM stops the command (the agent, when the warm
    launcher, ``_warm``, forked us)."""
    try:
        values, switches, argv = _parse(args)
        plan = [_sibling("_namespace").parse_mount(m) for m in values["--mount"]]
    except ValueError as exc:
        print(f"loki sandbox: {exc}\n{_USAGE}", file=sys.stderr)
        return 2
    abi, network = int(values["--abi"][0]), "--no-network" not in switches
    isolated, no_setid = "--ns" in switches, "--no-setid" in switches
    guard = values["--guard"][-1] if values["--guard"] else None
    if no_setid or guard:  # loaded now: a mount may hide this folder (a checkout in /tmp)
        _sibling("_seccomp")
        _sibling("_usernotif")
        _sibling("_connector")
    control = None
    if guard:
        try:
            control = _connect_guard(guard)
        except OSError as exc:
            print(f"loki sandbox: refusing to run unchecked: cannot reach the toolbox's "
                  f"command rules at {guard}: {exc.strerror or exc}", file=sys.stderr)
            return 126

    def start() -> int:
        try:  # --abi 0 without --ns: no fence, only the reaper
            if abi:
                restrict_self(values["--write"], network=network, abi=abi,
                              hidden=values["--hide"])
            if no_setid:
                _sibling("_seccomp").forbid_setid_bits()
            if abi or isolated:  # after the rules: opening their paths may need root's rights
                drop_capabilities()
            if control is not None:  # last: every exec from here on is the supervisor's
                calls = tuple(values["--guard-calls"][-1].split(","))
                connector = (_sibling("_connector").start() if "--connector" in switches
                             else None)
                _sibling("_usernotif").hand_over(
                    control, values["--guard-token"][-1].encode(), calls,
                    _sibling("_seccomp").load_library(), connector)
                control.close()  # type: ignore[attr-defined]
                if connector is not None:
                    connector.close()
        except OSError as exc:
            print(f"loki sandbox: refusing to run unfenced: {exc}", file=sys.stderr)
            return 126
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            print(f"loki sandbox: cannot start {argv[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127

    reaper = _sibling("_reaper")
    if not isolated:
        return int(reaper.run_reaped(start, stopper))
    proxy = values["--proxy"][-1] if values["--proxy"] else None
    notes = values["--proxy-notes"][-1] if values["--proxy-notes"] else None
    try:
        status = _sibling("_namespace").run_isolated(
            plan, network=network, start=start, drop_stdin=reaper.drop_stdin,
            orphan_check=reaper.ORPHAN_CHECK, proxy=proxy, notes=notes, stopper=stopper)
    except OSError as exc:
        print(f"loki sandbox: refusing to run: cannot isolate the command: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 126
    return int(reaper.pass_on(status))


_loaded: dict[str, ModuleType] = {}


def _sibling(name: str) -> ModuleType:
    """A module of this folder, loaded by path: under ``-I`` this folder is not on sys.path."""
    if name not in _loaded:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        loader = SourceFileLoader(f"_loki_{name}", path)  # importlib.util costs ~8 ms more
        module = ModuleType(loader.name)
        module.__file__ = path
        loader.exec_module(module)
        _loaded[name] = module
    return _loaded[name]


def main(args: list[str]) -> int:
    if args[:1] == ["--status"]:
        print(landlock_status())
        return 0
    if args[:1] == ["--warm"]:  # the warm launcher: stdin is the toolbox's socket
        import contextlib  # loaded once, not at every cold start

        for name in ("_namespace", "_seccomp", "_usernotif", "_connector", "_reaper"):
            _sibling(name)
        with contextlib.suppress(OSError):  # a launch that needs it says so
            _sibling("_seccomp").load_library()
        return int(_sibling("_warm").serve(0, _launch))
    if args[:1] == ["--probe-notify"]:  # can this process's commands get a listener?
        why = _sibling("_usernotif").try_listening(_sibling("_seccomp").load_library())
        print(why, file=sys.stderr)
        return 1 if why else 0
    return _launch(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
