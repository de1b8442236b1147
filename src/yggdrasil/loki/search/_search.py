"""find and grep over the root: ripgrep when it is installed, pure Python otherwise.

Both engines (``_rg.RgEngine``, ``_pysearch.PythonEngine``) walk the same files, skip
the same ones and return the same rows in the same order, so an observation does not
depend on whether ``rg`` is on PATH (only the regex dialect does: Rust vs Python).
This module checks the request, confines the start path through :class:`Root`, picks
an engine and answers with the typed result (``FoundFiles``, ``GrepMatches``), which
``results`` renders:

    src/app.py:12: def main():                 (grep; find prints one path per line)
    [... 40 more matches not shown; narrow the pattern, path or glob]
    [skipped: 12 ignored, 3 hidden, 2 binary; include_ignored=true searches ignored and hidden files]
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Literal, Protocol

from ..errors import PathError, ToolError
from ..files import Root
from ..outputs import Spill, SpillError
from ..results import FoundFiles, GrepMatches, Match, SearchSkips
from ._found import Accept, Found, Hit, Pattern, Query
from ._globs import GlobError, glob_literal, glob_matcher, glob_test, rebase_ignore_text
from ._protected import rg_overrides
from ._pysearch import COUNT_LIMIT, PythonEngine, grep_output
from ._rg import RgEngine, find_rg
from ._walk import IGNORE_NAMES, read_ignore_text

Backend = Literal["auto", "rg", "python"]


class SearchEngine(Protocol):
    name: str

    def find(self, query: Query, accept: Accept) -> Found: ...

    def grep(self, query: Query, pattern: Pattern) -> Found: ...


@dataclass
class Search:
    """find/grep bound to one root; ``backend`` forces an engine ("auto" prefers rg)."""

    root: Root
    backend: Backend = "auto"
    spill: Spill | None = None  # the session's kept outputs, which grep reads by id

    @cached_property
    def _overrides(self) -> list[str] | None:
        """ripgrep's globs for the root's protected files (the root never changes them)."""
        return rg_overrides(self.root.protect)

    def engine(self) -> SearchEngine:
        if self.backend == "python":
            return PythonEngine(self.root)
        exe = find_rg()
        overrides = self._overrides
        if exe is not None and overrides is not None:
            return RgEngine(self.root, exe, overrides)
        if self.backend == "rg":
            raise ToolError("ripgrep 14 (rg) is not installed; pip install 'yggdrasil-loki[search]'"
                            if exe is None else "ripgrep cannot skip these protected globs "
                            "(an exception that is not a plain file name); use the Python engine")
        return PythonEngine(self.root)

    def find(self, pattern: str, path: str = ".", include_ignored: bool = False) -> FoundFiles:
        accept = path_matcher(pattern)
        # A name glob also goes in the query: the Python walk then skips other names early.
        name_glob = "" if "/" in pattern.strip() else pattern.strip()
        query = replace(self._query(path, include_ignored, name_glob),
                        literal=glob_literal(pattern.strip().removeprefix("/")))
        found = self.engine().find(query, accept)
        return FoundFiles(paths=[str(r) for r in found.rows], **_facts(pattern, query, found))

    def grep(self, pattern: str, path: str = ".", glob: str = "", ignore_case: bool = False,
             include_ignored: bool = False) -> GrepMatches:
        if "\n" in pattern:
            raise ToolError("pattern contains a line break; grep matches one line at a time")
        if "/" in glob:
            raise ToolError(f"glob {glob!r} matches file names only; pass the folder as path")
        _check_glob(glob)
        if path.strip().startswith("output://"):
            query = Query(self.root.path, path.strip(), True, include_ignored, (), glob)
            found = grep_output(self._output(path), path.strip(), Pattern(pattern, ignore_case))
        else:
            query = self._query(path, include_ignored, glob)
            found = self.engine().grep(query, Pattern(pattern, ignore_case))
        hits = [h for h in found.rows if isinstance(h, Hit)]
        return GrepMatches(matches=[Match(path=h.path, line=h.line, text=h.text) for h in hits],
                           **_facts(pattern, query, found))

    def _output(self, output_id: str) -> str:
        """The file of one of this session's kept outputs; ToolError for any other id."""
        if self.spill is None:
            raise ToolError(f"{output_id!r}: this toolbox keeps no outputs (outputs.keep_whole "
                            "is off); give a file or folder inside the root")
        try:
            return str(self.spill.path_of(output_id))
        except SpillError as exc:
            raise ToolError(str(exc), category="path") from None

    def _query(self, path: str, include_ignored: bool, name_glob: str = "") -> Query:
        real = self.root.resolve(path)
        rel = self.root.rel(real)
        st = self.root.stat(real)
        if st is None:
            raise PathError(f"{rel} does not exist; give a file or folder inside the root")
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise PathError(f"{rel} is not a regular file or folder; only those can be searched")
        if ".git" in rel.split("/"):
            raise PathError(f"{rel} is inside .git, which search always skips; use list_dir")
        is_file = stat.S_ISREG(st.st_mode)
        rules = () if include_ignored or is_file else self._parent_rules(rel)
        return Query(self.root.path, rel, is_file, include_ignored, rules, name_glob)

    def _parent_rules(self, start: str) -> tuple[str, ...]:
        """Ignore lines of the folders between the root and ``start``, rebased to the root.

        Engines read the ignore files at and below the start folder themselves; these
        come last in precedence, .gitignore lines first so that .ignore ones win.
        """
        if start == ".":
            return ()
        parts = tuple(start.split("/"))
        texts = [self._ignore_texts(parts[:i]) for i in range(len(parts))]
        lines: list[str] = []
        for name in reversed(IGNORE_NAMES):
            for i, found in enumerate(texts):
                text = found.get(name)
                lines += rebase_ignore_text(text, "/".join(parts[:i])) if text else []
        return tuple(lines)

    def _ignore_texts(self, folder: tuple[str, ...]) -> dict[str, str]:
        """name -> text of the ignore files in ``folder``, read as the Python walk reads them."""
        try:
            with self.root.folder_fd(folder) as fd:
                rel = "/".join(folder) or "."
                return {name: text for name in IGNORE_NAMES
                        if (text := read_ignore_text(self.root, fd, rel, name))}
        except (PathError, OSError):
            return {}


def path_matcher(pattern: str) -> Accept:
    """find's test: a glob without '/' matches the file name, one with '/' the whole
    root-relative path (``*`` stays inside a folder, ``**`` crosses folders)."""
    glob = pattern.strip()
    if not glob:
        raise ToolError("pattern is empty; use '*' to list every file, or '*.py'")
    if glob.endswith("/"):
        glob += "**"
    try:
        # Without '/': '*' and '?' never match '/', so after any '.../' this is the name.
        return glob_test(glob.removeprefix("/"), any_folder="/" not in glob)
    except GlobError as exc:
        raise ToolError(str(exc)) from exc


def _check_glob(glob: str) -> None:
    try:
        glob_matcher(glob, literal_separator=False)
    except GlobError as exc:
        raise ToolError(str(exc)) from exc


def _facts(pattern: str, query: Query, found: Found) -> dict[str, Any]:
    """What find and grep say besides their rows: the cut and what was skipped."""
    return {"pattern": pattern, "start": query.start, "more": found.more,
            "more_at_least": found.over, "counted_to": COUNT_LIMIT if found.over else 0,
            "include_ignored": query.include_ignored,
            "skipped": SearchSkips(**found.skipped, before_cut=found.over)}
