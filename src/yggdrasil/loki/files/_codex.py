"""Codex's patch format: ``*** Begin Patch``, ``*** Add File:`` / ``*** Delete File:`` /
``*** Update File:`` (with ``*** Move to:``), ``@@`` hunks, ``*** End of File``,
``*** End Patch``. A missing Begin or End line is forgiven."""

from __future__ import annotations

from typing import Literal

from ._hunks import HUNK_NUMBERS, FileOp, Hunk, PatchReader, add_line, hint

__all__ = ["CODEX_OPS", "Codex"]

CODEX_OPS = ("*** Add File:", "*** Delete File:", "*** Update File:")


class Codex(PatchReader):
    def parse(self) -> list[FileOp]:
        lines: list[str] = self.lines
        ops: list[FileOp] = []
        while self.i < len(lines) and lines[self.i].strip() != "*** Begin Patch":
            if lines[self.i].startswith(CODEX_OPS):
                break  # no Begin line: forgiven
            self.i += 1
        else:
            self.i += 1
        while self.i < len(lines):
            line = lines[self.i].rstrip()
            if line == "*** End Patch":
                return ops
            if not line:
                self.i += 1
                continue
            for marker, kind in (("*** Add File:", "add"), ("*** Delete File:", "delete"),
                                 ("*** Update File:", "update")):
                if line.startswith(marker):
                    ops.append(self.op(kind, line[len(marker):].strip()))  # type: ignore[arg-type]
                    break
            else:
                raise self.error("expected '*** Add File: <path>', '*** Update File: <path>', "
                                 "'*** Delete File: <path>' or '*** End Patch'")
        return ops  # no End line: forgiven

    def op(self, kind: Literal["add", "delete", "update"], path: str) -> FileOp:
        if not path:
            raise self.error("the header names no file")
        op = FileOp(kind, [path], where=self.i + 1)
        self.i += 1
        if kind == "add":
            op.hunks = [self.added()]
        elif kind == "update":
            if self.i < len(self.lines) and self.lines[self.i].startswith("*** Move to:"):
                op.move_to = self.lines[self.i][len("*** Move to:"):].strip()
                self.i += 1
            op.hunks = self.hunks()
            if not op.hunks and not op.move_to:
                raise self.error(f"'*** Update File: {path}' has no hunk ('@@' then lines "
                                 "starting with ' ', '-' or '+')")
        return op

    def added(self) -> Hunk:
        hunk = Hunk(where=self.i + 1, at_eof=True)
        while self.i < len(self.lines) and not self.lines[self.i].startswith("***"):
            line = self.lines[self.i]
            if line.startswith("+"):
                hunk.new.append(line[1:])
                hunk.blank_tail = 0
            elif line:
                raise self.error("every line of an added file starts with '+'")
            else:  # a blank line left without its '+': kept unless it only trails
                hunk.new.append("")
                hunk.blank_tail += 1
            self.i += 1
        del hunk.new[len(hunk.new) - hunk.blank_tail:]
        return hunk

    def hunks(self) -> list[Hunk]:
        hunks: list[Hunk] = []
        hunk: Hunk | None = None
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.startswith("***") and line.rstrip() != "*** End of File":
                break
            if line.startswith("@@"):
                if hunk is None or hunk.old or hunk.new:
                    hunk = Hunk(where=self.i + 1)
                    hunks.append(hunk)
                _codex_header(hunk, line)
            elif line.rstrip() == "*** End of File":
                if hunk is None:
                    raise self.error("'*** End of File' ends a hunk; it cannot come first")
                hunk.at_eof = True
            elif line[:1] in (" ", "-", "+", ""):
                if hunk is None:
                    hunk = Hunk(where=self.i + 1)  # the first hunk may come without '@@'
                    hunks.append(hunk)
                add_line(hunk, line)
            else:
                raise self.error("a hunk line starts with ' ' (context), '-' (removed) or "
                                 "'+' (added); a new hunk starts with '@@'")
            self.i += 1
        return [h.finish() for h in hunks if h.old or h.new]


def _codex_header(hunk: Hunk, line: str) -> None:
    numbers = HUNK_NUMBERS.match(line)
    if numbers:  # a unified '@@ -12,7 +12,8 @@' in a Codex patch: a line hint
        hunk.line = hint(numbers)
        return
    header = line.strip("@").strip()
    if header:
        hunk.headers.append(header)
