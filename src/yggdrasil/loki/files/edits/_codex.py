"""Codex's patch format: ``*** Begin Patch``, ``*** Add File:`` / ``*** Delete File:`` /
``*** Update File:`` (with ``*** Move to:``), ``@@`` hunks, ``*** End of File``,
``*** End Patch``. A missing Begin or End line is forgiven.

Whitespace around a marker line is forgiven, as Codex forgives it, wherever the line
cannot be content: a line starting with '+' or '-' is always content; one starting with
whitespace is a marker where a file header (or Begin) is expected, when it is the
patch's last line (End Patch), when ``*** End of File`` is followed by the next hunk, the
next file or the end, and when it is a bare ``@@`` (or ``@@ -a,b +c,d @@``) line;
elsewhere in a hunk it is a context line.
"""

from __future__ import annotations

from typing import Literal

from ._hunks import HUNK_NUMBERS, FileOp, Hunk, PatchReader, add_line, hint

__all__ = ["CODEX_OPS", "Codex"]

CODEX_OPS = ("*** Add File:", "*** Delete File:", "*** Update File:")
_END = "*** End Patch"
_EOF = "*** End of File"


class Codex(PatchReader):
    def parse(self) -> list[FileOp]:
        lines: list[str] = self.lines
        ops: list[FileOp] = []
        while self.i < len(lines) and lines[self.i].strip() != "*** Begin Patch":
            if lines[self.i].strip().startswith(CODEX_OPS):
                break  # no Begin line: forgiven
            self.i += 1
        else:
            self.i += 1
        while self.i < len(lines):
            line = lines[self.i].strip()  # a header is expected: padding is forgiven
            if line == _END:
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
            move = self.lines[self.i].strip() if self.i < len(self.lines) else ""
            if move.startswith("*** Move to:"):
                op.move_to = move[len("*** Move to:"):].strip()
                self.i += 1
            op.hunks = self.hunks()
            if not op.hunks and not op.move_to:
                raise self.error(f"'*** Update File: {path}' has no hunk ('@@' then lines "
                                 "starting with ' ', '-' or '+')")
        return op

    def added(self) -> Hunk:
        hunk = Hunk(where=self.i + 1, at_eof=True)
        while self.i < len(self.lines) and not self.ends_body():
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
            if self.ends_body() and not self.end_of_file():
                break
            if line.startswith("@@") or _padded_hunk_header(line):
                if hunk is None or hunk.old or hunk.new:
                    hunk = Hunk(where=self.i + 1)
                    hunks.append(hunk)
                _codex_header(hunk, line.strip())
            elif self.end_of_file():
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


    def ends_body(self) -> bool:
        """Whether the line being read is a marker that ends an added file's or a hunk's
        lines: one starting with '***', or a padded one that cannot be content (the patch's
        last line, or an End of File line that a header or the end follows)."""
        line = self.lines[self.i]
        if line.startswith("***"):
            return True
        if line[:1] in ("+", "-") or not line.strip().startswith("***"):
            return False
        after = self.next_filled(self.i + 1)
        if line.strip() == _END:
            return after is None
        if line.strip() != _EOF or after is None:
            return line.strip() == _EOF
        follows = self.lines[after]
        return (follows.startswith(("***", "@@"))
                or (follows.strip() == _END and self.next_filled(after + 1) is None))

    def next_filled(self, i: int) -> int | None:
        """The first line from ``i`` on that is not blank (None: there is none)."""
        while i < len(self.lines) and not self.lines[i].strip():
            i += 1
        return i if i < len(self.lines) else None

    def end_of_file(self) -> bool:
        line = self.lines[self.i]
        return line.strip() == _EOF and (line.rstrip() == _EOF or self.ends_body())


def _padded_hunk_header(line: str) -> bool:
    """A bare '@@' or a unified '@@ -a,b +c,d @@' with whitespace around it (a context line
    never reads so: it would be the file's own '@@' line, written with a space before)."""
    body = line.strip()
    return line[:1].isspace() and (body == "@@" or HUNK_NUMBERS.match(body) is not None)


def _codex_header(hunk: Hunk, line: str) -> None:
    numbers = HUNK_NUMBERS.match(line)
    if numbers:  # a unified '@@ -12,7 +12,8 @@' in a Codex patch: a line hint
        hunk.line = hint(numbers)
        return
    header = line.strip("@").strip()
    if header:
        hunk.headers.append(header)
