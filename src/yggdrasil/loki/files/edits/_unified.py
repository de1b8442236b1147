"""Unified diffs as ``git diff`` and ``diff -u`` write them: ``---``/``+++`` headers (git's
``a/``, ``b/`` prefixes and quoting, ``/dev/null``), git's rename and new/deleted-file
headers, ``@@ -a,b +c,d @@`` hunks read by their counts, ``\\ No newline at end of file``.
Hunks without numbers (``@@ ... @@``, as models write them) are read line by line.
"""

from __future__ import annotations

import re

from ...errors import ToolError
from ._hunks import HUNK_NUMBERS, FileOp, Hunk, PatchReader, add_line, hint

__all__ = ["Unified"]


class Unified(PatchReader):
    def at_file_header(self) -> bool:
        lines, i = self.lines, self.i
        return (i + 1 < len(lines) and lines[i].startswith("--- ")
                and lines[i + 1].startswith("+++ "))

    def parse(self) -> list[FileOp]:
        ops: list[FileOp] = []
        git: dict[str, str] = {}
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.startswith("diff --git "):
                git = self._git_headers()
                if not self.at_file_header():  # a rename, mode change or empty file only
                    ops += _bare_git_op(git)
                    git = {}
            elif self.at_file_header():
                old, new = _path(line[4:]), _path(self.lines[self.i + 1][4:])
                ops.append(_file_op(old, new, bool(git), self.i + 1))
                git = {}
                self.i += 2
            elif line.startswith("@@"):
                if not ops:
                    raise self.error("a hunk comes before any '--- a/path' / '+++ b/path' header")
                ops[-1].hunks.append(self.hunk())
            elif line.startswith(("GIT binary patch", "Binary files ")):
                raise self.error("binary patches are not supported; apply_patch changes text files")
            else:
                self.i += 1  # preamble, 'index ...', a commit message: not ours to read
        return ops

    def _git_headers(self) -> dict[str, str]:
        """A git section's extended headers, up to its '---'/'+++' lines or the next section."""
        git = {"diff": self.lines[self.i], "where": str(self.i + 1)}
        self.i += 1
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if self.at_file_header() or line.startswith(("diff --git ", "@@")):
                break
            for key in ("rename from ", "rename to ", "new file mode", "deleted file mode"):
                if line.startswith(key):
                    git[key.strip()] = line[len(key):].strip()
            if line.startswith(("copy from ", "copy to ")):
                raise self.error("git copies are not supported; add the new file instead")
            if line.startswith(("GIT binary patch", "Binary files ")):
                raise self.error("binary patches are not supported; apply_patch changes text files")
            self.i += 1
        return git

    def _hunk_follows(self) -> bool:
        return _hunk_follows_at(self.lines, self.i)

    def hunk(self) -> Hunk:
        numbers = HUNK_NUMBERS.match(self.lines[self.i])
        hunk = Hunk(where=self.i + 1, line=hint(numbers) if numbers else None)
        left = [int(numbers.group(2) or 1), int(numbers.group(4) or 1)] if numbers else None
        self.i += 1
        last = ""
        while self.i < len(self.lines):
            line = self.lines[self.i]
            counting = left is not None and (left[0] > 0 or left[1] > 0)
            if line.startswith(("@@", "diff --git ")):
                break
            if self.at_file_header() and (not counting or self._hunk_follows()):
                break  # while counting, '--- x' is a removed line unless a hunk follows
            if line.startswith("\\"):
                hunk.old_no_newline |= last in " -"
                hunk.new_no_newline |= last in " +"
            elif (line == "" and (counting or left is None)) or line[:1] in (" ", "-", "+"):
                if left is not None and not counting:
                    break  # the counts are used up: what follows is not this hunk's
                add_line(hunk, line)
                last = line[:1] or " "
                if left is not None:
                    left[0] -= last in " -"
                    left[1] -= last in " +"
            else:
                break
            self.i += 1
        used_up = left is not None and left[0] <= 0 and left[1] <= 0
        return hunk if used_up else hunk.finish()  # wrong or no counts: trailing blanks go


def _hunk_follows_at(lines: list[str], i: int) -> bool:
    return i + 2 < len(lines) and lines[i + 2].startswith("@@")


def _path(text: str) -> str | None:
    """A ---/+++ path: the timestamp after a tab dropped, git's quoting undone."""
    path = text.split("\t", 1)[0].rstrip()
    if len(path) >= 2 and path[0] == path[-1] == '"':
        raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        path = raw.encode("latin-1", "replace").decode("utf-8", "replace")
    return None if path == "/dev/null" else path


def _file_op(old: str | None, new: str | None, git: bool, where: int) -> FileOp:
    is_git = git or ((old or "a/").startswith("a/") and (new or "b/").startswith("b/"))
    if is_git:
        old = old[2:] if old and old.startswith("a/") else old
        new = new[2:] if new and new.startswith("b/") else new
    if old is None and new is None:
        raise ToolError(f"the patch is not valid: line {where}: both sides are /dev/null")
    if old is None:
        return FileOp("add", _readings(new or "", is_git), where)
    if new is None:
        return FileOp("delete", _readings(old, is_git), where)
    if is_git and old != new:
        return FileOp("update", [old], where, move_to=new)
    return FileOp("update", _readings(old, is_git) + _readings(new, is_git), where)


def _bare_git_op(git: dict[str, str]) -> list[FileOp]:
    """A git section without hunks: a rename, an empty file added or deleted, or a mode
    change (ignored: apply_patch keeps a file's mode)."""
    where = int(git["where"])
    if "rename from" in git and "rename to" in git:
        old, new = _path(git["rename from"]), _path(git["rename to"])
        return [FileOp("update", [old or ""], where, move_to=new)]
    same = re.fullmatch(r"diff --git a/(.+) b/(.+)", git["diff"])
    if same and same.group(1) == same.group(2):
        if "new file mode" in git:
            return [FileOp("add", [same.group(1)], where, hunks=[Hunk(where=where, at_eof=True)])]
        if "deleted file mode" in git:
            return [FileOp("delete", [same.group(1)], where)]
    return []


def _readings(path: str, is_git: bool) -> list[str]:
    """The path as written, then (for a plain diff of two folders) without its first part."""
    _, sep, rest = path.partition("/")
    return [path] if is_git or not sep or not rest else [path, rest]
