"""The confined file layer: the one place that decides what a path means (internal).

Owns ``Root`` (every path resolved and opened inside the agent root, no symlink followed
out), the file tools (list, read a window, write, edit, apply a patch), their edit
machinery in ``edits/`` (the forgiving matcher, patches, diffs), the stale-view guard,
the syntax gate, the run's journal (what each touched path was, and how to put it back), the protected
paths ``Root`` refuses (``Protection``, ``DEFAULT_PROTECTED``), the files git takes
commands from that the tools never write (``_gitfiles``). Every other hand builds on
this package; it imports only ``results``, ``outputs`` (read_file of a kept output by its
id), ``errors`` and ``yggdrasil.io``.
"""

from __future__ import annotations

from ._approvals import Answer, Approvals, answer_of
from ._copies import StoreCopies
from ._files import Confirm, Files
from ._gitfiles import SETTINGS_FILE, settings_path
from ._journal import Diff, Journal, JournalEntry, Reverted
from ._protect import (
    DEFAULT_PROTECTED,
    HOW_TO_CHANGE,
    GlobRules,
    ProtectedError,
    Protection,
    protect_globs,
)
from ._root import DIR_FLAGS, READ_FLAGS, Root, resolve_inside
from ._store import CHUNK, Store, StoreError, digest
from ._syntax import OnSyntaxError, SyntaxGate, syntax_problem
from .edits import ConfirmAction

__all__ = [
    "CHUNK",
    "DEFAULT_PROTECTED",
    "DIR_FLAGS",
    "HOW_TO_CHANGE",
    "READ_FLAGS",
    "SETTINGS_FILE",
    "Answer",
    "Approvals",
    "Confirm",
    "ConfirmAction",
    "Diff",
    "Files",
    "GlobRules",
    "Journal",
    "JournalEntry",
    "OnSyntaxError",
    "ProtectedError",
    "Protection",
    "Reverted",
    "Root",
    "Store",
    "StoreCopies",
    "StoreError",
    "SyntaxGate",
    "answer_of",
    "digest",
    "protect_globs",
    "resolve_inside",
    "settings_path",
    "syntax_problem",
]
