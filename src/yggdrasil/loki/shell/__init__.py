"""run and run_python (internal): a command in the root, fenced, and what it changed.

Owns the command tools (``Shell``: scratch folder, scrubbed environment, the fence
settings and the status line that reports them, the protected files each command gets
masked) and change tracking (stat snapshots and
an inotify view of the root that find what a command created, modified or deleted).
Imports ``sandbox`` (processes and the fence), ``files`` (Root, the journal) and ``errors``.
"""

from __future__ import annotations

from ._changes import diff, snapshot
from ._protected import ProtectedPaths, walk_protected
from ._shell import DEFAULT_HIDDEN, SANDBOX_MODES, SandboxMode, Shell, writable_paths
from ._watch import ChangeTracker, TreeWatch

__all__ = [
    "DEFAULT_HIDDEN",
    "SANDBOX_MODES",
    "ChangeTracker",
    "ProtectedPaths",
    "SandboxMode",
    "Shell",
    "TreeWatch",
    "diff",
    "snapshot",
    "walk_protected",
    "writable_paths",
]
