"""The code tools of one root: outline, find_symbol, repo_map, and symbol line ranges.

Each answer comes from the root's shared :class:`Index` (one per root per process,
built lazily on first use). Where tree-sitter cannot help (no grammar for the file, a
file over the size cap, the ``code`` extra not installed) the tools say so and fall
back to what grep can say: lines that look like definitions, or where a name is used.
"""

from __future__ import annotations

import hashlib
import logging
import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import Annotated, Literal

from annotated_types import Interval, MaxLen

from ..errors import PathError, ToolError
from ..files import Root
from ..results import (
    MAX_HITS,
    FileOutline,
    FolderOutline,
    OutlineByGrep,
    OutlinedFile,
    RepoMap,
    SearchSkips,
    SymbolsFound,
    human_size,
    repo_map_head,
    repo_map_notes,
)
from ..search import Search
from ._extract import Outline, grammars_available, shallow
from ._index import MAX_FILE_BYTES, Entry, Index, Scan
from ._languages import extension_of
from ._match import MAX_NAME, KindName, NameQuery
from ._pool import give_back
from ._render import (
    MAX_OUTLINE,
    code_scan,
    definition,
    file_outline,
    found_definition,
    map_files,
)
from ._roots import cache_wanted, held_for
from ._store import cache_key

__all__ = ["MAX_BUDGET", "MIN_BUDGET", "Code"]

log = logging.getLogger("yggdrasil.loki.code")

MIN_BUDGET, MAX_BUDGET = 200, 100_000  # repo_map's budget, in characters
_FOLDER_FILES = 200  # files a folder outline parses; the rest are counted
_MAPS_KEPT = 8  # maps kept by content, per process (see _Maps)
_FALLBACK_HITS = 20
_INSTALL = "pip install 'yggdrasil-loki[code]'"
# Lines that look like definitions in most languages; valid for ripgrep and Python re alike.
_DEFINITION_LINES = (
    r"^\s*((export|public|private|protected|internal|static|async|abstract|final|override|"
    r"pub|local|inline)\s+)*(def|class|function|func|fn|sub|proc|procedure|module|struct|"
    r"enum|interface|trait|type|impl|namespace|object|record|macro|defun|defmacro|defn|"
    r"const|let|var)\b|^#{1,6}\s")


def _skips(counts: dict[str, int]) -> SearchSkips:
    return SearchSkips(**counts)


def _key(path: Path) -> bytes | None:
    try:
        return cache_key(path)
    except (OSError, ValueError) as exc:
        log.warning("no code cache on disk: %s", exc)
        return None


class Code:
    """The code tools bound to one root; ``cache`` keeps the index on disk (see _store)."""

    def __init__(self, root: Root, *, cache: bool | None = None,
                 cache_key: Path | None = None) -> None:
        """``cache``: keep the index on disk, signed with the key in ``cache_key`` (a file
        commands can neither read nor write; made when missing). Without a key file, or
        one that cannot be read, nothing is kept on disk."""
        self.root = root
        # The fallback greps use the Python engine: in process, every file opened from its
        # folder's descriptor with O_NOFOLLOW, so no ripgrep is started for a fallback.
        self.search = Search(root, backend="python")
        self.cache = _key(cache_key) if cache_wanted(cache) and cache_key else None

    @property
    def index(self) -> Index:
        return held_for(self.root, self.cache).index

    # -- outline ------------------------------------------------------------------------

    def outline(self, path: str = ".") -> FileOutline | FolderOutline | OutlineByGrep:
        real = self._resolve(path)
        rel = self.root.rel(real)
        st = self.root.stat(real)
        if st is None:
            raise PathError(f"{rel} does not exist; give a source file or a folder")
        if stat.S_ISDIR(st.st_mode):
            return self._outline_folder(rel)
        if not stat.S_ISREG(st.st_mode):
            raise PathError(f"{rel} is not a regular file; give a source file or a folder")
        if not grammars_available():
            return self._definition_lines(rel, "no_grammars", f"tree-sitter grammars are not "
                                                              f"installed ({_INSTALL})")
        entry = self._entry(rel)
        if entry.note == "too large":
            return self._definition_lines(rel, "too_large", f"{rel} is {human_size(entry.size)}"
                                          f"; outline parses files up to {MAX_FILE_BYTES >> 20} MB")
        if entry.outline is None:
            ext = extension_of(rel.rsplit("/", 1)[-1])
            return self._definition_lines(rel, "no_grammar", f"no grammar for {ext} files")
        return file_outline(rel, entry.outline)

    def _entry(self, rel: str) -> Entry:
        held = held_for(self.root, self.cache)
        entry = held.index.entry(rel)
        held.saved()
        if entry.note == "binary":
            raise ToolError(f"{rel} is a binary file; the code tools read source text")
        if entry.note == "unreadable":
            raise PathError(f"{rel} could not be read (it changed or vanished); try again")
        return entry

    def _outline_folder(self, rel: str) -> FolderOutline | OutlineByGrep:
        if not grammars_available():
            return self._definition_lines(rel, "no_grammars", f"tree-sitter grammars are not "
                                                              f"installed ({_INSTALL})")
        scan = self._scan(rel, limit=_FOLDER_FILES)
        files: list[OutlinedFile] = []
        lines = 0  # the outline's lines so far; the last file shown may be cut short
        for file_rel, entry in scan.files:
            outline = entry.outline
            if outline is None or not len(outline):
                continue
            if lines >= MAX_OUTLINE:
                break
            body = [s for s, keep in zip(outline.symbols, shallow(outline), strict=True) if keep]
            room = MAX_OUTLINE - lines - 1
            files.append(OutlinedFile(path=file_rel,
                                      definitions=[definition(s) for s in body[:room]]))
            lines += 1 + len(body)
        more = sum(1 for _, e in scan.files if e.outline is not None and len(e.outline)) - len(files)
        return FolderOutline(path=scan.start, files=files, more_files=more + scan.more,
                             cut=lines > MAX_OUTLINE, limit=MAX_OUTLINE, scan=code_scan(scan),
                             skipped=_skips(scan.skipped))

    def _definition_lines(self, rel: str, reason: Literal["no_grammars", "too_large",
                                                          "no_grammar"],
                          why: str) -> OutlineByGrep:
        found = self.search.grep(_DEFINITION_LINES, path=rel)
        return OutlineByGrep(path=rel, reason=reason, why=why, found=found)

    # -- find_symbol --------------------------------------------------------------------

    def find_symbol(self, name: Annotated[str, MaxLen(MAX_NAME)], kind: KindName | None = None,
                    path: str = ".", include_ignored: bool = False) -> SymbolsFound:
        query = NameQuery.parse(name, kind)
        of_kind = kind.strip() if kind else ""
        if not grammars_available():
            return SymbolsFound(name=query.text, of_kind=of_kind, path=path, grammars=False,
                                include_ignored=include_ignored, **self._uses(query, path))
        held = held_for(self.root, self.cache)
        settled = None if include_ignored else held.index.settled(path)
        if settled is not None:  # the kept answer, when nothing changed since it was made
            kept = held.found.get((query.text, of_kind, settled[0], include_ignored))
            if kept is not None and kept[0] == settled[1]:
                return kept[1]
        scan = self._scan(path, include_ignored=include_ignored, wanted=query)
        key = (query.text, of_kind, scan.start, include_ignored)
        hits = _matches(query, scan)
        found = SymbolsFound(name=query.text, of_kind=of_kind, path=scan.start,
                             indexed=scan.indexed, include_ignored=include_ignored,
                             scan=code_scan(scan), skipped=_skips(scan.skipped))
        if not hits and scan.partial:  # no grep beside a running build: it says so
            return found
        if not hits:  # (not kept: the uses grep finds may be in files the index skips)
            return found.model_copy(update=self._uses(query, path))
        found = found.model_copy(update={
            "definitions": [found_definition(rel, outline.symbol(j))
                            for _, rel, outline, j in hits[:MAX_HITS]],
            "ignoring_case": hits[0][0][0] == 1, "more": max(0, len(hits) - MAX_HITS)})
        if scan.version is not None and not scan.built:
            if len(held.found) > 64:
                held.found.clear()
            held.found[key] = (scan.version, found)
        return found

    def _uses(self, query: NameQuery, path: str) -> dict[str, object]:
        """When no definition is found: where the name's word appears, by grep."""
        word = re.sub(r"[^\w]", "", query.parts[-1].replace("*", "").replace("?", ""))
        if not word:
            return {}
        found = self.search.grep(rf"\b{word}\b", path=path)
        return {"word": word, "uses": found.matches[:_FALLBACK_HITS]}

    # -- repo_map -----------------------------------------------------------------------

    def repo_map(self, path: str = ".",
                 budget: Annotated[int, Interval(ge=MIN_BUDGET, le=MAX_BUDGET)] = 8000) -> RepoMap:
        if not MIN_BUDGET <= budget <= MAX_BUDGET:
            raise ToolError(f"budget is the map's size in characters, {MIN_BUDGET}-{MAX_BUDGET}; "
                            f"got {budget}")
        if not grammars_available():
            raise ToolError(f"repo_map needs the tree-sitter grammars: {_INSTALL}")
        scan = self._scan(path)
        held = held_for(self.root, self.cache)
        key = (scan.start, budget)
        kept = held.maps.get(key)
        if kept is not None and kept[0] == scan.version:
            return kept[1]  # answered from the kept listing, and nothing changed since
        files = [(rel, e) for rel, e in scan.files if e.outline is not None and len(e.outline)]
        total = sum(len(e.outline) for _, e in files if e.outline is not None)
        empty = RepoMap(path=scan.start, budget=budget, source_files=len(files),
                        definitions=total, files=[], scan=code_scan(scan),
                        skipped=_skips(scan.skipped))
        notes = repo_map_notes(empty)
        content = _MAPS.key(scan.start, budget, files, notes)
        mapped = _MAPS.get(content) or self._map(empty, files, notes)
        _MAPS.put(content, mapped)
        if scan.version is not None:
            if len(held.maps) > 16:
                held.maps.clear()
            held.maps[key] = (scan.version, mapped)
        return mapped

    def _map(self, empty: RepoMap, files: list[tuple[str, Entry]], notes: list[str]) -> RepoMap:
        if not files:
            return empty
        head = repo_map_head(empty.path, empty.definitions, empty.source_files)
        room = empty.budget - len(head) - 20 - sum(len(n) + 1 for n in notes)
        held = held_for(self.root, self.cache)
        with held.rank_lock:
            started = time.monotonic()
            ranked = held.ranker.rank(files)
            if time.monotonic() - started > 1.0:
                give_back(freeze=True)  # what a large ranking freed
        return empty.model_copy(update={"files": map_files(files, ranked, max(0, room))})

    # -- read_file(symbol=...) ----------------------------------------------------------

    def symbol_lines(self, path: str, symbol: str) -> tuple[int, int, str]:
        """First and last line of ``symbol`` in the file at ``path`` (with its decorators
        and doc comments), and a note naming other definitions that also matched."""
        real = self._resolve(path)
        rel = self.root.rel(real)
        if not grammars_available():
            raise ToolError(f"symbol= needs the tree-sitter grammars ({_INSTALL}); use "
                            f"grep(pattern=..., path={rel!r}) and read_file with start and end")
        entry = self._entry(rel)
        if entry.outline is None:
            why = "it is over the size cap" if entry.note else "no grammar reads this kind of file"
            raise ToolError(f"symbol= cannot find definitions in {rel}: {why}; use "
                            f"grep(pattern=..., path={rel!r}) and read_file with start and end")
        query = NameQuery.parse(symbol)
        found = sorted((q, i, s) for i, s in enumerate(entry.outline.symbols)
                       if (q := query.match(s)) is not None)
        if not found:
            names = [s.qualified for s in entry.outline.symbols[:60]]
            raise ToolError(f"no definition {symbol!r} in {rel}; it defines: {', '.join(names)}"
                            + (" ..." if len(entry.outline.symbols) > 60 else ""))
        best = found[0][2]
        others = [f"L{s.line} ({s.kind} {s.qualified})" for _, _, s in found[1:6]]
        note = (f"[{symbol!r} also matches {', '.join(others)}; read_file(path={rel!r}, "
                f"start=N) reads one of those]") if others else ""
        return best.first, best.end, note

    # -- shared -------------------------------------------------------------------------

    def _resolve(self, path: str) -> Path:
        """Root.resolve, with the race of a link swapped in mid-resolve (realpath then
        fails with EINVAL or ENOENT) reported as a path error, not a crash."""
        try:
            return self.root.resolve(path)
        except OSError as exc:
            raise PathError(f"{path} changed while it was being resolved ({exc.strerror}); "
                            "try again") from exc

    def _scan(self, path: str, **options: object) -> Scan:
        held = held_for(self.root, self.cache)
        scan = held.index.scan(path, **options)  # type: ignore[arg-type]
        held.saved()
        return scan


class _Maps:
    """Repository maps kept by what they were made from: every mapped file's path and the
    digest of its source, and the notes. A tree seen before at another path (a fleet
    worker's next copy of a repository, restored to the same commit) gets its map without
    ranking it again. A file whose digest is not known (loaded from the disk cache) makes
    the map not kept."""

    def __init__(self) -> None:
        self.kept: OrderedDict[bytes, RepoMap] = OrderedDict()
        self.lock = threading.Lock()

    @staticmethod
    def key(start: str, budget: int, files: list[tuple[str, Entry]],
            notes: list[str]) -> bytes | None:
        digest = hashlib.blake2b(f"{start}\0{budget}\0".encode(), digest_size=20)
        for rel, entry in files:
            if not entry.digest:
                return None
            digest.update(rel.encode("utf-8", "surrogateescape") + b"\0" + entry.digest)
        digest.update("\0".join(notes).encode("utf-8", "surrogateescape"))
        return digest.digest()

    def get(self, key: bytes | None) -> RepoMap | None:
        if key is None:
            return None
        with self.lock:
            found = self.kept.get(key)
            if found is not None:
                self.kept.move_to_end(key)
            return found

    def put(self, key: bytes | None, mapped: RepoMap) -> None:
        if key is None:
            return
        with self.lock:
            self.kept[key] = mapped
            while len(self.kept) > _MAPS_KEPT:
                self.kept.popitem(last=False)


_MAPS = _Maps()


Hit = tuple[tuple[int, ...], str, Outline, int]  # sort key, path, outline, position in it


def _matches(query: NameQuery, scan: Scan) -> list[Hit]:
    """Every matching definition with its sort key: exact case first, definitions before
    prototypes, code before tests, outer before nested, then walk order. When any match
    has the exact case, case-insensitive ones are left out."""
    if not query.is_glob:  # an exact-case match needs the very name: look for it first
        exact = [h for h in _hits(query, scan, query.parts[-1]) if h[0][0] == 0]
        if exact:
            return exact
    hits = _hits(query, scan, None)
    if hits and hits[0][0][0] == 0:
        hits = [h for h in hits if h[0][0] == 0]
    return hits


def _hits(query: NameQuery, scan: Scan, name: str | None) -> list[Hit]:
    """The matches, sorted; only definitions named exactly ``name`` when given. Read from
    the outlines' columns: a Symbol is made only where the owner must be matched."""
    hits: list[Hit] = []
    last = None if query.is_glob else query.parts[-1].lower()  # what a name must equal
    # a plain name found by that very name matches exactly, with no owner to check
    plain = name is not None and len(query.parts) == 1
    kinds = query.kinds
    for order, (rel, entry) in enumerate(scan.files):
        outline = entry.outline
        if outline is None:
            continue
        if name is not None:  # (thousands of files define __init__, each a few times)
            where: Sequence[int] = outline.named(name)
        elif last is not None:  # the names equal ignoring case, then where they are defined
            where = outline.named_any([t for t in outline.names() if t.lower() == last])
        else:
            where = range(len(outline))
        if not where:
            continue
        test = _is_test(rel)
        tables = None  # with the scopes (compressed): only when an owner must be matched
        for j, kind, depth, line in outline.facts(where):
            if plain:
                quality: int | None = 0 if kinds is None or kind in kinds else None
            else:
                if tables is None:
                    tables = outline.tables()
                quality = query.match(outline.symbol(j, tables))
            if quality is not None:
                key = (quality, kind == "prototype", test, depth, order, line)
                hits.append((key, rel, outline, j))
    hits.sort(key=itemgetter(0))
    return hits


_TEST_PATH = re.compile(r"(^|/)(tests?|testing|spec|__tests__)(/|$)|(^|/)test_[^/]*$|_test\.")


def _is_test(rel: str) -> bool:
    if "test" not in rel and "spec" not in rel:  # what every form of _TEST_PATH holds
        return False
    return _TEST_PATH.search(rel) is not None
