"""Every child process the toolbox starts: fenced, reaped, bounded (internal).

Owns Landlock through ctypes and the launcher that applies it in the child
(``_landlock``, run as a script by path), the subreaper that kills whatever a command
leaves behind (``_reaper``), the environment scrub (``_env``) and running a process with
head+tail capture and a whole-tree kill (``_proc``), stopped early through a per-call
cancel event (``_cancel``), the read-only launcher for parsers of untrusted input
(``_readonly``, used for ripgrep) and the long-lived fenced, limited worker process that
parses table files (``_worker`` and its child, ``_worker_main``). The launchers, the reaper
and the worker's child side use the standard library only; the package imports nothing
but ``errors`` and ``yggdrasil.io`` (for ``human_size``), so it stands below every hand and
a stdlib-only interpreter can load it.

``python -m yggdrasil.loki.sandbox`` prints what this machine supports.
"""

from __future__ import annotations

from ._cancel import cancel_scope, current_cancel
from ._env import is_secret, scrubbed
from ._landlock import SandboxStatus, landlock_status, launcher_argv
from ._proc import Capture, Completed, run_process
from ._readonly import binary_paths, interpreter_paths, read_only_argv
from ._worker import FencedWorker, WorkerFailed, WorkerLimits

__all__ = [
    "Capture",
    "Completed",
    "FencedWorker",
    "SandboxStatus",
    "WorkerFailed",
    "WorkerLimits",
    "binary_paths",
    "cancel_scope",
    "current_cancel",
    "interpreter_paths",
    "is_secret",
    "landlock_status",
    "launcher_argv",
    "read_only_argv",
    "run_process",
    "scrubbed",
]
