"""run and run_python: a command in the root, fenced, with a clean environment, and what it changed.

Each call gets a private scratch folder (its TMPDIR, removed afterwards), the caller's
environment without secrets, and, where Landlock is available, a fence applied in its
own process by the ``sandbox`` launcher. A ChangeTracker (``_watch``) finds what the
command created, modified or deleted in the root; the observation says it and the run's
journal records it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from annotated_types import Interval

from ..errors import PathError, ToolError
from ..files import Journal, Root
from ..netproxy import AddressPolicy, AllowedHosts, NetProxy, ProxyRules
from ..outputs import Outputs
from ..results import GIT_RULE, CommandResult, JobStarted
from ..sandbox import (
    Completed,
    SupervisedCommand,
    WarmLauncher,
    isolation_status,
    landlock_status,
    launcher_argv,
    run_process,
    scrubbed,
)
from ._bytecode import seed
from ._changes import file_changes
from ._cmdline import reads_commands
from ._fence import Fence, mount_plan, needed_paths, private_tmpfs
from ._guard import Note, Refusals, Supervision
from ._job import JobLimits
from ._jobs import Jobs
from ._notes import ProxyNotes
from ._protected import MaskedPaths, ProtectedPaths, walk_protected
from ._results import command_result, stream_of
from ._rules import CommandRules
from ._tracker import ChangeTracker

SandboxMode = Literal["auto", "require", "off"]
SANDBOX_MODES = ("auto", "require", "off")
# Credential stores a fenced command cannot read (unless ``hidden`` says otherwise).
DEFAULT_HIDDEN = ("~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.kube",
                  "~/.docker", "~/.config/gh", "~/.netrc", "~/.git-credentials", "~/.pypirc",
                  "~/.bash_history", "~/.zsh_history", "~/.python_history", "~/.bashrc",
                  "~/.npmrc", "~/.yarnrc", "~/.pgpass", "~/.my.cnf", "~/.config/git/credentials",
                  "~/.cache/huggingface/token", "~/.huggingface/token", "~/.cargo/credentials",
                  "~/.cargo/credentials.toml", "~/.config/containers/auth.json",
                  "~/.vault-token", "~/.terraform.d/credentials.tfrc.json",
                  "~/.config/rclone/rclone.conf", "~/.local/share/keyrings",
                  "~/.password-store", "~/.config/loki")  # loki's own settings and trust
SANDBOX_VAR = "LOKI_SANDBOX"  # tells the command (and a user checking) what fences it
_DENIED = "ermission denied"  # EACCES as shells, Python and libc word it
Denial = Literal["protected", "fence", "fence-offline"]
# Seconds a command may run; the toolbox checks the limit before the call (bind_args).
Timeout = Annotated[float, Interval(gt=0, le=3600)]
PYCACHE_VAR = "PYTHONPYCACHEPREFIX"  # bytecode of commands goes to a cache outside the root


def writable_paths(paths: Sequence[str | os.PathLike[str]], what: str = "writable path",
                   ) -> list[Path]:
    """Extra folders commands may write (or ``what`` else), resolved; each must exist
    (Landlock and the socket check need an inode)."""
    resolved = []
    for p in paths:
        real = Path(os.path.realpath(os.path.expanduser(os.fspath(p))))
        if not real.exists():
            raise PathError(f"{what} {os.fspath(p)!r} does not exist; create it first")
        resolved.append(real)
    return resolved


class CommandFence(Protocol):
    """What :meth:`Shell.fenced` reads of a fence (``settings.FenceSettings`` is one)."""

    @property
    def sandbox(self) -> SandboxMode: ...
    @property
    def network(self) -> bool | Sequence[str]: ...
    @property
    def allow_private_hosts(self) -> bool: ...
    @property
    def hosts(self) -> Mapping[str, str]: ...
    @property
    def writable(self) -> Sequence[str]: ...
    @property
    def unix_sockets(self) -> Sequence[str]: ...
    @property
    def hidden(self) -> Sequence[str]: ...
    @property
    def env(self) -> Mapping[str, str]: ...


@dataclass
class Shell:
    """run and run_python, in the root. Which of git's files commands may change is the
    root's to say (``Root.locks_git``), as for the file tools."""

    root: Root
    journal: Journal | None = None
    sandbox: SandboxMode = "auto"
    network: bool = True
    writable: list[Path] = field(default_factory=list)
    env: Mapping[str, str] | None = None  # passed through as given, even secret-looking names
    hidden: Sequence[str | os.PathLike[str]] = DEFAULT_HIDDEN  # unreadable when fenced
    shell: str = field(default_factory=lambda: shutil.which("bash") or "/bin/sh")
    limits: JobLimits = field(default_factory=JobLimits)  # background jobs
    rules: CommandRules = field(default_factory=CommandRules)  # allow / ask / deny by words
    confirm: Callable[[str], Any] | None = None  # asked for commands an ``ask`` rule matches
    proxy: NetProxy | None = None  # network only to its hosts (with namespaces; else none)
    unix_sockets: list[Path] = field(default_factory=list)  # reachable beyond the places
    outputs: Outputs | None = None  # caps in tokens, and where cut outputs are kept whole
    # called before a command or a job starts (the checkpoints' first one must be whole)
    before_command: Callable[[], None] | None = None
    tracker: ChangeTracker = field(init=False, repr=False)
    jobs: Jobs = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tracker = ChangeTracker(self.root.path)
        if self.sandbox not in SANDBOX_MODES:
            raise ValueError(f"sandbox must be one of {SANDBOX_MODES}, not {self.sandbox!r}")
        self._pycache: Path | None = None
        self._protected = ProtectedPaths(self.root.protect) if self.root.protect else None
        self._masked_before = MaskedPaths()  # a masked file moved out of sight is followed
        self._masked: list[str] = []  # what the last command got masked (absolute)
        self.jobs = Jobs(self.root, self.tracker, self.journal, self.limits, self.outputs,
                         warm=lambda: self.warm)
        self.supervision = Supervision(self.rules, self.confirm)
        # one launcher process forks every command's launcher: no Python start per command
        self.warm = WarmLauncher(_python())

    @classmethod
    def fenced(cls, root: Root, journal: Journal | None, fence: CommandFence, *,
               limits: JobLimits, rules: CommandRules, confirm: Callable[[str], Any] | None,
               hidden: Sequence[str] = (), outputs: Outputs | None = None) -> Shell:
        """A shell whose commands run in ``fence``: a host list becomes a proxy that is the
        commands' only way out, the folders must exist, ``hidden`` is hidden besides the
        fence's own. PathError names a folder that does not exist."""
        network = fence.network
        proxy = None if isinstance(network, bool) else NetProxy(ProxyRules(
            AllowedHosts(network), AddressPolicy(allow_private=fence.allow_private_hosts),
            dict(fence.hosts)))
        return cls(root, journal, sandbox=fence.sandbox, network=network is True, proxy=proxy,
                   writable=writable_paths(fence.writable), env=fence.env,
                   unix_sockets=writable_paths(fence.unix_sockets, "unix_sockets path"),
                   hidden=(*fence.hidden, *hidden), limits=limits, rules=rules,
                   confirm=confirm, outputs=outputs)

    # -- the tools -----------------------------------------------------------------------

    def run(self, command: str, timeout: Timeout = 60,
            background: bool = False) -> CommandResult | JobStarted:
        if not command.strip():
            raise ToolError("command is empty; give a shell command to run in the root")
        self.check_command(command)  # background jobs obey the rules too
        argv = [self.shell, "-c", command]
        if background:
            # A shell reading its commands from stdin: what job_input sends it is a command
            # line, judged by the same rules (else `run bash` + job_input passes them).
            screen = self.check_command if self.rules and reads_commands(command) else None
            return self._start_job(command, argv, None, screen)
        with self._scratch() as scratch:
            return self._execute(argv, self._env(scratch), scratch, timeout)

    def _start_job(self, label: str, argv: list[str], code: str | None,
                   screen: Callable[[str], None] | None = None) -> JobStarted:
        """A background job of ``argv`` (``code``: run_python's snippet); refusals of the
        rules at exec time go to its stderr."""
        notes = Refusals()

        def prepare(scratch: Path) -> tuple[list[str], dict[str, str], bool]:
            args, env = (self._python(code, scratch, job=True) if code is not None
                         else (argv, self._env(scratch, job=True)))
            fence = self._check(args, env)
            session = self._session(args, notes.add, scratch, fence)
            return self._wrap(args, env, scratch, fence, session)

        if self.before_command is not None:
            self.before_command()
        return self.jobs.start(label, prepare, screen=screen, on_start=notes.attach)

    def run_python(self, code: str, timeout: Timeout = 60,
                   background: bool = False) -> CommandResult | JobStarted:
        # Rules see it as `python <file>`: ("deny", "python") refuses it, and so does
        # rules_default="deny" unless a rule allows python.
        shown = code if len(code) <= 2000 else f"{code[:2000]}\n[... {len(code) - 2000} more chars]"
        self.rules.check("python", self.confirm, action=f"run python code:\n{shown}")
        if background:
            first = next((ln for ln in code.splitlines() if ln.strip()), "")
            return self._start_job(f"python: {first}", [], code)
        with self._scratch() as scratch:
            return self._execute(*self._python(code, scratch), scratch, timeout)

    def _python(self, code: str, scratch: Path, *, job: bool = False,
                ) -> tuple[list[str], dict[str, str]]:
        script = scratch / "snippet.py"
        script.write_text(code, encoding="utf-8")
        env = self._env(scratch, job=job)
        paths = [str(self.root.path / "src"), str(self.root.path)]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        return [sys.executable, str(script)], env

    def check_command(self, command: str) -> None:
        """Raise unless the rules let ``command`` run (asking ``confirm`` for ``ask``);
        background jobs call it too."""
        self.rules.check(command, self.confirm)
        if self.rules and self.confirm is not None:  # passed: its asked commands were confirmed
            self.supervision.confirmed = self.rules.asked(command)

    # -- the fence and the environment ---------------------------------------------------

    def fence(self) -> Fence:
        """The layers commands get on this machine, or why they are refused."""
        if self.sandbox == "off":
            return Fence()
        found, iso = landlock_status(), isolation_status()
        if self.sandbox == "require":
            missing = []
            if not found.available:
                missing.append(str(found))
            elif not self.network and not found.network_control and not iso.namespaces:
                missing.append(f"Landlock ABI {found.abi} cannot block the network (needs "
                               "ABI 4, Linux 6.7+) and there are no network namespaces")
            if not iso.namespaces:
                missing.append(f"namespaces unavailable: {iso.namespace_reason}")
            if not iso.setid_filter:
                missing.append(f"setuid/setgid filter unavailable: {iso.setid_reason}")
            if self.rules and not iso.exec_guard:
                missing.append("command rules are set but programs cannot be checked when "
                               f"they start ({iso.exec_guard_reason})")
            if missing:
                return Fence(refusal=f'sandbox="require" but {"; ".join(missing)}; commands '
                             "are refused (the file tools still work)")
        return Fence(found.abi, iso.namespaces, iso.setid_filter)

    def summary(self) -> str:
        """How commands run, in a phrase: the layers (``Landlock ABI 7 + namespaces +
        setid filter``), ``UNFENCED (why)`` or ``refused (why)``."""
        fence = self.fence()
        if fence.refusal:
            return f"refused ({fence.refusal})"
        if not fence.any:
            why = 'sandbox="off"' if self.sandbox == "off" else str(landlock_status())
            return f"UNFENCED ({why})"
        layers = [f"Landlock ABI {fence.abi}"] if fence.abi else ["no Landlock"]
        layers += ["namespaces"] * fence.namespaces + ["setid filter"] * fence.no_setid
        return " + ".join(layers)

    def status(self) -> str:
        """One line for the toolbox status: whether and how commands are fenced."""
        fence = self.fence()
        if fence.refusal:
            return f"Commands (run, run_python) are refused: {fence.refusal}."
        _, withheld = scrubbed(os.environ, self.env)
        env = (f"{len(withheld)} secret-looking environment "
               f"variable{'' if len(withheld) == 1 else 's'} withheld")
        rules = f"\n{self.rules.describe()} {self._rules_status()}" if self.rules else ""
        return (f"{self._landlock_status(fence)}; {self._isolation_status(fence)}; "
                f"{env}{self._protect_status(fence)}.{rules}")

    def _rules_status(self) -> str:
        if self.exec_guarded():
            return ("They are checked on the command line and again when each program starts, "
                    "at any depth (scripts, make, xargs, python's subprocess, background jobs): "
                    "a refused program's exec fails with 'Operation not permitted'.")
        return ("They are checked on the command line only (checking programs when they start "
                f"is not possible here: {Supervision.missing()}): programs that scripts, make, "
                "xargs or python start are NOT checked.")

    def exec_guarded(self) -> bool:
        """Rules are set and checked at every exec (seccomp user notification)."""
        return self.supervision.checks_execs()

    def _session(self, argv: list[str], note: Note, scratch: Path,
                 fence: Fence) -> SupervisedCommand | None:
        """The supervision of a command started as ``argv``: its execs when rules are
        set, its UNIX connects when fenced (None: neither, or no user notification here)."""
        sockets = self.socket_places(scratch, fence) if self.sockets_guarded(fence) else None
        return self.supervision.session(
            argv, note, sockets, scoped=fence.abi >= 6,
            tcp_fenced=fence.abi >= 4 and not self.tcp_allowed(fence),
            shared_network=not fence.namespaces or self.network)

    def tcp_allowed(self, fence: Fence) -> bool:
        """Landlock lets the command's TCP through: the network is on, or the proxy in its
        own network namespace is its only way out."""
        return self.network or (self.proxy is not None and fence.namespaces)

    def sockets_guarded(self, fence: Fence) -> bool:
        """UNIX sockets outside the command's places are out of its reach."""
        return fence.any and Supervision.available()

    def socket_places(self, scratch: Path, fence: Fence) -> list[str]:
        """Where a command's UNIX sockets may be: the root, its scratch, writable folders,
        its private /tmp (with namespaces) and the user's ``unix_sockets``."""
        places = [str(self.root.path), str(scratch), *map(str, self.writable),
                  *map(str, self.unix_sockets)]
        if self.sandbox != "off":
            places.append(str(self.pycache))
        if fence.namespaces:
            places += private_tmpfs()
        return places

    def _landlock_status(self, fence: Fence) -> str:
        if not fence.abi:
            why = 'sandbox="off"' if self.sandbox == "off" else str(landlock_status())
            proc = ("" if fence.namespaces else " and can read the agent's environment "
                    "through /proc (so withheld secrets too)")
            return (f"Commands (run, run_python) are NOT sandboxed ({why}): they can write "
                    f"anywhere this user can{proc}")
        where = "the root and a per-call scratch TMPDIR"
        if self.writable:
            where += " and " + ", ".join(map(str, self.writable))
        where += (" (and a private /dev/shm, which is not tracked)" if fence.namespaces
                  else " (and /dev/shm, which is not tracked)")
        hidden, exposed = self._hidden_and_exposed()
        if hidden:
            where += "; they cannot read " + ", ".join(_home_relative(p) for p in hidden)
        for path, inside in exposed:  # a write rule there grants read; Landlock only adds
            if (fence.namespaces and inside == "the root"  # protected globs name root paths
                    and self.root.protected(Path(path), os.path.isdir(path))):
                where += f"; {_home_relative(path)} is inside {inside} but protected (masked)"
            else:
                where += f"; {_home_relative(path)} is inside {inside}: NOT hidden"
        return (f"Commands (run, run_python) are sandboxed by Landlock (ABI {fence.abi}): they "
                f"can write only inside {where}")

    def _isolation_status(self, fence: Fence) -> str:
        if self.network:
            net = "network allowed"
        elif self.proxy is not None and fence.namespaces:
            net = (f"network only to {self.proxy.rules.allowed} over HTTP(S), through the "
                   "toolbox's proxy (HTTP_PROXY/HTTPS_PROXY; a network namespace of their own "
                   "with no other way out: other hosts, IP addresses, UDP and DNS fail)")
        elif self.proxy is not None and self.sandbox != "off":
            net = ("network limited to hosts is NOT possible here (it needs network "
                   "namespaces), so commands get no network: " + (
                       "TCP connect/bind blocked" if fence.abi >= 4 else
                       "and the network is NOT blocked either (needs Landlock ABI 4)"))
        elif self.proxy is not None:
            net = 'network NOT limited to the allowed hosts (sandbox="off")'
        elif fence.namespaces:
            net = ("no network (a network namespace of their own, loopback only"
                   + ("; TCP connect/bind blocked too)" if fence.abi >= 4 else ")"))
        else:
            net = ("TCP connect/bind blocked (UDP and other protocols are NOT blocked: "
                   "no network namespace)" if fence.abi >= 4
                   else "network NOT blocked (needs Landlock ABI 4 or network namespaces)")
        if self.sandbox == "off":
            return net
        if fence.namespaces:
            tmp = ", ".join(private_tmpfs())
            git = ("; .git/config and .git/hooks are read-only "
                   f"({GIT_RULE})" if self.root.locks_git else "")
            iso = (f"each runs in namespaces of its own: nothing it starts outlives it, its "
                   f"{tmp} are private and empty (the user's agent, tmux and D-Bus sockets "
                   f"are out of reach){git}")
        else:
            iso = (f"NOT isolated ({isolation_status().namespace_reason}): /tmp, /dev/shm and "
                   "/run/user are shared with the user's programs (their sockets are "
                   "reachable), a process that escapes the reaper can outlive the command, "
                   ".git is writable")
        setid = ("setuid/setgid bits cannot be set" if fence.no_setid else
                 f"setuid/setgid bits are NOT blocked ({isolation_status().setid_reason})")
        return f"{net}; {iso}; {self._sockets_status(fence)}; {setid}"

    def _sockets_status(self, fence: Fence) -> str:
        if not self.sockets_guarded(fence):
            return (f"UNIX sockets elsewhere on disk are NOT out of reach (checking connect "
                    f"needs seccomp user notification: {Supervision.missing()})")
        extra = f", {', '.join(map(str, self.unix_sockets))}" if self.unix_sockets else ""
        return ("they connect only to UNIX sockets in the root, their TMPDIR, writable "
                f"folders{extra} (checked at each connect: a tmux server, ssh-agent or "
                f"docker socket elsewhere is out of reach){self._abstract_status(fence)}")

    def _abstract_status(self, fence: Fence) -> str:
        """Abstract names (no file) are the command's own only with Landlock's scope (ABI 6)
        or a network namespace of its own (checked at run time: the ABI in force)."""
        if fence.abi >= 6 or (fence.namespaces and not self.network):
            return ""
        have = f"this kernel has ABI {fence.abi}" if fence.abi else "Landlock is absent"
        return ("; abstract UNIX sockets (no file: an X server, a D-Bus bus) made outside ARE "
                f"reachable (Landlock scopes them from ABI 6; {have})")

    def _protect_status(self, fence: Fence) -> str:
        if not self.root.protect:
            return ""
        if fence.namespaces:
            return ("; the protected files are unreadable to them (masked in their mount "
                    "namespace; one that appears while a command runs is masked from the "
                    "next command on)")
        why = 'sandbox="off"' if self.sandbox == "off" else "masking them needs namespaces"
        return f"; the protected files are NOT hidden from them ({why})"

    def _sealed(self) -> list[str]:
        """The user's loki settings inside the root (``Root.sealed``) that exist, absolute."""
        places = (os.path.join(self.root.path, rel) for rel in self.root.sealed)
        return [p for p in places if os.path.lexists(p)]

    def _sealed_files(self) -> list[str]:
        """The files of the sealed places, root-relative (a configuration folder: few)."""
        found = []
        for place in self._sealed():
            if not os.path.isdir(place) or os.path.islink(place):
                found.append(self.root.rel(Path(place)))
                continue
            for folder, _, names in os.walk(place):
                found += [self.root.rel(Path(folder, n)) for n in names]
        return found

    def protected_paths(self) -> list[str]:
        """The root's protected files and folders (absolute, outermost only) as of the
        tracker's last ``begin()``, or from a walk when it has no complete view; and the
        user's loki settings inside the root, masked as they are."""
        if self._protected is None:
            return self._sealed()
        tree = self.tracker.tree()
        if tree is None:
            rels = walk_protected(str(self.root.path), self._protected.protect)
        else:
            rels = self._protected.outermost(*tree)
        rels = self._masked_before.follow(str(self.root.path), rels)
        return [*(os.path.join(self.root.path, rel) for rel in rels), *self._sealed()]

    def hidden_paths(self) -> list[str]:
        """The hidden paths that exist now, resolved (relative ones from the root)."""
        found = []
        for p in self.hidden:
            given = os.path.join(self.root.path, os.path.expanduser(os.fspath(p)))
            if not os.path.lexists(given):  # one lstat: most of the default list is absent
                continue
            real = os.path.realpath(given)
            if os.path.lexists(real) and real not in found:
                found.append(real)
        return found

    def hides(self, path: str | os.PathLike[str]) -> bool:
        """Whether no command can read ``path`` (which exists): Landlock hides it, and
        neither the root nor a writable folder holds it."""
        if not self.fence().abi:
            return False
        real = os.path.realpath(path)
        hidden, _ = self._hidden_and_exposed()
        return any(real == h or real.startswith(h.rstrip("/") + "/") for h in hidden)

    def _hidden_and_exposed(self) -> tuple[list[str], list[tuple[str, str]]]:
        """Hidden paths that stay unreadable, and (path, where) for those that lie in the
        root or a writable folder, whose write rule lets commands read them anyway."""
        places = [(str(self.root.path.resolve()), "the root"),
                  *((str(w), f"writable folder {w}") for w in self.writable)]
        hidden, exposed = [], []
        for path in self.hidden_paths():
            inside = next((name for top, name in places
                           if path == top or path.startswith(top.rstrip("/") + "/")), None)
            if inside is None:
                hidden.append(path)
            else:
                exposed.append((path, inside))
        return hidden, exposed

    def _env(self, scratch: Path, *, job: bool = False) -> dict[str, str]:
        env, _ = scrubbed(os.environ, self.env)
        env.update(TMPDIR=str(scratch), TMP=str(scratch), TEMP=str(scratch))
        env[SANDBOX_VAR] = self.fence().label()
        if self.sandbox != "off":  # bytecode for the root's modules never lands in the root
            env[PYCACHE_VAR] = str(self.pycache)
        if job:  # a job is read while it runs: Python's prints must not wait in a buffer
            env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def close(self) -> None:
        """Let go of the change watch (an inotify descriptor) and the bytecode cache; a
        later command makes them again."""
        self.tracker.close()
        self.supervision.close()
        self.warm.close()
        if self._pycache is not None:
            shutil.rmtree(self._pycache, ignore_errors=True)
            self._pycache = None

    @property
    def pycache(self) -> Path:
        """Where commands' Python keeps bytecode: private to this shell, outside the root."""
        if self._pycache is None:
            self._pycache = Path(tempfile.mkdtemp(prefix="loki-pycache-"))
            weakref.finalize(self, shutil.rmtree, self._pycache, ignore_errors=True)
            # the installed start-up modules' bytecode: no compiling them at every start
            seed(self._pycache, [str(self.root.path), *map(str, self.writable)])
        return self._pycache

    @contextmanager
    def _scratch(self) -> Iterator[Path]:
        folder = Path(tempfile.mkdtemp(prefix="loki-tmp-"))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    # -- one command -------------------------------------------------------------------

    def _launcher(self, argv: list[str], env: dict[str, str], scratch: Path,
                  fence: Fence, session: SupervisedCommand | None) -> list[str]:
        """``argv`` wrapped in the launcher with this command's fence and mount plan."""
        writable = [str(self.root.path), str(scratch), *map(str, self.writable)]
        if self.sandbox != "off":
            writable.append(str(self.pycache))
        mounts: list[tuple[str, str]] = []
        self._masked = []
        if fence.namespaces:
            git = self.tracker.git_dirs() if self.root.locks_git else []
            self._masked = self.protected_paths()
            mounts = mount_plan(writable, needed_paths(env, self.shell), git, self._masked,
                                closed_network=not self.network)
        proxy = self.proxy.control_path if self.proxy is not None and fence.namespaces else None
        notes = ProxyNotes(scratch).create() if proxy else None
        return launcher_argv(_python(), writable if fence.abi else [],
                             network=self.tcp_allowed(fence), abi=fence.abi, argv=argv,
                             hidden=self.hidden_paths() if fence.abi else [],
                             namespaces=fence.namespaces, mounts=mounts,
                             no_setid=fence.no_setid, proxy=proxy, proxy_notes=notes,
                             guard=(session.path, session.token, session.calls)
                             if session else None,
                             connector=session is not None and session.connector)

    def reader_argv(self, argv: list[str], scratch: Path, reads: Sequence[str] = (),
                    ) -> tuple[list[str], dict[str, str], bool]:
        """(argv, env, reaped) that run ``argv`` as a long-lived reader of the root (a
        language server): fenced as a command is, but the root is read-only to it: it may
        write only ``scratch`` (its TMPDIR and cache), has no network, cannot read the
        hidden paths or the protected files; ``reads``: folders its program runs from,
        kept visible under the private /tmp. ToolError when commands are refused here."""
        env, _ = scrubbed(os.environ, self.env)
        env.update(TMPDIR=str(scratch), TMP=str(scratch), TEMP=str(scratch),
                   XDG_CACHE_HOME=str(scratch / "cache"))
        fence = self._check(argv, env)
        env[SANDBOX_VAR] = fence.label()
        reaped = fence.any or sys.platform == "linux"
        if not reaped:
            return argv, env, False
        writable = [str(scratch)]
        mounts: list[tuple[str, str]] = []
        if fence.namespaces:
            needed = [str(self.root.path), *needed_paths(env, self.shell),  # read-only
                      *(os.path.realpath(p) for p in reads if os.path.isdir(p))]
            mounts = mount_plan(writable, needed, [], self.protected_paths(),
                                closed_network=True)
        python = sys.executable or shutil.which("python3") or "python3"
        wrapped = launcher_argv(python, writable if fence.abi else [], network=False,
                                abi=fence.abi, argv=argv,
                                hidden=self.hidden_paths() if fence.abi else [],
                                namespaces=fence.namespaces, mounts=mounts,
                                no_setid=fence.no_setid)
        return wrapped, env, True

    def _denied(self, done: Completed, fence: Fence, masked: Sequence[str],
                refused: Refusals) -> list[Denial]:
        """Why a failed command met 'Permission denied': a protected file, or the fence
        (unless the supervisor's refusals, a UNIX socket's say, already tell why)."""
        if done.exit_code == 0 or not (fence.abi or masked):
            return []
        secret, other = _denied_lines(stream_of(done.stderr).text(), masked)
        found: list[Denial] = ["protected"] if secret else []
        if other and fence.abi and not refused.lines:
            found.append("fence" if self.network else "fence-offline")
        return found

    def _check(self, argv: list[str], env: dict[str, str]) -> Fence:
        """The fence ``argv`` gets; ToolError when it must not or cannot run."""
        fence = self.fence()
        if fence.refusal:
            raise ToolError(fence.refusal)
        _check_program(argv[0], env)
        return fence

    def _wrap(self, argv: list[str], env: dict[str, str], scratch: Path, fence: Fence,
              session: SupervisedCommand | None) -> tuple[list[str], dict[str, str], bool]:
        """(argv in the launcher, env, reaped); after ``tracker.begin``, which finds the
        ``.git`` folders the mount plan protects."""
        reaped = fence.any or sys.platform == "linux"  # the reaper needs a Linux subreaper
        if reaped:
            argv = self._launcher(argv, env, scratch, fence, session)
        return argv, env, reaped

    def _execute(self, argv: list[str], env: dict[str, str], scratch: Path,
                 timeout: float) -> CommandResult:
        fence = self._check(argv, env)
        if self.before_command is not None:
            self.before_command()
        self.jobs.settle(resume=False)  # what jobs changed so far is theirs; ours from here
        skip = [scratch, *self.jobs.scratches(),
                *(self.journal.private_dirs() if self.journal else [])]
        self.tracker.begin(skip)
        if self.journal is not None:  # what the journal puts back if a command changes it
            self.journal.keep_originals([*self.tracker.code_files(), *self._sealed_files()])
        refused = Refusals()
        session = self._session(argv, refused.add, scratch, fence)
        argv, env, reaped = self._wrap(argv, env, scratch, fence, session)
        masked = [self.root.rel(Path(p)) for p in self._masked] if reaped else []
        put_back: list[str] = []
        notes = ProxyNotes(scratch)
        try:
            spill = self.outputs.spill if self.outputs is not None else None
            done = run_process(argv, cwd=str(self.root.path), timeout=timeout, env=env,
                               reaped=reaped, spill=spill.new if spill is not None else None,
                               warm=self.warm, contained=reaped and fence.namespaces)
        finally:  # interrupted too (Ctrl-C): what the command did so far is the run's
            notes.finish()
            if session is not None:
                session.close()
            changes = self.tracker.end(skip)
            if self.journal is not None:
                put_back = self.journal.after_command(changes)
            self.jobs.resume()
        return command_result(done, self.outputs, refusals=refused.lines, refusals_dropped=refused.dropped,
                           proxy=notes.take().splitlines(), changes=file_changes(changes),
                           changes_tracked=changes.tracked, put_back=put_back,
                           denied=self._denied(done, fence, masked, refused))


def _denied_lines(stderr: str, masked: Sequence[str]) -> tuple[bool, bool]:
    """(a denial names a protected path, a denial names something else) in ``stderr``."""
    secret = other = False
    for line in stderr.splitlines():
        if _DENIED in line:
            if any(rel in line for rel in masked):
                secret = True
            else:
                other = True
    return secret, other


def _home_relative(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home):] if path.startswith(home + "/") else path


def _python() -> str:
    """The interpreter that runs the launcher."""
    return sys.executable or shutil.which("python3") or "python3"


def _check_program(program: str, env: Mapping[str, str]) -> None:
    if shutil.which(program, path=env.get("PATH")) is None:
        raise ToolError(f"cannot start {program!r}: no such program (or not executable); "
                        "run and run_python need it installed")


