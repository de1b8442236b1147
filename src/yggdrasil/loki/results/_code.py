"""What the code tools answer: outlines, the definitions find_symbol found, a repo map.

The text is DESIGN.md's: ``kind name(signature)  L<start>-<end>`` with members indented
under their owner (outline, a folder's outline and the repo map, under a ``path:`` line
per file), ``path:line: kind Owner.name(signature)`` (find_symbol), then the notes saying
what was cut, what was not parsed and why, and what grep found where tree-sitter could
not help.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ._base import Result
from ._render import render_text, renders
from ._search import GrepMatches, Match, SearchSkips, match_line, skip_note

__all__ = ["CodeScan", "Definition", "FileOutline", "FolderOutline", "FoundDefinition",
           "OutlineByGrep", "OutlinedFile", "RepoMap", "SymbolsFound", "definition_line",
           "joined_signature", "repo_map_head", "repo_map_notes", "scan_note_lines"]

MAX_INDENT = 8  # deeper members are indented no further


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Definition(_Data):
    """One definition: its kind (function, method, class, constant...), name, the dotted
    names of the definitions around it (``scope``), the source between the name and the
    body (``signature``), its name's line, its last line, its first line with decorators
    and doc comments, and how deeply it is nested (0 at the top of the file)."""

    kind: str
    name: str
    scope: str = ""
    signature: str = ""
    line: int
    end: int
    first: int
    depth: int = 0

    @property
    def qualified(self) -> str:
        return f"{self.scope}.{self.name}" if self.scope else self.name

    def header(self, *, qualified: bool = False) -> str:
        """'kind name(signature)' ('kind Owner.name(...)' qualified)."""
        return definition_header(self.kind, self.name, self.scope, self.signature, qualified)


class FoundDefinition(Definition):
    """A definition find_symbol found, with its root-relative path."""

    path: str


class OutlinedFile(_Data):
    """One file of a folder's outline or of a repo map: the definitions shown."""

    path: str
    definitions: list[Definition]


class CodeScan(_Data):
    """What a walk of the tree could not read as code, and how it went: files over the
    size cap (``size_cap`` bytes), unreadable ones, files of extensions no grammar reads
    (``no_grammar``: extension and count, most first), why the walk stopped early, and
    the note of a long first build."""

    too_large: int = 0
    size_cap: int = 0
    unreadable: int = 0
    no_grammar: list[tuple[str, int]] = Field(default_factory=list)
    stopped: str = ""
    built: str = ""


class FileOutline(Result):
    """``outline`` of one source file: the definitions shown, in file order.

    ``found``: definitions the parse kept; ``shown_depth``: the deepest nesting level
    shown (deeper ones, ``nested_hidden``, are left out first when the outline is over
    ``limit`` lines); ``more``: definitions past the limit. ``syntax_errors``: lines near
    which the parser met errors; ``parsed_to``: the line where a slow grammar's parse
    stopped (0: the whole file); ``dropped``: definitions not kept (nested deeper than
    ``max_depth`` or past the cap)."""

    kind: Literal["outline"] = "outline"
    path: str
    language: str
    lines: int
    found: int
    definitions: list[Definition]
    shown_depth: int = 0
    nested_hidden: int = 0
    more: int = 0
    limit: int = 0
    syntax_errors: list[int] = Field(default_factory=list)
    parsed_to: int = 0
    dropped: int = 0
    max_depth: int = 0


class OutlineByGrep(Result):
    """``outline`` where tree-sitter cannot help: why (``reason``: ``no_grammars`` the
    extra is not installed, ``too_large`` over the size cap, ``no_grammar`` for this kind
    of file; ``why`` in words) and the lines grep finds that look like definitions."""

    kind: Literal["outline_by_grep"] = "outline_by_grep"
    path: str
    reason: Literal["no_grammars", "too_large", "no_grammar"]
    why: str
    found: GrepMatches


class FolderOutline(Result):
    """``outline`` of a folder: each source file's top definitions and their members.

    ``more_files``: source files with definitions not shown; ``cut``: the outline
    reached ``limit`` lines."""

    kind: Literal["folder_outline"] = "folder_outline"
    path: str
    files: list[OutlinedFile]
    more_files: int = 0
    cut: bool = False
    limit: int = 0
    scan: CodeScan = Field(default_factory=CodeScan)
    skipped: SearchSkips = Field(default_factory=SearchSkips)


class SymbolsFound(Result):
    """``find_symbol``: the definitions named ``name``, best first.

    ``ignoring_case``: none matched with the exact case, these match ignoring it;
    ``more``: matches past those shown; ``indexed``: source files looked at. When none
    matched (or tree-sitter is not installed, ``grammars`` false): ``word``, the word
    grep looked for ('' when the name has none), and ``uses``, the lines where it does."""

    kind: Literal["find_symbol"] = "find_symbol"
    name: str
    of_kind: str = ""  # the kind= asked for ('' any)
    path: str
    definitions: list[FoundDefinition] = Field(default_factory=list)
    ignoring_case: bool = False
    more: int = 0
    indexed: int = 0
    grammars: bool = True
    word: str = ""
    uses: list[Match] = Field(default_factory=list)
    include_ignored: bool = False
    scan: CodeScan = Field(default_factory=CodeScan)
    skipped: SearchSkips = Field(default_factory=SearchSkips)


class RepoMap(Result):
    """``repo_map``: the most referenced definitions that fit in ``budget`` characters,
    grouped by file in rank order. ``source_files``: files with definitions under
    ``path``; ``definitions``: how many they define; ``files``: what the map shows."""

    kind: Literal["repo_map"] = "repo_map"
    path: str
    budget: int
    source_files: int
    definitions: int
    files: list[OutlinedFile]
    scan: CodeScan = Field(default_factory=CodeScan)
    skipped: SearchSkips = Field(default_factory=SearchSkips)

    @property
    def found(self) -> bool:
        """Whether it found any definition under its path."""
        return self.source_files > 0


def joined_signature(signature: str) -> str:
    """'(a, b)' and '<T>' and ': Int' follow the name; 'extends Base' and '= 3' get a space."""
    if not signature:
        return ""
    tight = signature[0] in "([:" or (signature[0] == "<" and signature[1:2] not in (" ", ""))
    return signature if tight else f" {signature}"


def definition_header(kind: str, name: str, scope: str, signature: str,
                      qualified: bool = False) -> str:
    """'kind name(signature)' as outline shows a definition ('kind Owner.name(...)'
    qualified): the result's and the code index's definitions say it alike."""
    shown = f"{scope}.{name}" if qualified and scope else name
    return f"{kind} {shown}{joined_signature(signature)}"


class _Headed(Protocol):
    @property
    def line(self) -> int: ...
    @property
    def end(self) -> int: ...
    def header(self, *, qualified: bool = ...) -> str: ...


def definition_line(definition: _Headed, depth: int) -> str:
    """``kind name(signature)  L<start>-<end>``, indented ``depth`` levels (at most 8): a
    line of an outline or a map, and what a definition costs in one."""
    indent = "  " * min(depth, MAX_INDENT)
    return f"{indent}{definition.header()}  L{definition.line}-{definition.end}"


def scan_note_lines(scan: CodeScan) -> list[str]:
    """Why some files were not read: the counts, and that grep reads them."""
    notes = []
    missed = []
    if scan.too_large:
        missed.append(f"{scan.too_large} over {scan.size_cap >> 20} MB")
    if scan.unreadable:
        missed.append(f"{scan.unreadable} unreadable")
    if missed:
        notes.append(f"[not parsed: {', '.join(missed)}; grep searches them]")
    if scan.no_grammar:
        kinds = scan.no_grammar
        shown = ", ".join(f"{ext} {n}" for ext, n in kinds[:5])
        more = f", {len(kinds) - 5} more kinds" if len(kinds) > 5 else ""
        total = sum(n for _, n in kinds)
        notes.append(f"[no grammar for {total} files ({shown}{more}); grep searches them]")
    if scan.stopped:
        notes.append(f"[{scan.stopped}; give a narrower path]")
    if scan.built:
        notes.append(scan.built)
    return notes


def _file_lines(files: list[OutlinedFile]) -> list[str]:
    lines: list[str] = []
    for file in files:
        lines.append(f"{file.path}:")
        lines += [definition_line(d, d.depth + 1) for d in file.definitions]
    return lines


@renders(FileOutline)
def _outline_text(result: FileOutline) -> str:
    rel = result.path
    notes = []
    if result.syntax_errors:
        where = ", ".join(f"L{n}" for n in result.syntax_errors)
        notes.append(f"[{rel}: syntax errors near {where}; definitions there may be missing "
                     "or cut short]")
    if result.parsed_to:
        notes.append(f"[{rel}: parsed up to L{result.parsed_to} only: the {result.language} "
                     "grammar is too slow on this file; definitions below it are not listed]")
    if result.dropped:
        notes.append(f"[{rel}: {result.dropped} definitions not listed (nested deeper than "
                     f"{result.max_depth} levels, or past the first 10,000)]")
    if not result.found:
        return "\n".join([f"no definitions found in {rel} ({result.language}, "
                          f"{result.lines} lines)", *notes])
    lines = [definition_line(d, d.depth) for d in result.definitions]
    if result.nested_hidden:
        lines.append(f"[... {result.nested_hidden} definitions nested deeper than "
                     f"{result.shown_depth + 1} levels not shown; find_symbol(name) finds them]")
    if result.more:
        lines.append(f"[... {result.more} more definitions not shown; outline is capped at "
                     f"{result.limit} lines: read_file(path, start=...) or find_symbol(name)]")
    return "\n".join(lines + notes)


@renders(OutlineByGrep)
def _by_grep_text(result: OutlineByGrep) -> str:
    if not result.found.matches:
        return f"[{result.why}; grep finds no lines that look like definitions]"
    return (f"[{result.why}; lines that look like definitions, found by grep:]\n"
            f"{render_text(result.found)}")


@renders(FolderOutline)
def _folder_text(result: FolderOutline) -> str:
    lines = _file_lines(result.files)
    if result.cut or result.more_files:
        lines.append(f"[... outline cut at {result.limit} lines; {result.more_files} more source "
                     "files not shown; outline a subfolder or one file]")
    if not lines:
        lines = [f"no definitions found under {result.path}"]
    notes = [*scan_note_lines(result.scan), skip_note(result.skipped, False)]
    return "\n".join(lines + notes).rstrip()


def _uses_text(result: SymbolsFound, why: str) -> str:
    if not result.word:
        return why
    if not result.uses:
        return f"{why}; grep finds no use of {result.word!r} either"
    return "\n".join([f"[{why}; grep finds {result.word!r} here:]",
                      *(match_line(m) for m in result.uses)])


@renders(SymbolsFound)
def _symbols_text(result: SymbolsFound) -> str:
    if not result.grammars:
        return _uses_text(result, "tree-sitter grammars are not installed "
                                  "(pip install 'yggdrasil-loki[code]')")
    notes = [skip_note(result.skipped, result.include_ignored), *scan_note_lines(result.scan)]
    if not result.definitions:
        what = f"{result.of_kind} " if result.of_kind else ""
        why = (f"no {what}definition named {result.name!r} in {result.indexed} source files "
               f"under {result.path}")
        return "\n".join(n for n in [_uses_text(result, why), *notes] if n)
    rows = [f"{d.path}:{d.line}: {d.header(qualified=True)}" for d in result.definitions]
    if result.ignoring_case:
        rows.insert(0, f"[no definition matches {result.name!r} with this case; these match "
                       "ignoring case]")
    if result.more:
        rows.append(f"[... {result.more} more definitions not shown; narrow with kind=, a path, "
                    "or a dotted name like Class.method]")
    return "\n".join(r for r in rows + notes if r)


def repo_map_notes(result: RepoMap) -> list[str]:
    """The notes under a map (what was not parsed, what was skipped)."""
    return [n for n in [*scan_note_lines(result.scan), skip_note(result.skipped, False)] if n]


def repo_map_head(path: str, definitions: int, source_files: int) -> str:
    """The map's first line, with ``{}`` where the shown counts go."""
    return (f"[repo map of {path}: {{}} of {definitions} definitions in {{}} of {source_files} "
            "files, most referenced first; outline(path) and find_symbol(name) show more]")


@renders(RepoMap)
def _map_text(result: RepoMap) -> str:
    notes = repo_map_notes(result)
    if not result.source_files:
        return "\n".join([f"no definitions found under {result.path}", *notes])
    head = repo_map_head(result.path, result.definitions, result.source_files)
    kept = sum(len(f.definitions) for f in result.files)
    return "\n".join([head.format(kept, len(result.files)), *_file_lines(result.files), *notes])
