"""Every child process the toolbox starts: fenced, isolated, reaped, bounded (internal).

Owns Landlock through ctypes and the launcher that applies it in the child
(``_landlock``, run as a script by path), the namespaces the launcher puts a command in
and the mount plan it applies there (``_namespace``), the seccomp filter against
setuid/setgid bits (``_seccomp``), the supervisor that decides every exec of a command
through seccomp user notification (``_supervisor``, with the launcher's half in
``_usernotif``) and makes the UNIX connects it allows through the command's connector
(``_sockets``, ``_connector``), the subreaper that kills whatever an unisolated command
leaves behind (``_reaper``), the import guard that keeps modules planted in the root out
of the agent process (``_imports``), the probes of what this machine offers (``_isolation``), the
environment scrub (``_env``) and running a process with head+tail capture and a
whole-tree kill (``_proc``, a foreground command or a background job: stdin as a pipe,
output pumped into any sink, asked to stop with signals to its own processes, found
below the launcher by ``_kill``) stopped early through a per-call cancel event
(``_cancel``), the warm launcher that forks each command's launcher from one process
started per toolbox instead of starting Python per command (``_warm``, its toolbox half
``_warm_client``), the read-only launcher for parsers of untrusted input
(``_readonly``, used for ripgrep) and the long-lived fenced, limited worker process that
parses table files (``_worker`` and its child, ``_worker_main``). The launchers, the
modules they load (``_namespace``, ``_seccomp``, ``_reaper``) and the worker's child side
use the standard library only; the package imports nothing but ``errors`` and
``yggdrasil.io`` (for ``human_size``), so it stands beside ``files`` and a stdlib-only
interpreter can load it.

``python -m yggdrasil.loki.sandbox`` prints what this machine supports.
"""

from __future__ import annotations

from ._cancel import cancel_scope, current_cancel
from ._env import is_secret, scrubbed
from ._imports import guard_imports
from ._isolation import IsolationStatus, isolation_status
from ._kill import kill_carrying, running_since
from ._landlock import SandboxStatus, landlock_status, launcher_argv
from ._listen import LazyServer, listening_socket
from ._namespace import MOUNT_KINDS
from ._proc import Capture, Completed, Overflow, Process, Sink, run_process
from ._readonly import binary_paths, interpreter_paths, read_only_argv
from ._spawn import main_not_rerun
from ._supervisor import Decide, Exec, SupervisedCommand, Supervisor
from ._warm_client import WarmLauncher
from ._worker import FencedWorker, WorkerFailed, WorkerLimits

__all__ = [
    "MOUNT_KINDS",
    "Capture",
    "Completed",
    "Decide",
    "Exec",
    "FencedWorker",
    "IsolationStatus",
    "LazyServer",
    "Overflow",
    "Process",
    "SandboxStatus",
    "Sink",
    "SupervisedCommand",
    "Supervisor",
    "WarmLauncher",
    "WorkerFailed",
    "WorkerLimits",
    "binary_paths",
    "cancel_scope",
    "current_cancel",
    "guard_imports",
    "interpreter_paths",
    "is_secret",
    "isolation_status",
    "kill_carrying",
    "landlock_status",
    "launcher_argv",
    "listening_socket",
    "main_not_rerun",
    "read_only_argv",
    "run_process",
    "running_since",
    "scrubbed",
]
