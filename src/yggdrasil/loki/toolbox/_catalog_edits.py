"""The edit tools beyond write_file/edit_file: apply_patch and undo_edit.

Kept apart from ``_catalog`` so that the words a model learns the patch format from live
with the tools that read it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from annotated_types import Interval

from ..diagnostics import Diagnostician
from ..errors import ToolError
from ..files import Files
from ..results import CheckpointList, RewindResult, Undone
from ._box import Toolbox
from ._diagnosed import diagnosed
from ._tool import Tool

__all__ = ["edit_tools", "rewind_tool"]

Step = Annotated[int, Interval(ge=0)]

PATCH_FORMAT = """\
Add, delete, update and move files in one call, all or nothing. Format:
*** Begin Patch
*** Update File: src/app.py
@@ def main():
 an unchanged line (starts with a space)
-a removed line
+an added line
*** Add File: docs/new.md
+each line of a new file starts with +
*** Delete File: old.txt
*** End Patch
'*** Move to: new/path.py' right after an Update line renames the file. '@@ <line>' names \
a line above the hunk (a def or class) to find it by; give 2-3 unchanged lines around \
each change. A unified diff (git diff, diff -u) works too. Whitespace, tab/space and \
curly-quote slips are forgiven where a hunk still matches one place."""


def edit_tools(files: Files, box: Toolbox, doctor: Diagnostician | None = None) -> list[Tool]:
    patch = files.apply_patch if doctor is None else diagnosed(files.apply_patch, doctor)
    return [
        Tool("apply_patch", PATCH_FORMAT,
             {"patch": "the patch text: '*** Begin Patch' ... '*** End Patch', or a unified diff",
              "dry_run": "only check it and show the diff it would apply; change nothing "
                         "(default false)"},
             patch, mutates=True, title="Apply a patch"),
        Tool("undo_edit", "Put a file back as it was before this run changed it (undoes every "
             "change this run made to it; a file this run created is removed).",
             {"path": "a file this run changed, relative to the root"},
             _undo_for(box), mutates=True, title="Undo a file's changes",
             idempotent=True),
    ]


def _undo_for(box: Toolbox) -> Callable[[str], Undone]:
    def undo(path: str) -> Undone:  # a plain function: its type hints make the schema
        return undo_edit(box, path)
    return undo


def undo_edit(box: Toolbox, path: str) -> Undone:
    """Revert one file through ``box.revert``: what became of it."""
    if box.journal is None:
        raise ToolError("this toolbox keeps no journal; nothing can be undone")
    (rel,) = box.journal.relative([path])
    if rel not in box.journal.entries:
        changed = f" (files changed so far: {', '.join(box.changed[:20])})" if box.changed else ""
        raise ToolError(f"{rel} was not changed in this run; nothing to undo{changed}")
    done = box.revert([rel])
    if rel in done.not_reverted:
        raise ToolError(f"cannot undo {rel}: {done.not_reverted[rel]}")
    if rel in done.restored:
        return Undone(path=rel, outcome="restored")
    return Undone(path=rel, outcome="removed" if rel in done.removed else "already")


def rewind_tool(box: Toolbox) -> Tool:
    """``rewind``: list the checkpoints, or put the files back as after one of them."""
    def rewind(step: Step | None = None, paths: list[str] | None = None,
               dry_run: bool = False) -> CheckpointList | RewindResult:
        if step is None:
            return box.checkpoints()
        return box.rewind(step, paths, dry_run=dry_run)

    return Tool("rewind", "Without `step`: list the checkpoints (one after each call that "
                "changed files: number, tool, files). With `step`: put the root's files back "
                "as they were right after that checkpoint (0: before the first), what "
                "commands changed too; says what it restored, what it could not and why, and "
                "the diff.",
                {"step": "checkpoint number to go back to; leave it out to list them",
                 "paths": "only these files (relative to the root); default every file "
                          "changed since",
                 "dry_run": "only show what would be put back, and the diff (default false)"},
                rewind, mutates=True, title="Rewind to a checkpoint")
