"""Patches as a list of file operations: Codex's ``*** Begin Patch`` format (``_codex``)
and unified diffs as ``git diff`` and ``diff -u`` write them (``_unified``).

Parsing only reads the text; where the lines go is decided later, on the files, by the
same matcher as edit_file. A patch wrapped in a code fence or a shell heredoc is
unwrapped; a patch whose every line ends in CRLF is read as LF.
"""

from __future__ import annotations

import re

from ...errors import ToolError
from ._codex import CODEX_OPS, Codex
from ._hunks import FileOp
from ._unified import Unified

__all__ = ["parse_patch"]

_FENCE = re.compile(r"^\s*```[\w+-]*\s*$")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?\s*$")


def parse_patch(text: str) -> list[FileOp]:
    """The file operations of a patch; ToolError says which line of the patch is wrong."""
    lines = _unwrap(text.split("\n"))
    if all(line.endswith("\r") for line in lines if line):
        lines = [line.removesuffix("\r") for line in lines]
    head = [line.strip() for line in lines if line.strip()][:3]
    if any(h == "*** Begin Patch" or h.startswith(CODEX_OPS) for h in head):
        ops = Codex(lines).parse()
    elif any(line.startswith(("--- ", "diff --git ", "@@")) for line in lines):
        ops = Unified(lines).parse()
    else:
        raise ToolError("the patch is neither Codex's format ('*** Begin Patch', then '*** "
                        "Update File: path', ...) nor a unified diff ('--- a/path', '+++ b/path', "
                        "'@@ -1,3 +1,4 @@'); it starts with " + repr((head or [""])[0][:80]))
    if not ops:
        raise ToolError("the patch changes no file")
    return ops


def _unwrap(lines: list[str]) -> list[str]:
    """Without a surrounding code fence or shell heredoc (``apply_patch <<'EOF' ... EOF``)."""
    body = [i for i, line in enumerate(lines) if line.strip()]
    if len(body) >= 2:
        first, last = body[0], body[-1]
        if _FENCE.match(lines[first]) and lines[last].strip() == "```":
            return lines[first + 1 : last]
        heredoc = _HEREDOC.search(lines[first])
        if heredoc and lines[last].strip() == heredoc.group(1):
            return lines[first + 1 : last]
    return lines
