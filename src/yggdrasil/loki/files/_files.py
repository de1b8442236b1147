"""The file tools: list, read a window, write, edit, apply a patch. All paths go through a Root.

Each answers its typed result (``results``: ``DirListing``, ``FileRead``, ``FileWritten``,
``FileEdited``, ``PatchApplied``), whose text the toolbox renders.

Every change to a file goes the same way: the stale-view guard (``Views``), the syntax
gate, ``confirm`` for an existing file (with the diff it asks about), the journal hook,
an atomic write, and the view noted again. A patch stages every file first and renames
them all after, so a failure while writing changes nothing (see ``_commit``).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Ge

from ..errors import LokiError, PathError, Refused, ToolError
from ..outputs import Spill, SpillError
from ..results import (
    MAX_ENTRIES,
    DirListing,
    FileEdited,
    FileRead,
    FileWritten,
    FolderEntry,
    PatchApplied,
    diff_text,
    human_size,
)
from ._approvals import answer_of
from ._protect import ProtectedError
from ._root import Root, Staged
from ._syntax import SyntaxGate
from ._text import MAX_EDIT_BYTES, read_text, wide_codec
from ._views import Views
from ._window import AsUtf8, byte_window, window_read
from .edits import (
    MAX_CONFIRM_LINES,
    MAX_DIFF_LINES,
    ConfirmAction,
    EditItem,
    FileState,
    Plan,
    Spans,
    apply_edits,
    edit_list,
    landed_edits,
    lines_of,
    parse_patch,
    patched_files,
    render,
    whole,
)

__all__ = ["Confirm", "Files"]

_SNIFF = 8192

Confirm = Callable[[str], Any]  # a bool, or "yes" / "no" / "always" (files.Approvals)


@dataclass
class Files:
    """File tools bound to one root; ``on_change`` hears every created or edited path,
    ``on_remove`` every path a patch deleted, ``before_change`` every path about to change."""

    root: Root
    confirm: Confirm | None = None
    on_change: Callable[[str], None] = field(default=lambda rel: None)
    before_change: Callable[[str, Path], None] = field(default=lambda rel, real: None)
    on_remove: Callable[[str], None] = field(default=lambda rel: None)
    syntax: SyntaxGate = field(default_factory=SyntaxGate)
    views: Views = field(default_factory=Views)
    spill: Spill | None = None  # the session's kept outputs, which read_file reads by id

    # -- reading -------------------------------------------------------------------------

    def list_dir(self, path: str = ".") -> DirListing:
        real = self.root.resolve(path)
        st = self.root.stat(real)
        if st is None:
            raise PathError(f"{self.root.rel(real)} does not exist")
        if not stat.S_ISDIR(st.st_mode):
            raise PathError(f"{self.root.rel(real)} is a file; use read_file to read it")
        # Entries by name from the folder's descriptor (no link followed, even one swapped
        # in since resolve); sorted and cut on d_type alone, so only shown files are stat'ed.
        with self.root.folder_fd(real.relative_to(self.root.path).parts) as fd:
            entries = _sorted_entries(fd)
            shown = [self._entry(real, entry) for entry in entries[:MAX_ENTRIES]]
        return DirListing(path=self.root.rel(real), entries=shown,
                          more=max(0, len(entries) - MAX_ENTRIES))

    def _entry(self, folder: Path, entry: os.DirEntry[str]) -> FolderEntry:
        rel = self.root.rel(folder / entry.name)
        is_dir = entry.is_dir(follow_symlinks=False)
        kind: Literal["file", "folder", "link", "special"] = (
            "folder" if is_dir else "link" if entry.is_symlink() else
            "file" if entry.is_file(follow_symlinks=False) else "special")

        def made(**facts: Any) -> FolderEntry:
            return FolderEntry(name=entry.name, path=rel, kind=kind, **facts)

        if self.root.protected(folder / entry.name, is_dir):  # shown to exist, never its size
            return made(protected=True)
        if kind == "link":
            try:
                target = self.root.rel(self.root.resolve(rel))
            except ProtectedError as exc:
                return made(target=exc.rel, protected=True)
            except PathError:
                return made(outside=True)
            return made(target=target)
        if kind == "file":
            return made(size=entry.stat(follow_symlinks=False).st_size)
        return made()

    def read_file(self, path: str, start: Annotated[int, Ge(1)] = 1,
                  end: Annotated[int, Ge(0)] = 0) -> FileRead:
        if start < 1 or end < 0 or (end and end < start):
            raise ToolError("start is a 1-based line number and end (0 = to the end) is >= start",
                            category="argument")
        if path.strip().startswith("output://"):
            return self._read_output(path.strip(), start, end)
        real = self.root.resolve(path)
        rel = self.root.rel(real)
        with self.root.open_file(real) as fd, os.fdopen(os.dup(fd), "rb") as fh:
            size = os.fstat(fd).st_size
            head = fh.read(_SNIFF)
            fh.seek(0)
            if size == 0:
                return FileRead(path=rel, content="empty", size=0)
            self.views.saw(rel, os.fstat(fd))
            wide = wide_codec(head)
            if wide is not None:
                bom, codec = wide
                fh.seek(len(bom))
                return window_read(rel, size, start,
                                   byte_window(AsUtf8(fh, codec), size, start, end), codec)
            if b"\0" in head:
                raise ToolError(
                    f"{rel} is a binary file ({human_size(size)}); read_file shows text only"
                    " (read_table reads data files)"
                )
            return window_read(rel, size, start, byte_window(fh, size, start, end))

    def _read_output(self, output_id: str, start: int, end: int) -> FileRead:
        """A window of one of this session's kept outputs (outside the root: the spill
        folder, read by id only)."""
        if self.spill is None:
            raise ToolError(f"{output_id!r}: this toolbox keeps no outputs (outputs.keep_whole "
                            "is off); give a path inside the root")
        try:
            kept = self.spill.path_of(output_id)
        except SpillError as exc:
            raise PathError(str(exc)) from None
        with open(kept, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return FileRead(path=output_id, content="empty", size=0)
            return window_read(output_id, size, start, byte_window(fh, size, start, end))

    # -- writing ------------------------------------------------------------------------

    def write_file(self, path: str, content: str) -> FileWritten:
        real = self.root.resolve(_file_path(path))
        rel = self.root.rel(real)
        st = self.root.stat(real)
        self.views.check(rel, st)
        before = self._old_text(real, rel, st)
        warning = self.syntax.check(rel, before, content)

        def diff() -> str:
            if before is None:
                return ""
            old, new = lines_of(before), lines_of(content)
            return diff_text(render(old, new, whole(old, new), rel, limit=MAX_CONFIRM_LINES))

        written = self.write_bytes(real, content.encode("utf-8"), diff=diff)
        return written.model_copy(update={"warnings": [warning] if warning else []})

    def write_bytes(self, real: Path, data: bytes, *,
                    diff: Callable[[], str] | None = None) -> FileWritten:
        """The one write path for whole files: confirm gate, journal hooks, atomic replace."""
        rel = self.root.rel(real)
        self._gate("overwrite", real, rel, diff)
        created = self._write(real, rel, data)
        return FileWritten(path=rel, created=created, bytes=len(data))

    def edit_file(self, path: str, old: str = "", new: str = "", replace_all: bool = False,
                  edits: list[EditItem] | None = None) -> FileEdited:
        items = edit_list(old, new, replace_all, edits)
        real = self.root.resolve(_file_path(path))
        rel = self.root.rel(real)
        st = self.root.stat(real)
        if st is None:
            raise PathError(f"{rel} does not exist; use write_file to create it")
        self.views.check(rel, st)
        source = read_text(self.root, real, rel)
        edited, landed = apply_edits(source.text, items, rel)
        warning = self.syntax.check(rel, source.text, edited)
        spans = Spans()
        for done in landed:
            for span in done.spans:
                spans.replaced(*span)
        before, after = lines_of(source.text), lines_of(edited)
        self._gate("edit", real, rel, lambda: diff_text(
            render(before, after, spans.changes, rel, limit=MAX_CONFIRM_LINES)))
        self._write(real, rel, source.encode(edited))
        made = landed_edits(landed)
        return FileEdited(path=rel, edits=made, replacements=sum(e.replacements for e in made),
                          diff=render(before, after, spans.changes, rel, limit=MAX_DIFF_LINES,
                                      see=rel),
                          warnings=[warning] if warning else [])

    def apply_patch(self, patch: str, dry_run: bool = False) -> PatchApplied:
        plan = Plan(self.root)
        plan.apply(parse_patch(patch))
        states = [s for s in plan.files.values() if s.changed or s.moved_to]
        if not states:
            return PatchApplied(dry_run=dry_run, changes_nothing=True)
        for state in states:
            if state.original is not None:
                self.views.check(state.rel, self.root.stat(state.real))
            self.root.check_writable(state.real)  # a dry run gives the same answer
        if dry_run:
            warnings = self._patch_syntax(states)
            files, cut = patched_files(states, full=True)
            return PatchApplied(dry_run=True, files=files, diffs_cut=cut, warnings=warnings)
        # files that exist now are staged at once and flushed while the syntax is checked;
        # new ones (their folders may be missing: the journal notes them first) in _commit
        staged = self._stage([s for s in states if s.original is not None], sync=False)
        flushing = _Flush(self.root)
        try:
            warnings = self._patch_syntax(states)
            for state in states:
                self._gate_patch(state)
            flushing.wait()
        except BaseException:
            flushing.wait(raising=False)
            for _, temp in staged:
                self.root.discard(temp)
            raise
        self._commit(states, staged)
        files, cut = patched_files(states, full=False)
        return PatchApplied(files=files, diffs_cut=cut, warnings=warnings)

    def _patch_syntax(self, states: list[FileState]) -> list[str]:
        warnings = []
        for state in states:
            if state.text is not None:
                before = (state.source or state.original)
                try:
                    changed = [(c.a0, c.a1, c.b0, c.b1) for c in state.spans.changes]
                    warning = self.syntax.check(state.rel, before.text if before else None,
                                                state.text, changed, lines=state.lines)
                    state.lines = None  # not needed any more: memory back now
                except ToolError as exc:
                    raise ToolError(f"apply_patch changed nothing: {exc}", category=exc.category,
                                    hint=exc.hint, rule=exc.rule) from exc
                warnings += [warning] if warning else []
        return warnings

    def _gate_patch(self, state: FileState) -> None:
        if state.original is None:
            return
        name = state.rel
        if state.moved_to is not None:
            verb, name = "move", f"{state.rel} to {state.moved_to}"
        elif state.text is None:
            verb = "delete"
        else:
            verb = "edit"
        self._gate(verb, state.real, name, lambda: "" if state.text is None else diff_text(
            state.diff(MAX_CONFIRM_LINES, full=False)))

    def _stage(self, states: list[FileState], *, sync: bool) -> list[tuple[FileState, Staged]]:
        """Each file's new content written beside it (flushed one by one with ``sync``);
        a failure removes the ones written and changes nothing."""
        staged: list[tuple[FileState, Staged]] = []
        try:
            for state in states:
                if state.text is not None:
                    staged.append((state, self.root.stage(state.real, state.data(), state.mode,
                                                          sync=sync)))
        except BaseException:
            for _, temp in staged:
                self.root.discard(temp)
            raise
        return staged

    def _commit(self, states: list[FileState], staged: list[tuple[FileState, Staged]]) -> None:
        """Write a planned patch whose existing files are staged and flushed (one syncfs for
        all): the new files staged (each flushed), everything renamed over its target, then
        the deletions, and the folders holding them flushed (an fsync each, no file data
        left to write). A failure before the renames changes nothing; one among them puts
        back what was already done; a kill leaves every file whole."""
        try:
            for state in states:
                self.before_change(state.rel, state.real)
            staged += self._stage([s for s in states if s.original is None], sync=True)
        except BaseException:
            for _, temp in staged:
                self.root.discard(temp)
            raise
        done: list[FileState] = []
        try:
            for state, temp in staged:
                self.root.commit(temp, sync=False)
                done.append(state)
            for state in states:
                if state.text is None and state.original is not None:
                    self.root.remove(state.real)
                    done.append(state)
            self.root.sync_folders(s.real for s in states)  # the renames and removals
        except (OSError, LokiError) as exc:
            for _, temp in staged[len(done):]:
                self.root.discard(temp)
            self._put_back(done)
            raise ToolError(f"apply_patch failed while writing ({exc}); the files it had "
                            "already changed were put back") from exc
        for state in states:
            if state.text is not None:
                self.on_change(state.rel)
            elif state.original is not None:
                self.on_remove(state.rel)
            self.views.saw(state.rel, self.root.stat(state.real))

    def _put_back(self, done: list[FileState]) -> None:
        for state in reversed(done):
            try:
                if state.original is None:
                    self.root.remove(state.real)
                else:
                    self.root.write_atomic(state.real, state.original.data)
            except (OSError, LokiError):
                continue  # the journal still holds its original: revert() can try again

    def _old_text(self, real: Path, rel: str, st: os.stat_result | None) -> str | None:
        """The text an overwrite replaces (for its diff and syntax check), when it is text."""
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > MAX_EDIT_BYTES:
            return None
        try:
            return read_text(self.root, real, rel).text
        except ToolError:
            return None

    def _write(self, real: Path, rel: str, data: bytes) -> bool:
        self.before_change(rel, real)
        created = self.root.write_atomic(real, data)
        self.on_change(rel)
        self.views.saw(rel, self.root.stat(real))
        return created

    def _gate(self, verb: str, real: Path, rel: str, diff: Callable[[], str] | None) -> None:
        """Ask ``confirm`` before changing an existing file outside the system temp dir;
        the question is a ``ConfirmAction`` carrying the diff of the change."""
        if self.confirm is None or self.root.is_temporary(real) or self.root.stat(real) is None:
            return
        question = ConfirmAction(f"{verb} {rel}", diff() if diff else "")
        if answer_of(self.confirm(question)) == "no":
            raise Refused(verb, rel)


class _Flush:
    """``root.sync_all()`` in a thread of its own (the kernel writes while Python checks
    syntax); ``wait`` joins it and raises what it raised."""

    def __init__(self, root: Root) -> None:
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(root,), name="loki-flush",
                                       daemon=True)
        self.thread.start()

    def _run(self, root: Root) -> None:
        try:
            root.sync_all()
        except BaseException as exc:  # handed to the caller by wait()
            self.error = exc

    def wait(self, *, raising: bool = True) -> None:
        self.thread.join()
        if raising and self.error is not None:
            raise ToolError(f"apply_patch changed nothing: cannot flush the new files to disk "
                            f"({self.error})") from self.error


def _sorted_entries(fd: int) -> list[os.DirEntry[str]]:
    """Folders first, then files, each by name."""
    with os.scandir(fd) as it:
        entries = list(it)
    return sorted(entries, key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))


def _file_path(path: str) -> str:
    """``path`` unless it names a folder by its form ('a/', 'a/.', '..'): resolving would
    drop that ending and write a file named like the folder."""
    if path.rsplit("/", 1)[-1] in ("", ".", ".."):
        raise PathError(f"path {path!r} names a folder; give a file path, e.g. 'notes/todo.txt'")
    return path
