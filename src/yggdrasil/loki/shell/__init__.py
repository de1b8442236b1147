"""run and run_python (internal): a command in the root, fenced, and what it changed.

Owns the command tools (``Shell``: scratch folder, scrubbed environment, the fence
settings and the status line that reports them, the protected files each command gets
masked, the command rules that allow, ask about or deny a command line by its
commands' leading words) and change tracking (stat snapshots and
an inotify view of the root that find what a command created, modified or deleted).
Imports ``sandbox`` (processes and the fence), ``files`` (Root, the journal) and ``errors``.
"""

from __future__ import annotations

from ._changes import diff, snapshot
from ._protected import ProtectedPaths, walk_protected
from ._rules import RULE_ACTIONS, CommandRules, Rule, RuleAction, Verdict, parse_rules
from ._shell import DEFAULT_HIDDEN, SANDBOX_MODES, SandboxMode, Shell, writable_paths
from ._watch import ChangeTracker, TreeWatch

__all__ = [
    "DEFAULT_HIDDEN",
    "RULE_ACTIONS",
    "SANDBOX_MODES",
    "ChangeTracker",
    "CommandRules",
    "ProtectedPaths",
    "Rule",
    "RuleAction",
    "SandboxMode",
    "Shell",
    "TreeWatch",
    "Verdict",
    "diff",
    "parse_rules",
    "snapshot",
    "walk_protected",
    "writable_paths",
]
