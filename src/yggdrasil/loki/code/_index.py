"""The code index of one root: what each file defines and which names it uses.

Built lazily and kept current by each file's size, mtime, ctime and inode: every call
walks the tree the way grep does (same ignore rules, same skipped counts) and reads
only files that are new or changed since the index last saw them, whatever changed
them (write_file, edit_file, a command, another program). Parsing (tree-sitter)
happens only for the files a question needs: ``find_symbol('Greeter')`` parses only
files that contain the word ``Greeter``, while ``repo_map`` needs them all.

A file read only to learn it cannot hold the name asked for is not parsed and its words
are not kept: a quick test of its bytes decides (the name, lowercased, is in the file,
lowercased). Parsing keeps the outline and the file's words, so a later question about
another name is answered from memory for every parsed file.

Every file is opened through ``Root`` (no link followed, regular files only); the walk
never yields a link, so a symlinked file is never parsed through the link. Bounds:
files over ``MAX_FILE_BYTES`` are not read, a call visits at most ``MAX_VISITS`` files,
and the index keeps at most ``MAX_ENTRIES`` files and about ``MAX_HELD`` bytes; past
that, answers are still computed, just not remembered.
"""

from __future__ import annotations

import codecs
import hashlib
import logging
import os
import stat
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import PathError
from ..files import Root
from ..search import Listing, PathCheck, Skips, list_files
from ..shell import Reader
from ._extract import Outline
from ._languages import Language, by_grammar, extension_of, language_for, language_of_script
from ._match import NameQuery
from ._names import NameIndex
from ._pool import MIN_FILES, Job, give_back, parse_all, parse_one
from ._tree import Tree, start_watch

__all__ = ["MAX_FILE_BYTES", "Entry", "Index", "Scan"]

MAX_FILE_BYTES = 2 << 20  # larger files are not parsed (generated code, bundles, data)
MAX_VISITS = 250_000  # files one call looks at (as many as the watch's blind files:
#                        a tree past this is walked by every call, and its last files
#                        never seen; at 100,000 a 150,000-file tree was)
MAX_SECONDS = 30.0  # one call stops walking after this long (what it parsed is kept)
MAX_ENTRIES = 250_000  # files the index remembers (MAX_HELD bounds their memory)
MAX_HELD = 1 << 30  # about this many bytes of names and definitions remembered
WATCH_FROM = 2_000  # files under the root from which the index follows change events
#                     instead of walking (smaller trees walk in a few milliseconds)
_HEAD = 256  # bytes read to find a #! line
_PACK_FROM = 64  # characters of words worth compressing
_SAY_AFTER = 5.0  # seconds: a longer build is reported (log, then a note in the answer)
_log = logging.getLogger("yggdrasil.loki.code")

Key = bytes  # size, mtime_ns, ctime_ns, inode, packed: 65 bytes a file (a tuple: ~200)
_KEY = struct.Struct("<QqqQ")


def file_key(st: os.stat_result) -> Key:
    return _KEY.pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def make_key(size: int, mtime_ns: int, ctime_ns: int, inode: int) -> Key:
    """A key from its fields; struct.error when one is out of range."""
    return _KEY.pack(size, mtime_ns, ctime_ns, inode)


def key_fields(key: Key) -> tuple[int, int, int, int]:
    size, mtime_ns, ctime_ns, inode = _KEY.unpack(key)
    return size, mtime_ns, ctime_ns, inode


_NO_KEY = make_key(0, 0, 0, 0)


@dataclass(slots=True)
class Entry:
    """One file as the index last saw it."""

    key: Key
    language: str = ""  # '' : no grammar for this file
    words: str | bytes | None = None  # its distinct identifier-like words, '\n'-separated
    #       and -framed (``names``); zlib-compressed once packed; None until it is parsed
    counts: bytes = b""  # uses of each name, same order, capped at 255
    outline: Outline | None = None  # parsed lazily
    note: str = ""  # why it is not indexed: 'binary', 'too large', 'unreadable'
    lacks: str = ""  # a word its bytes were last found not to hold (not parsed since)
    digest: bytes = b""  # of the source it was parsed from (b'': not known, e.g. loaded)

    @property
    def size(self) -> int:
        """The file's size in bytes when the index last saw it."""
        return key_fields(self.key)[0]

    @property
    def names(self) -> str | None:
        words = self.words
        if isinstance(words, bytes):
            return zlib.decompress(words).decode("utf-8", "surrogatepass")
        return words

    def pack(self) -> None:
        """Keep the words compressed (~2.2x smaller): on a large tree they are read only
        to rank a map, not on each call."""
        if isinstance(self.words, str) and len(self.words) > _PACK_FROM:
            self.words = zlib.compress(self.words.encode("utf-8", "surrogatepass"))

    def held(self) -> int:
        """About how many bytes this entry keeps alive (objects and their strings)."""
        outline = self.outline.held() if self.outline is not None else 0
        return len(self.words or "") + len(self.counts) + outline + 400


@dataclass
class Scan:
    """The answer of one walk: the files wanted, with what was skipped and why."""

    start: str
    files: list[tuple[str, Entry]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # grep's ignored/hidden/binary
    other: Counter[str] = field(default_factory=Counter)  # extension -> files without grammar
    too_large: int = 0
    unreadable: int = 0
    indexed: int = 0  # source files looked at (with a grammar, readable)
    more: int = 0  # wanted source files past the scan's limit (counted, not parsed)
    stopped: str = ""  # why the walk stopped early ('' : it did not)
    built: str = ""  # what a long first build cost, said once
    version: int | None = None  # the index's version, when answered from the kept listing
    partial: bool = False  # answered from what a running build has parsed so far


class Wanted(Protocol):
    """What a question needs from a file, tested on its words (in memory) or its bytes."""

    @property
    def word(self) -> str: ...  # what in_bytes looks for: equal words, equal answers

    def in_names(self, names: str) -> bool: ...

    def in_bytes(self, data: bytes) -> bool: ...




class Index:
    """The index of one root; thread-safe (calls take turns on its lock; a walk takes it
    one file at a time, so a call never waits for a whole walk)."""

    def __init__(self, root: Root, entries: dict[str, Entry] | None = None) -> None:
        self.root = root
        loaded = entries or {}
        # A disk copy written by a toolbox that protected less (or by an older version)
        # may hold protected files: they are dropped, and the copy rewritten without them.
        self.entries: dict[str, Entry] = {rel: e for rel, e in loaded.items()
                                          if root.covered(rel) is None}
        self.held = sum(e.held() for e in self.entries.values())
        self.changed = len(loaded) - len(self.entries)  # entries changed since the last save
        self.lock = threading.Lock()
        self.names = NameIndex()
        for rel, entry in self.entries.items():
            self.names.add(rel, entry.outline)
        self.walked = 0  # files the last walk of the whole root listed
        self.whole = False  # once a walk parsed everything: keep every file parsed
        self.watch: Reader | None = None  # of the root's changes feed, from before a whole
        #                                   walk of a large tree
        self.tree: Tree | None = None  # that walk's listing, while events keep it true
        self.version = 0  # counts changes to entries and to the kept listing
        self._summaries: dict[str, _Summary] = {}  # folder -> what a walk from it counts,
        #                                              kept current file by file
        self._orders: dict[str, tuple[int, list[tuple[str, Entry]]]] = {}  # folder ->
        #                        (version, its parsed files and their entries in walk order)
        self.built = ""  # the note of the last long build, until a scan says it
        self._pending: dict[str, tuple[Key, bytes]] = {}  # read for the parallel parse
        self.building: list[int] | None = None  # [parsed, to parse] while a build runs
        self.packed = False  # a large tree: the words of the files are kept compressed

    # -- one file -------------------------------------------------------------------------

    def entry(self, rel: str) -> Entry:
        """The parsed entry of one root-relative regular file (resolved by the caller)."""
        with self.lock:
            st = self.root.stat(self.root.path / rel)
            if st is None:
                raise PathError(f"{rel} does not exist")
            if not stat.S_ISREG(st.st_mode):
                raise PathError(f"{rel} is not a regular file; give a source file, or a folder")
            entry = self.entries.get(rel)
            if entry is None or entry.key != file_key(st) or entry.outline is None:
                entry = self._load(rel, _language_by_name(rel))
            return entry

    # -- a walk ---------------------------------------------------------------------------

    def scan(self, path: str = ".", *, include_ignored: bool = False,
             wanted: Wanted | None = None, limit: int | None = None) -> Scan:
        """The files under ``path`` that ``wanted`` keeps (all when None), parsed; past
        ``limit`` files, the rest are only counted (``Scan.more``)."""
        listing = list_files(self.root, path, include_ignored=include_ignored)
        if self.building is not None and not include_ignored:
            built = self._while_building(listing.start, wanted, limit)
            if built is not None:
                return built
        if not include_ignored:
            found = self._from_tree(listing.start, wanted, limit)
            if found is not None:
                return found
        whole = listing.start == "." and not include_ignored and limit is None
        if whole and wanted is None:
            try:  # a large build's note stays while the walk after it lists the tree
                self._build()  # then the walk below finds every file parsed
                scan = self._walk(listing, wanted, limit, whole)
            finally:
                self.building = None
        else:
            scan = self._walk(listing, wanted, limit, whole)
        scan.built, self.built = self.built, ""
        return scan

    def _walk(self, listing: Listing, wanted: Wanted | None, limit: int | None,
              whole: bool) -> Scan:
        scan = Scan(listing.start)
        visited: list[str] = []
        if whole:
            self._catch_up()
        deadline = time.monotonic() + MAX_SECONDS
        for visits, visit in enumerate(listing.visits, 1):  # (listed without the lock)
            if visits > MAX_VISITS:
                scan.stopped = f"stopped after {MAX_VISITS:,} files"
                break
            if time.monotonic() > deadline:
                scan.stopped = (f"stopped after {MAX_SECONDS:.0f} s, {visits - 1:,} files in; "
                                "what was read is kept, so calling again goes further")
                break
            full = limit is not None and len(scan.files) >= limit
            with self.lock:  # a file at a time: a call waits for one file, not the walk
                self._visit(scan, visit.rel, visit.dir_fd, visit.name, wanted, listing.skips,
                            full)
            if whole:
                visited.append(visit.rel)
        with self.lock:
            if whole and not scan.stopped:
                self.walked = len(visited)
                self._settle_tree(visited, listing.skips)
        scan.skipped = listing.skipped()
        return scan

    def _visit(self, scan: Scan, rel: str, dir_fd: int, name: str, wanted: Wanted | None,
               skips: Skips, full: bool) -> None:
        try:
            key = file_key(os.stat(name, dir_fd=dir_fd, follow_symlinks=False))
        except OSError:
            return  # gone since the walk listed it
        entry = self.entries.get(rel)
        if entry is None or entry.key != key:
            lang = _language_by_name(rel)
            if lang is None and "." in name.lstrip("."):
                scan.other[extension_of(name)] += 1
                return
            entry = self._load(rel, lang, None if full or self.whole else wanted)
        if not self._counted(scan, rel, entry, skips):
            return
        if wanted is not None and (names := entry.names) is not None \
                and not wanted.in_names(names):
            return
        if full:
            scan.more += 1
            return
        if (entry.outline is None and wanted is not None and entry.lacks
                and entry.lacks == wanted.word):
            return  # unchanged since its bytes were found not to hold the word
        if entry.outline is None:  # read before, not parsed: read again, parse if wanted
            entry = self._load(rel, by_grammar(entry.language), wanted)
            if entry.outline is None:
                return
        scan.files.append((rel, entry))

    def _counted(self, scan: Scan, rel: str, entry: Entry, skips: Skips | None) -> bool:
        """Count the entry in the scan's notes; True when it is an indexed source file."""
        if entry.note == "binary":
            if skips is not None:
                skips.add("binary", rel)
        elif entry.note == "too large":
            scan.too_large += 1
        elif entry.note:
            scan.unreadable += 1
        elif not entry.language:
            scan.other[extension_of(rel.rsplit("/", 1)[-1])] += 1
        else:
            scan.indexed += 1
            return True
        return False

    # -- the whole root, parsed on every core ------------------------------------------------

    def _build(self) -> None:
        """Parse every source file of the root that is not parsed yet, in parallel; start
        following events first when the tree is large (see _tree)."""
        if self.watch is None and self.walked >= WATCH_FROM:
            self.watch = start_watch(str(self.root.path))
        self._catch_up()
        todo: list[tuple[str, Language | None]] = []
        building = [0, 0]  # on a large tree, other calls answer from memory meanwhile
        try:
            self._list_todo(todo, building)
            if self.watch is None and len(todo) >= WATCH_FROM:
                self.watch = start_watch(str(self.root.path))  # events from here on; the
                #                                                 walk after the parse lists again
            self.whole = True
            started = time.monotonic()
            _log.info("code index: parsing %s source files under %s", f"{len(todo):,}",
                      self.root.path)
            building[1] = len(todo)
            if len(todo) >= WATCH_FROM:
                self.building = building
            if len(todo) >= WATCH_FROM or self.walked >= WATCH_FROM:
                with self.lock:
                    self._pack()
            for rel, parsed in parse_all(self._sources(todo), len(todo),
                                         self._progress(len(todo))):
                with self.lock:
                    self._parsed(rel, parsed)
                building[0] += 1
        except BaseException:
            self.building = None
            raise
        took = time.monotonic() - started
        if len(todo) >= MIN_FILES:
            give_back(freeze=len(todo) >= WATCH_FROM)
        if took >= _SAY_AFTER:
            self.built = (f"[built the code index once: parsed {len(todo):,} source files in "
                          f"{took:.0f} s; later calls answer from it]")

    def _pack(self) -> None:
        """From now on keep every file's words compressed (see Entry.pack); the caller
        holds the lock."""
        if not self.packed:
            self.packed = True
            for entry in self.entries.values():
                self.held -= entry.held()
                entry.pack()
                self.held += entry.held()

    def _list_todo(self, todo: list[tuple[str, Language | None]], building: list[int]) -> None:
        """The files a build parses (new or changed since parsed), by a stat walk that
        holds no lock (reading entries needs none): past WATCH_FROM files, other calls
        answer from memory meanwhile."""
        listing = list_files(self.root, ".")
        visits = 0
        for visit in listing.visits:
            visits += 1
            if visits > MAX_VISITS:
                break
            if visits == WATCH_FROM:
                self.building = building
            try:
                key = file_key(os.stat(visit.name, dir_fd=visit.dir_fd, follow_symlinks=False))
            except OSError:
                continue
            entry = self.entries.get(visit.rel)
            if entry is not None and entry.key == key and (entry.outline or entry.note
                                                           or not entry.language):
                continue
            lang = _language_by_name(visit.rel)
            if lang is not None or "." not in visit.name.lstrip("."):
                todo.append((visit.rel, lang))
        self.walked = max(self.walked, visits)

    def _catch_up(self) -> None:
        """Before a whole walk: what the feed heard so far is what the walk will see."""
        if self.watch is not None and self.tree is None:
            try:
                self.watch.feed.catch_up(self.watch)
            except OSError:
                self.watch.feed.release(self.watch)
                self.watch = None

    def _sources(self, todo: list[tuple[str, Language | None]]) -> Iterator[Job]:
        """Each file to parse, read (through Root) and checked as _load does."""
        for rel, lang in todo:
            with self.lock:
                got = self._source(rel, lang)
            if not isinstance(got, Entry):
                self._pending[rel] = (got[0], _digest(got[2]))
                yield rel, got[1], got[2]

    def _parsed(self, rel: str, parsed: tuple[str, bytes, Outline]) -> None:
        key, digest = self._pending.pop(rel, (None, b""))
        have = self.entries.get(rel)
        if key is None or (have is not None and have.key != key and have.outline is not None):
            return  # read again meanwhile by a call: that entry is newer
        self._remember(rel, Entry(key, parsed[2].language, *parsed, digest=digest))

    def _progress(self, total: int) -> Callable[[int], None]:
        started = time.monotonic()
        said = [started]

        def heard(done: int) -> None:
            now = time.monotonic()
            if now - said[0] >= _SAY_AFTER:
                said[0] = now
                _log.info("code index: parsed %s of %s source files (%.0f s)", f"{done:,}",
                          f"{total:,}", now - started)

        return heard

    def _while_building(self, start: str, wanted: Wanted | None,
                        limit: int | None) -> Scan | None:
        """While another call builds the index: the answer from the files parsed so far,
        saying so (never a walk that waits for the build); None when it cannot say."""
        building = self.building
        if building is None or not (wanted is None or isinstance(wanted, NameQuery)):
            return None
        below = "" if start == "." else start + "/"
        with self.lock:
            if isinstance(wanted, NameQuery):
                rels = [r for r in self.names.files_for(wanted) if r.startswith(below)]
            else:
                rels = [r for r, e in self.entries.items() if r.startswith(below)
                        and e.outline is not None and e.language and not e.note]
            files = [(r, e) for r in sorted(rels, key=_walk_key)
                     if (e := self.entries.get(r)) is not None and e.outline is not None]
            indexed = sum(1 for r, e in self.entries.items() if e.outline is not None
                          and r.startswith(below))
        scan = Scan(start, indexed=indexed, partial=True)
        if limit is not None and len(files) > limit:
            files, scan.more = files[:limit], len(files) - limit
        scan.files = files
        done = (f"{building[0]:,} of {building[1]:,} source files parsed so far" if building[1]
                else "listing the files to parse")
        scan.built = (f"[the code index is being built: {done}; this answer covers what is "
                      "parsed, ask again when it is built]")
        return scan

    # -- answers from the kept listing -------------------------------------------------------

    def _settle_tree(self, visited: list[str], skips: Skips) -> None:
        """After a whole walk: keep its listing when every source file it lists is parsed
        and held and a watch follows the tree; otherwise walks go on."""
        if self.tree is not None:
            return
        if self.watch is None or len(visited) < WATCH_FROM or not self._all_parsed(visited):
            return
        self._pack()
        skips = Skips([s for s in skips.seen if s[0] != "binary"])  # binary: from the entries
        tree = Tree.of(visited, skips, self.watch)
        if not tree.see_blind():
            return
        self.tree = tree
        self._summaries.clear()
        self._orders.clear()
        self._summary(".")  # counted now, after a walk, not by the first call after a change

    def _all_parsed(self, visited: list[str]) -> bool:
        for rel in visited:
            entry = self.entries.get(rel)
            if entry is None:
                name = rel.rsplit("/", 1)[-1]
                if _language_by_name(rel) is not None or "." not in name.lstrip("."):
                    return False
            elif entry.language and not entry.note and entry.outline is None:
                return False
        return True

    def settled(self, path: str) -> tuple[str, int] | None:
        """(start, version) when the kept listing answers for ``path`` with changes folded
        in and nothing else to say (no build running, no build note): a scan now answers
        as the last one made at that version. None otherwise."""
        if self.tree is None or self.building is not None or self.built:
            return None
        start = list_files(self.root, path).start
        with self.lock:
            if not self._tree_answers(start):
                return None
            return start, self.version

    def _tree_answers(self, start: str) -> bool:
        """(Under the lock) the kept listing, brought up to date, answers for the folder
        ``start`` (not a file, nothing outside what it holds)."""
        if not self._refresh() or self.tree is None or not self.tree.answers(start):
            return False
        st = self.root.stat(self.root.path / start) if start != "." else None
        return st is None or stat.S_ISDIR(st.st_mode)

    def _from_tree(self, start: str, wanted: Wanted | None, limit: int | None) -> Scan | None:
        """The scan a walk would give, from memory; None when memory cannot say."""
        if self.tree is None or not (wanted is None or isinstance(wanted, NameQuery)):
            return None
        with self.lock:
            if not self._tree_answers(start):
                return None
            summary = self._summary(start)
            scan = Scan(start, skipped={**summary.skipped, "binary": summary.binary},
                        other=+summary.other, too_large=summary.too_large,
                        unreadable=summary.unreadable, indexed=summary.indexed,
                        version=self.version)
            if isinstance(wanted, NameQuery):  # the files defining the name, in walk order
                below = "" if start == "." else start + "/"
                tree = self.tree
                rels = sorted((r for r in self.names.files_for(wanted)
                               if r.startswith(below) and tree.lists(r)), key=_walk_key)
                files = [(rel, self.entries[rel]) for rel in rels]
            else:
                files = self._parsed_under(start)  # (no new pair per file on each call)
            if limit is not None and len(files) > limit:
                files, scan.more = files[:limit], len(files) - limit
            scan.files = list(files)
            return scan

    def _refresh(self) -> bool:
        """Fold in what changed since the last call; False when the listing had to go."""
        assert self.tree is not None
        tree = self.tree
        changes = tree.changes()
        if changes is None:
            if tree.stale:
                tree.close()
                self.watch = None
            self.tree = None
            return False
        found, vanished = changes
        blind = tree.blind_changes()
        if blind is None:
            self.tree = None
            return False
        root = str(self.root.path)
        for rel in blind:  # a plain lstat only nominates a file: _load reads it through Root
            entry = self.entries.get(rel)
            if entry is not None and _lstat_key(os.path.join(root, rel)) != entry.key:
                found.modified.append(rel)
        if not (found or vanished or found.created_dirs):
            return True
        check = PathCheck(self.root)
        root = str(self.root.path)
        if found.deleted or vanished or found.created or found.created_dirs:
            self.version += 1  # the listing may change
        for rel in [*found.deleted, *vanished]:
            before = self._share_before(rel)
            if tree.remove(rel):
                self._forget(rel)
                self._reshare(rel, before)
            tree.unskip_gone(rel, root)
        for rel in found.created_dirs:
            skipped = check.skipped(rel, folder=True)
            if skipped is not None and skipped[0]:
                tree.skip(*skipped)
        for rel in found.created:
            skipped = check.skipped(rel)
            if skipped is None:
                before = self._share_before(rel)
                tree.add(rel)
                self._reshare(rel, before)
            elif skipped[0]:
                tree.skip(*skipped)
        for rel in [*found.created, *found.modified]:
            if not tree.lists(rel) or _other(rel):
                continue  # not listed (ignored, hidden), or a file without a grammar
            entry = self._load(rel, _language_by_name(rel))
            if self.entries.get(rel) is not entry:  # no room left: walks again
                self.tree = None
                return False
        return True

    def _forget(self, rel: str) -> None:
        """Drop the entry of ``rel`` (the caller keeps the summaries, see _reshare)."""
        old = self.entries.pop(rel, None)
        if old is not None:
            self.version += 1
            self.held -= old.held()
            self.names.remove(rel, old.outline)
            self.changed += 1

    def _summary(self, start: str) -> _Summary:
        """What a walk from ``start`` counts: made once per folder from the listing, then
        kept current file by file (see _reshare), so no call after a change is O(files)."""
        assert self.tree is not None
        found = self._summaries.get(start)
        if found is None:
            found = _Summary()
            for rel in self.tree.under(start):
                found.count(self._share(rel), 1)
            if len(self._summaries) > 32:
                self._summaries.clear()
            self._summaries[start] = found
        if found.skips_at != self.tree.skips_changed:
            found.skipped = self.tree.skipped(start)
            found.skipped.pop("binary", None)
            found.skips_at = self.tree.skips_changed
        return found

    def _share(self, rel: str) -> tuple[str, str] | None:
        """What the listed file ``rel`` adds to a walk's counts (as _counted): its note,
        'indexed', or ('other', its extension); None when the listing lacks it."""
        assert self.tree is not None
        if not self.tree.lists(rel):
            return None
        entry = self.entries.get(rel)
        if entry is None or not (entry.note or entry.language):
            return "other", extension_of(rel.rsplit("/", 1)[-1])
        return entry.note or "indexed", ""

    def _share_before(self, rel: str) -> tuple[str, str] | None:
        return self._share(rel) if self._summaries and self.tree is not None else None

    def _reshare(self, rel: str, before: tuple[str, str] | None) -> None:
        """Move ``rel`` in the kept summaries from what it added ``before`` to what it adds now."""
        if not self._summaries or self.tree is None:
            return
        after = self._share(rel)
        if after == before:
            return
        for start, summary in self._summaries.items():
            if start == "." or rel.startswith(start + "/"):
                summary.count(before, -1)
                summary.count(after, 1)

    def _parsed_under(self, start: str) -> list[tuple[str, Entry]]:
        """The parsed files below ``start`` in walk order (what a map or a folder outline
        reads), listed again only after a change."""
        assert self.tree is not None
        kept = self._orders.get(start)
        if kept is None or kept[0] != self.version:
            entries = self.entries
            files = [(rel, e) for rel in self.tree.under(start)
                     if (e := entries.get(rel)) is not None and e.outline is not None
                     and e.language and not e.note]
            if len(self._orders) > 32:
                self._orders.clear()
            kept = self._orders[start] = (self.version, files)
        return kept[1]

    # -- reading --------------------------------------------------------------------------

    def _load(self, rel: str, lang: Language | None, wanted: Wanted | None = None) -> Entry:
        """Read ``rel`` through Root once and parse it, unless ``wanted`` says from its
        bytes that it cannot hold what is asked (then only its language is remembered)."""
        got = self._source(rel, lang)
        if isinstance(got, Entry):
            return got
        key, lang, src = got
        old = self.entries.get(rel)
        digest = _digest(src)
        if old is not None and old.outline is not None and old.digest == digest \
                and old.language == lang.name:
            old.key = key  # touched, not changed (touch, a checkout): parsed once per content
            self.changed += 1
            return old
        if wanted is not None and not wanted.in_bytes(src):
            return self._remember(rel, Entry(key, lang.name, lacks=wanted.word))
        names, counts, outline = parse_one(lang, src)
        return self._remember(rel, Entry(key, lang.name, names, counts, outline, digest=digest))

    def _source(self, rel: str, lang: Language | None) -> Entry | tuple[Key, Language, bytes]:
        """The file's key, language and UTF-8 source; or the entry saying why it has none."""
        try:
            with self.root.open_file(self.root.path / rel) as fd:
                key = file_key(os.fstat(fd))
                data = _read(fd) if key_fields(key)[0] <= MAX_FILE_BYTES else None
        except (PathError, OSError):
            return self._remember(rel, Entry(_NO_KEY, note="unreadable"))  # (read again)
        if data is None or len(data) > MAX_FILE_BYTES:  # (it may have grown since fstat)
            return self._remember(rel, Entry(key, note="too large"))
        src = as_utf8(data)
        if b"\0" in src:
            return self._remember(rel, Entry(key, note="binary"))
        if lang is None:
            lang = language_of_script(src[:_HEAD])
        if lang is None:
            return self._remember(rel, Entry(key))
        return key, lang, src

    def _remember(self, rel: str, entry: Entry, *, keep: bool = True) -> Entry:
        self.version += 1
        before = self._share_before(rel)
        old = self.entries.pop(rel, None)
        if old is not None:
            self.held -= old.held()
            self.names.remove(rel, old.outline)
        if self.packed:
            entry.pack()
        room = len(self.entries) < MAX_ENTRIES and self.held + entry.held() <= MAX_HELD
        if keep and room:
            self.entries[rel] = entry
            self.held += entry.held()
            self.names.add(rel, entry.outline)
            self.changed += 1
        elif self.tree is not None and (old is not None or keep):
            self.tree = None  # a listed file is no longer held: walks answer again
        self._reshare(rel, before)
        return entry


@dataclass
class _Summary:
    """What a walk from one folder would count."""

    skipped: dict[str, int] = field(default_factory=dict)  # grep's, but binary (below)
    skips_at: int = -1  # the listing's skips_changed they were counted at
    other: Counter[str] = field(default_factory=Counter)  # extension -> files
    too_large: int = 0
    unreadable: int = 0
    indexed: int = 0
    binary: int = 0

    def count(self, share: tuple[str, str] | None, sign: int) -> None:
        """Add (sign 1) or take away (-1) one file's share (see Index._share)."""
        if share is None:
            return
        kind, extension = share
        if kind == "other":
            self.other[extension] += sign
        elif kind == "indexed":
            self.indexed += sign
        elif kind == "binary":
            self.binary += sign
        elif kind == "too large":
            self.too_large += sign
        else:
            self.unreadable += sign


def _lstat_key(path: str) -> Key | None:
    try:
        return file_key(os.lstat(path))
    except OSError:
        return None


def _walk_key(rel: str) -> str:
    """Sorts paths in walk order (a folder's files before the next name at its level)."""
    return rel.replace("/", "\0")


def _other(rel: str) -> bool:
    """A file the index keeps no entry for: an extension no grammar reads."""
    name = rel.rsplit("/", 1)[-1]
    return _language_by_name(rel) is None and "." in name.lstrip(".")


def _language_by_name(rel: str) -> Language | None:
    return language_for(rel.rsplit("/", 1)[-1])


def _read(fd: int) -> bytes:
    """The whole file, read from ``fd`` up to one byte past the size cap."""
    chunks, size = [], 0
    while size <= MAX_FILE_BYTES and (chunk := os.read(fd, 1 << 20)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _digest(src: bytes) -> bytes:
    return hashlib.blake2b(src, digest_size=16).digest()


def as_utf8(data: bytes) -> bytes:
    """Source bytes as UTF-8, the way grep reads them: BOM dropped, UTF-16 transcoded."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", "replace").encode("utf-8", "replace")
    return data.removeprefix(codecs.BOM_UTF8)
