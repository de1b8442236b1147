"""Every child process the toolbox starts: fenced, reaped, bounded (internal).

Owns Landlock through ctypes and the launcher that applies it in the child
(``_landlock``, run as a script by path), the subreaper that kills whatever a command
leaves behind (``_reaper``), the environment scrub (``_env``) and running a process with
head+tail capture and a whole-tree kill (``_proc``), stopped early through a per-call
cancel event (``_cancel``). The launcher and reaper use the
standard library only. Imports ``files`` (for ``human_size``) and ``errors``.

``python -m yggdrasil.loki.sandbox`` prints what this machine supports.
"""

from __future__ import annotations

from ._cancel import cancel_scope, current_cancel
from ._env import is_secret, scrubbed
from ._landlock import SandboxStatus, landlock_status, launcher_argv
from ._proc import Capture, Completed, run_process

__all__ = [
    "Capture",
    "Completed",
    "SandboxStatus",
    "cancel_scope",
    "current_cancel",
    "is_secret",
    "landlock_status",
    "launcher_argv",
    "run_process",
    "scrubbed",
]
