"""run, run_python and background jobs (internal): commands in the root, fenced, and
what they changed.

Owns the command tools (``Shell``: scratch folder, scrubbed environment, the fence
settings and the status line that reports them, the protected files each command gets
masked, the command rules that allow, ask about or deny a command line by its commands'
leading words), background jobs (``Jobs``: started by ``run(..., background=True)``, read,
written to, stopped, listed, each with its limits in ``JobLimits``; one ``_job.Job`` per
command, on the same launcher and kill as ``run``) and change tracking (stat snapshots and
an inotify view of the root that find what a command or a job created, modified or
deleted).
Imports ``sandbox`` (processes and the fence), ``files`` (Root, the journal) and ``errors``.
"""

from __future__ import annotations

from ._changes import diff, snapshot
from ._feed import Reader, TreeChange, TreeFeed, feed_for, feeds
from ._job import JobLimits
from ._jobs import Jobs
from ._protected import ProtectedPaths, walk_protected
from ._results import command_result, stream_of
from ._rules import RULE_ACTIONS, CommandRules, Rule, RuleAction, Verdict, parse_rules
from ._shell import DEFAULT_HIDDEN, SANDBOX_MODES, SandboxMode, Shell, writable_paths
from ._tracker import ChangeTracker
from ._watch import TreeWatch

__all__ = [
    "DEFAULT_HIDDEN",
    "RULE_ACTIONS",
    "SANDBOX_MODES",
    "ChangeTracker",
    "CommandRules",
    "JobLimits",
    "Jobs",
    "ProtectedPaths",
    "Reader",
    "Rule",
    "RuleAction",
    "SandboxMode",
    "Shell",
    "TreeChange",
    "TreeFeed",
    "TreeWatch",
    "Verdict",
    "command_result",
    "diff",
    "feed_for",
    "feeds",
    "parse_rules",
    "snapshot",
    "stream_of",
    "walk_protected",
    "writable_paths",
]
