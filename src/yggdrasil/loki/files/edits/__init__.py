"""The edit machinery of the file tools: how a change is found, planned and shown.

Owns the forgiving matcher (``_match``: exact, then ignoring indentation, whitespace,
line endings and curly quotes; ``_slips``: line numbers and blank lines a model copied
along; ``_nearmiss``: the closest place when nothing matches), edit_file's edits
(``_edit``), the patch formats (``_patch`` over ``_codex``, the ``*** Begin Patch``
format, and ``_unified``, git's), a patch's plan against the files (``_apply``) and the
capped unified diffs every change shows (``_diff``). Pure text work but for ``_apply``,
which reads the files it patches through ``Root``; the writing stays in ``files._files``.
"""

from __future__ import annotations

from ._apply import FileState, Plan, patched_files
from ._diff import (
    MAX_CONFIRM_LINES,
    MAX_DIFF_LINES,
    ConfirmAction,
    Spans,
    lines_of,
    render,
    whole,
)
from ._edit import EditItem, apply_edits, edit_list, landed_edits
from ._patch import parse_patch

__all__ = [
    "MAX_CONFIRM_LINES",
    "MAX_DIFF_LINES",
    "ConfirmAction",
    "EditItem",
    "FileState",
    "Plan",
    "Spans",
    "apply_edits",
    "edit_list",
    "landed_edits",
    "lines_of",
    "parse_patch",
    "patched_files",
    "render",
    "whole",
]
