"""What the file tools answer: a folder's entries, a window of a file's lines, what a
write, an edit, a patch or an undo did, and the unified diffs they show.

The text is DESIGN.md's: list_dir's ``name/`` and ``name  (<size>b)`` lines, read_file's
``<n>\\t<text>`` lines with a note saying how to read on, ``created <path> (<n> bytes)``,
``edited <path> (1 replacement; matched ignoring indentation)`` and apply_patch's
``M a.py`` lines, each followed by a capped unified diff of what landed and the syntax
gate's warnings.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from yggdrasil.io import human_size

from ._base import Result
from ._bounds import clip_line, clip_list, more_note
from ._diagnostics import Diagnosis, Diagnostic, diagnosis_lines
from ._render import renders

__all__ = [
    "DIFF_LINE_CHARS",
    "MAX_PATCH_SUMMARY",
    "DiffHunk",
    "DirListing",
    "FileEdited",
    "FileRead",
    "FileWritten",
    "FolderEntry",
    "LandedEdit",
    "LooseHunk",
    "PatchApplied",
    "PatchedFile",
    "Undone",
    "UnifiedDiff",
    "diff_lines",
    "diff_text",
]

DIFF_LINE_CHARS = 300  # characters of one diff line
MAX_PATCH_SUMMARY = 300  # 'M a.py' lines of apply_patch shown
_SURROGATES = re.compile("[\ud800-\udfff]")  # a file name's stray bytes, as files' diffs show them


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- list_dir ---------------------------------------------------------------------------


class FolderEntry(_Data):
    """One entry of a folder: its name and root-relative path, and what it is.

    ``size``: a file's bytes (None for anything else, and for a protected file);
    ``target``: where a link leads, root-relative (None when it leads outside the root,
    ``outside``, or when the link itself is protected); ``protected``: the entry, or what
    a link leads to, is protected (shown to exist, never read, its size not shown).
    """

    name: str
    path: str
    kind: Literal["file", "folder", "link", "special"]
    size: int | None = None
    target: str | None = None
    outside: bool = False
    protected: bool = False


class DirListing(Result):
    """``list_dir``: a folder's entries, folders first, each group by name; ``more``:
    entries past the cap, not shown (nor looked at)."""

    kind: Literal["listing"] = "listing"
    path: str
    entries: list[FolderEntry]
    more: int = 0


def _entry_line(entry: FolderEntry) -> str:
    if entry.kind == "link" and entry.outside:
        return f"{entry.path}@ -> (outside the root, not followed)"
    if entry.kind == "link" and entry.target is not None:
        return f"{entry.path}@ -> {entry.target}" + ("  [protected]" if entry.protected else "")
    if entry.protected:
        return f"{entry.path}{'/' if entry.kind == 'folder' else ''}  [protected]"
    if entry.kind == "folder":
        return f"{entry.path}/"
    if entry.kind == "file":
        return f"{entry.path}  ({entry.size}b)"
    return f"{entry.path}  (special file, not readable)"


@renders(DirListing)
def _listing_text(result: DirListing) -> str:
    if not result.entries and not result.more:
        return f"{result.path}/ is empty"
    lines = [_entry_line(entry) for entry in result.entries]
    if result.more:
        lines.append(more_note(result.more, "entries", "list a subfolder, or use find"))
    return "\n".join(lines)


# -- read_file --------------------------------------------------------------------------


class FileRead(Result):
    """``read_file``: a window of a file's lines.

    ``content`` says what was read: ``text`` (``lines``, the file's lines ``first`` to
    ``last``, 1-based, each cut at MAX_LINE characters with a note saying how many more
    it has) or ``empty`` (a file of 0 bytes: no lines). ``total``: the file's lines when
    known, None when the file is too big to count past the window; the window reaches the
    end when ``total == last``. ``size``: the file's bytes; ``encoding``: how its bytes were
    decoded (``utf-8``, or the UTF-16/32 codec its BOM names). ``symbol``: the definition
    ``read_file(symbol=...)`` read (the window is its lines), and ``note`` the other
    definitions that name matched, in a line that says how to read them.
    """

    kind: Literal["read"] = "read"
    path: str
    content: Literal["text", "empty"] = "text"
    size: int
    encoding: str = "utf-8"
    first: int = 0
    last: int = 0
    total: int | None = 0
    lines: list[str] = Field(default_factory=list)
    symbol: str = ""
    note: str = ""


def _window_text(result: FileRead) -> str:
    first, last = result.first, result.last
    body = "\n".join(f"{n}\t{text}" for n, text in enumerate(result.lines, first))
    if result.total == last:
        return body if first == 1 else f"{body}\n[lines {first}-{last}; end of file]"
    total = f"of a {human_size(result.size)} file" if result.total is None else (
        f"of {result.total}")
    return (f"{body}\n[showing lines {first}-{last} {total}; read_file(path={result.path!r}, "
            f"start={last + 1}) for more, or grep to find a line]")


@renders(FileRead)
def _read_text(result: FileRead) -> str:
    if result.content == "empty":
        return f"{result.path} is empty ({result.size} bytes)"
    text = _window_text(result)
    return f"{text}\n{result.note}" if result.note else text


# -- diffs ------------------------------------------------------------------------------


class DiffHunk(_Data):
    """One hunk of a unified diff: its header's ranges (``old_start``/``new_start`` as the
    ``@@`` line says them: 1-based, the line before for an empty range), its lines as
    shown (' ', '-' or '+' then the text, each cut at DIFF_LINE_CHARS characters), and
    ``cut``: lines of the hunk left out by the diff's cap."""

    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: list[str]
    cut: int = 0


class UnifiedDiff(_Data):
    """A capped unified diff of what changed in one file (``old_path`` -> ``new_path``,
    the same path unless it moved). ``more_places``: changed places after the last hunk,
    left out by the cap; ``see``: the file to read for what a cut left out ("" when the
    cut note names none)."""

    old_path: str
    new_path: str
    hunks: list[DiffHunk]
    more_places: int = 0
    see: str = ""


def _shown(line: str) -> str:
    return clip_line(_SURROGATES.sub("\ufffd", line), DIFF_LINE_CHARS)


def diff_lines(diff: UnifiedDiff | None) -> list[str]:
    """The lines of ``diff``: ``---``/``+++`` headers, then each hunk, and a line where the
    cap cut it (none for no diff)."""
    if diff is None:
        return []
    hint = f"; read_file {diff.see} to see the result" if diff.see else ""
    out = [_shown(f"--- {diff.old_path}"), _shown(f"+++ {diff.new_path}")]
    for hunk in diff.hunks:
        out.append(f"@@ -{hunk.old_start},{hunk.old_lines} +{hunk.new_start},{hunk.new_lines} @@")
        out += hunk.lines
        if hunk.cut:
            out.append(_shown(f"[... {hunk.cut} more diff lines not shown{hint}]"))
    if diff.more_places:
        out.append(_shown(f"[... {diff.more_places} more changed places not shown{hint}]"))
    return out


def diff_text(diff: UnifiedDiff | None) -> str:
    return "\n".join(diff_lines(diff))


# -- write_file, edit_file, apply_patch, undo_edit --------------------------------------


class _Checked(Result):
    """A change the syntax gate checked: ``warnings`` are its lines for files that no
    longer parse (the gate's own words, one per file); ``diagnostics``: what the checkers
    found that the change introduced (errors first, within the caps), and ``diagnosis``
    the rest they said (None: no changed file is one a checker reads)."""

    warnings: list[str] = Field(default_factory=list)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    diagnosis: Diagnosis | None = None


class FileWritten(_Checked):
    """``write_file`` (and a web tool's ``save``): the file was ``created`` or
    overwritten with ``bytes`` bytes."""

    kind: Literal["write"] = "write"
    path: str
    created: bool
    bytes: int


class LandedEdit(_Data):
    """How one edit of an edit_file call landed: the places it replaced, and whether
    ``old`` matched exactly or loosely, ``ignored`` saying what the loose match forgave
    (``indentation``, ``line-number prefixes``...)."""

    replacements: int
    match: Literal["exact", "loose"] = "exact"
    ignored: list[str] = Field(default_factory=list)


class FileEdited(_Checked):
    """``edit_file``: each edit of the call in order (``edits``), the places replaced in
    all (``replacements``), and the capped diff of what changed (None when the text is
    the same line for line)."""

    kind: Literal["edit"] = "edit"
    path: str
    edits: list[LandedEdit]
    replacements: int
    diff: UnifiedDiff | None = None


class LooseHunk(_Data):
    """A hunk of a patch (1-based, in its file's section) that matched loosely, and what
    was ``ignored`` (``indentation``...)."""

    hunk: int
    ignored: str


class PatchedFile(_Data):
    """One file a patch changes: ``M`` (modified), ``A`` (added), ``D`` (deleted) or ``R``
    (moved from ``path`` to ``new_path``, maybe changed too); its hunks that matched
    loosely; its diff as shown (None when not shown: an added or deleted file outside a
    dry run, a move that changes no line, or past the cap of the diffs)."""

    op: Literal["M", "A", "D", "R"]
    path: str
    new_path: str | None = None
    loose: list[LooseHunk] = Field(default_factory=list)
    diff: UnifiedDiff | None = None


class PatchApplied(_Checked):
    """``apply_patch``: the files it changes (would change, with ``dry_run``), in the
    order the patch names them. ``changes_nothing``: every file already holds what the
    patch asks for (nothing was written). ``diffs_cut``: files whose diff the cap of the
    diffs left out."""

    kind: Literal["patch"] = "patch"
    dry_run: bool = False
    changes_nothing: bool = False
    files: list[PatchedFile] = Field(default_factory=list)
    diffs_cut: int = 0


class Undone(Result):
    """``undo_edit``: the file was ``restored`` to what it held before the run, ``removed``
    (the run created it), or was ``already`` as it was (created and removed again)."""

    kind: Literal["undo"] = "undo"
    path: str
    outcome: Literal["restored", "removed", "already"]


def _with_warnings(head: str, result: _Checked, diff: UnifiedDiff | None = None) -> str:
    return "\n".join([head, *diff_lines(diff), *result.warnings,
                      *diagnosis_lines(result.diagnostics, result.diagnosis)])


@renders(FileWritten)
def _written_text(result: FileWritten) -> str:
    verb = "created" if result.created else "overwrote"
    return _with_warnings(f"{verb} {result.path} ({result.bytes} bytes)", result)


def _matched(ignored: list[str]) -> str:
    return f"matched ignoring {' and '.join(ignored)}" if ignored else ""


@renders(FileEdited)
def _edited_text(result: FileEdited) -> str:
    count = result.replacements
    noun = "replacement" if count == 1 else "replacements"
    if len(result.edits) == 1:
        said = _matched(result.edits[0].ignored)
        head = f"edited {result.path} ({count} {noun}{'; ' + said if said else ''})"
    else:
        notes = "".join(f"; edit {n} {_matched(edit.ignored)}"
                        for n, edit in enumerate(result.edits, 1) if edit.ignored)
        head = f"edited {result.path} ({len(result.edits)} edits, {count} {noun}{notes})"
    return _with_warnings(head, result, result.diff)


def _patched_line(file: PatchedFile) -> str:
    notes = "; ".join(f"hunk {h.hunk} matched ignoring {h.ignored}" for h in file.loose)
    notes = f" ({notes})" if notes else ""
    if file.op == "R":
        return f"R {file.path} -> {file.new_path}{notes}"
    return f"{file.op} {file.path}{notes if file.op == 'M' else ''}"


@renders(PatchApplied)
def _patch_text(result: PatchApplied) -> str:
    if result.changes_nothing:
        return "the patch changes nothing: every file already holds what it asks for"
    head = ["dry run: nothing was changed; the patch would do this:"] if result.dry_run else []
    summary = clip_list([_patched_line(f) for f in result.files], MAX_PATCH_SUMMARY, "files",
                        "the diffs below cover the first ones")
    diffs = [line for file in result.files for line in diff_lines(file.diff)]
    if result.diffs_cut:
        diffs.append(f"[... diffs of {result.diffs_cut} more files not shown; read_file "
                     "them to see the result]")
    return "\n".join([*head, *summary, *diffs, *result.warnings,
                      *diagnosis_lines(result.diagnostics, result.diagnosis)])


@renders(Undone)
def _undone_text(result: Undone) -> str:
    if result.outcome == "restored":
        return f"restored {result.path} to what it held before this run changed it"
    if result.outcome == "removed":
        return f"removed {result.path} (this run created it)"
    return f"{result.path} is already as it was before this run (created and removed again)"
