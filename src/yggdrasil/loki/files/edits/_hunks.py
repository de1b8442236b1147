"""What a patch says, file by file: the operations and hunks both patch formats parse to."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ...errors import ToolError

__all__ = ["HUNK_NUMBERS", "FileOp", "Hunk", "PatchReader", "add_line", "hint"]

HUNK_NUMBERS = re.compile(r"^@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@+(.*)$")


@dataclass
class Hunk:
    """Lines to find (``old``: context and removed) and what they become (``new``)."""

    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)  # Codex '@@ def f():' scope lines
    line: int | None = None  # 0-based line of the old file where ``old`` starts (unified)
    at_eof: bool = False  # Codex '*** End of File': old ends the file
    old_no_newline: bool = False  # '\ No newline at end of file' after an old line
    new_no_newline: bool = False
    where: int = 0  # line of the patch where the hunk starts
    blank_tail: int = 0  # trailing context lines that were empty patch lines

    def finish(self) -> Hunk:
        """Drop trailing context lines that were empty lines of the patch (a final newline,
        a separator): they can only make the hunk harder to find."""
        for _ in range(self.blank_tail):
            if self.old and self.new and self.old[-1] == self.new[-1] == "":
                self.old.pop()
                self.new.pop()
        return self


@dataclass
class FileOp:
    """One file's part of a patch. ``paths``: the readings of its path, best first (a plain
    diff's ``old/x.py`` may mean ``x.py``); the first that exists is used."""

    kind: Literal["add", "delete", "update"]
    paths: list[str]
    where: int
    move_to: str | None = None
    hunks: list[Hunk] = field(default_factory=list)


def add_line(hunk: Hunk, line: str) -> None:
    mark, rest = line[:1], line[1:]
    if mark == "-":
        hunk.old.append(rest)
    elif mark == "+":
        hunk.new.append(rest)
    else:  # context; an empty patch line is an empty context line
        hunk.old.append(rest)
        hunk.new.append(rest)
    hunk.blank_tail = hunk.blank_tail + 1 if line == "" else 0


def hint(numbers: re.Match[str]) -> int:
    start, count = int(numbers.group(1)), numbers.group(2)
    return start if count == "0" else max(start - 1, 0)


class PatchReader:
    """A patch's lines and the one being read; what both formats' parsers start from."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.i = 0

    def error(self, why: str) -> ToolError:
        """The error for the line being read: its number, its text, and why."""
        got = self.lines[self.i] if self.i < len(self.lines) else ""
        return ToolError(f"the patch is not valid: line {self.i + 1} ({got[:80]!r}): {why}")
