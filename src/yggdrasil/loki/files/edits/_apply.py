"""A patch planned in memory: each file's new text, found hunk by hunk with the forgiving
matcher, before anything is written. Any failure raises ToolError and nothing changes.

Hunks of one file are located in order on the original text (each after the previous
one), then applied together. A hunk must match one place: the first rung that matches
anywhere after the previous hunk (and after its ``@@`` scope line, in Codex's format)
decides, and two or more places there are refused, unless a unified diff's line number
names one of them.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import PathError, ToolError
from ...results import LooseHunk, PatchedFile, UnifiedDiff, diff_lines, human_size
from .._root import Root
from .._text import Encoding, Text, printable, read_text
from ._diff import MAX_DIFF_LINES, Change, Spans, lines_of, render, trimmed, whole
from ._hunks import FileOp, Hunk
from ._match import FORGIVEN, IGNORED, Lines, Matched, adapt
from ._nearmiss import near_miss

__all__ = ["MAX_PATCH_BYTES", "FileState", "Plan", "patched_files"]

MAX_PATCH_BYTES = 256 << 20  # of files one patch reads: the plan holds them in memory
MAX_PATCH_WORK = 1 << 30  # characters hunks are applied to (one file updated many times)
MAX_SHARED_LINES = 16 << 20  # of work, up to which the plan keeps the files' lines for the gate


@dataclass
class FileState:
    """One path a patch touches: what is on disk and what the patch makes of it."""

    rel: str
    real: Path
    original: Text | None  # None: no file there now
    text: str | None  # planned content; None: the path will hold no file
    encoding: Encoding = field(default_factory=Encoding)
    mode: int | None = None  # for a file moved here: the source's permission bits
    spans: Spans = field(default_factory=Spans)
    moved_from: str | None = None
    moved_to: str | None = None
    source: Text | None = None  # for a file moved here: the file it came from
    loose: list[LooseHunk] = field(default_factory=list)  # hunks that matched loosely
    # the lines of the text before the patch and of ``text`` (each str.split("\n")), as
    # the plan made them, for the syntax gate (which then need not split them again)
    lines: tuple[list[str], list[str]] | None = None

    @property
    def changed(self) -> bool:
        before = self.original.text if self.original is not None else None
        return self.text != before or self.moved_from is not None

    def data(self) -> bytes:
        return self.encoding.encode(self.text or "")

    def entry(self, diff: UnifiedDiff | None = None) -> PatchedFile | None:
        """What the patch does to this path (``M``, ``A``, ``D``, ``R`` from a moved file's
        source), with ``diff``; None for a path it leaves alone or moves away from."""
        if self.moved_from is not None:
            return PatchedFile(op="R", path=self.moved_from, new_path=self.rel,
                               loose=self.loose, diff=diff)
        if self.moved_to is not None or not self.changed:
            return None
        if self.original is None:
            return PatchedFile(op="A", path=self.rel, diff=diff)
        if self.text is None:
            return PatchedFile(op="D", path=self.rel, diff=diff)
        return PatchedFile(op="M", path=self.rel, loose=self.loose, diff=diff)

    def diff(self, limit: int, *, full: bool) -> UnifiedDiff | None:
        """This file's diff; with ``full`` also the whole text of an added or deleted file."""
        was = self.source or self.original
        before = lines_of(was.text) if was is not None else []
        after = lines_of(self.text) if self.text is not None else []
        if self.moved_from is not None or (self.original and self.text is not None):
            return render(before, after, self.spans.changes, self.moved_from or self.rel,
                          self.rel, limit=limit, see=self.rel)
        if not full or self.moved_to is not None:
            return None
        changes: list[Change] = whole(before, after)
        return render(before, after, changes, self.rel, limit=limit)


class Plan:
    """The planned state of every path a patch touches, in the order it touched them."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self.files: dict[str, FileState] = {}
        self.read = 0  # bytes of the files read
        self.work = 0  # characters of text the hunks were applied to

    def state(self, path: str) -> FileState:
        real = self.root.resolve(_file_path(path))
        rel = self.root.rel(real)
        if rel not in self.files:
            st = self.root.stat(real)
            original = read_text(self.root, real, rel) if st else None
            if original is None:
                self._check_parents(real)
            else:
                self.read += len(original.data)
                if self.read > MAX_PATCH_BYTES:
                    raise ToolError(f"the patch touches more than {human_size(MAX_PATCH_BYTES)} "
                                    "of files; apply it in parts (a few files per call)")
            self.files[rel] = FileState(
                rel, real, original, original.text if original else None,
                original.encoding if original else Encoding())
        return self.files[rel]

    def _check_parents(self, real: Path) -> None:
        """A new file's folders are either missing (they will be made) or folders."""
        for parent in real.parents:
            if parent == self.root.path or not parent.is_relative_to(self.root.path):
                return
            st = self.root.stat(parent)
            if st is not None:
                if not stat.S_ISDIR(st.st_mode):
                    raise PathError(f"{self.root.rel(parent)} is a file, not a folder; "
                                    f"{self.root.rel(real)} cannot be created below it")
                return

    def apply(self, ops: list[FileOp]) -> None:
        for op in ops:
            try:
                self._one(op)
            except ToolError as exc:
                raise ToolError(f"apply_patch changed nothing: {exc}", category=exc.category,
                                hint=exc.hint, rule=exc.rule) from exc

    def _pick(self, op: FileOp) -> FileState:
        """The first reading of the op's path that holds a file, else the first reading."""
        for path in op.paths:
            try:
                state = self.state(path)
            except PathError:
                continue
            if state.text is not None:
                return state
        return self.state(op.paths[0])

    def _one(self, op: FileOp) -> None:
        state = self._pick(op)
        rel = state.rel
        if op.kind == "add":
            if state.text is not None:
                raise ToolError(f"{rel} already exists (patch line {op.where}); to change it "
                                f"use '*** Update File: {rel}' or a diff against its content")
            state.text = _patch_text("", op.hunks, state)
            return
        if state.text is None:
            raise ToolError(f"{rel} does not exist (patch line {op.where}); to create it use "
                            f"'*** Add File: {rel}' (or '--- /dev/null' in a diff)")
        if op.kind == "delete":
            if op.hunks and _patch_text(state.text, op.hunks, state).strip():
                raise ToolError(f"{rel} holds lines the patch does not delete (patch line "
                                f"{op.where}); it was not deleted")
            state.text = None
            return
        if op.hunks:
            self.work += len(state.text)
            if self.work > MAX_PATCH_WORK:
                raise ToolError("the patch updates the same large files over and over; apply "
                                "it in parts, or put each file's hunks under one header")
            state.text = _patch_text(state.text, op.hunks, state,
                                     keep=self.work <= MAX_SHARED_LINES)
        if op.move_to is not None:
            self._move(state, op)

    def _move(self, state: FileState, op: FileOp) -> None:
        dest = self.state(op.move_to or "")
        if dest.rel == state.rel:
            return
        if dest.text is not None:
            raise ToolError(f"cannot move {state.rel} to {dest.rel} (patch line {op.where}): "
                            f"{dest.rel} already exists; delete it first or choose another name")
        st = self.root.stat(state.real)
        dest.text, dest.encoding, dest.spans = state.text, state.encoding, state.spans
        dest.mode = st.st_mode & 0o777 if st else None
        dest.moved_from, dest.loose, dest.source = state.rel, state.loose, state.original
        dest.lines, state.lines = state.lines, None
        state.text, state.moved_to = None, dest.rel


def _patch_text(text: str, hunks: list[Hunk], state: FileState, *, keep: bool = False) -> str:
    """``text`` with every hunk applied (located in order on the original lines); with
    ``keep``, both texts' lines are noted on ``state`` for the syntax gate."""
    if not hunks:
        return text  # an added file without lines: empty
    body = text.split("\n")
    final_newline = text.endswith("\n") or not text
    if final_newline:
        body.pop()
    doc = Lines(body)
    placed: list[tuple[int, int, list[str]]] = []
    cursor = drift = 0
    for n, hunk in enumerate(hunks, 1):
        where = f"{state.rel}, hunk {n} of {len(hunks)} (patch line {hunk.where})"
        start, rung, new = _place(doc, hunk, cursor, drift, where, text)
        if rung:
            state.loose.append(LooseHunk(hunk=n, ignored=FORGIVEN[rung]))
        placed.append((start, len(hunk.old), new))
        cursor = start + len(hunk.old)
        if hunk.line is not None:
            drift = start - hunk.line
    out: list[str] = []
    prev = shift = 0
    for start, k, new in placed:
        out += body[prev:start] + new
        prev = start + k
        state.spans.replaced(*trimmed(start + shift, body[start : start + k], new))
        shift += len(new) - k
    out += body[prev:]
    last = hunks[-1]
    ended = final_newline
    if placed and placed[-1][0] + placed[-1][1] == len(body):  # the last hunk ends the file
        if last.new_no_newline:
            final_newline = False
        elif last.old_no_newline:
            final_newline = True
    patched = "\n".join(out) + ("\n" if final_newline and out else "")
    if keep:  # the lists str.split would make of both texts
        _keep_lines(state, text, [*body, ""] if ended else body,
                    [*out, ""] if final_newline or not out else out)
    else:
        state.lines = None
    return patched


def _keep_lines(state: FileState, text: str, before: list[str], after: list[str]) -> None:
    """Note on ``state`` the lines of its text before the patch and after this op: the
    first op starts from the original text, a later one from what the earlier ones left."""
    if state.lines is not None:
        state.lines = (state.lines[0], after)
    elif state.original is not None and text is state.original.text:
        state.lines = (before, after)


def _place(doc: Lines, hunk: Hunk, lo: int, drift: int, where: str,
           text: str) -> tuple[int, int, list[str]]:
    """Where ``hunk`` goes (a line index), the rung that matched, and its new lines in the
    file's conventions."""
    for header in hunk.headers:
        scope = doc.find([header], lo=lo)
        if scope is None:
            raise ToolError(f"{where}: its '@@ {printable(header)}' line was not found "
                            f"after line {lo}")
        lo = scope.starts[0]
    k = len(hunk.old)
    hint = hunk.line + drift if hunk.line is not None else None
    if k == 0:  # only added lines: after the scope line, at the line number, or at the end
        pos = lo + 1 if hunk.headers else len(doc.lines) if hint is None else hint
        return min(max(pos, lo), len(doc.lines)), 0, list(hunk.new)
    if hint is not None and hint >= lo and doc.lines[hint : hint + k] == hunk.old:
        return hint, 0, list(hunk.new)  # exactly at the line the diff names: git's own diffs
    found = doc.find(hunk.old, lo=max(lo, len(doc.lines) - k)) if hunk.at_eof else None
    found = found or doc.find(hunk.old, lo=lo)
    if found is None:
        raise ToolError(_not_found(doc, hunk, lo, where, text))
    start = _one_place(found, hint, k, where)
    new = adapt(doc.lines[start : start + k], hunk.old, hunk.new, found.rung,
                found.indents.get(start))
    return start, found.rung, new


def _one_place(found: Matched, hint: int | None, k: int, where: str) -> int:
    if hint is not None and hint in found.starts:
        return hint
    if len(found.starts) == 1:
        return found.starts[0]
    loose = f" when {IGNORED[found.rung]}" if found.rung else ""
    spans = ", ".join(f"{s + 1}-{s + k}" for s in found.starts[:10])
    raise ToolError(f"{where}: its lines appear {len(found.starts)}x{loose} (at lines {spans}); "
                  "add context lines (or an '@@ def name' scope line) so it matches one place")


def _not_found(doc: Lines, hunk: Hunk, lo: int, where: str, text: str) -> str:
    earlier = doc.find(hunk.old, hi=lo + len(hunk.old) - 1) if lo else None
    if earlier is not None:
        return (f"{where}: its lines are at line {earlier.starts[0] + 1}, before the previous "
                "hunk; hunks of a file must come in the order of the file")
    applied = doc.find(hunk.new, lo=lo) if hunk.new and hunk.new != hunk.old else None
    if applied is not None and len(applied.starts) == 1:
        return (f"{where}: its lines were not found, but its new lines are at line "
                f"{applied.starts[0] + 1}: the patch looks already applied there")
    return f"{where}: its lines were not found. {printable(near_miss(text, chr(10).join(hunk.old)))}"


def _file_path(path: str) -> str:
    if not path or path.rsplit("/", 1)[-1] in ("", ".", ".."):
        raise PathError(f"path {path!r} in the patch names a folder; give a file path")
    return path


def patched_files(states: list[FileState], *, full: bool) -> tuple[list[PatchedFile], int]:
    """What the patch does to each file, in order, with the diffs under one cap (with
    ``full`` also of added and deleted files), and how many files' diffs the cap left
    out (a file moved away counted among them)."""
    files: list[PatchedFile] = []
    shown, cut = 0, 0
    for n, state in enumerate(states):
        diff = None
        if not cut:
            room = MAX_DIFF_LINES - shown
            if room < 4:
                cut = len(states) - n
            else:
                diff = state.diff(room, full=full)
                shown += len(diff_lines(diff))
        if (entry := state.entry(diff)) is not None:
            files.append(entry)
    return files, cut
