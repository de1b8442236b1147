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
import os
import stat
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import PathError
from ..files import Root
from ..search import Skips, list_files
from ._extract import Outline, extract, identifiers
from ._languages import Language, by_grammar, extension_of, language_for, language_of_script

__all__ = ["MAX_FILE_BYTES", "Entry", "Index", "Scan"]

MAX_FILE_BYTES = 2 << 20  # larger files are not parsed (generated code, bundles, data)
MAX_VISITS = 100_000  # files one call looks at
MAX_SECONDS = 30.0  # one call stops walking after this long (what it parsed is kept)
MAX_ENTRIES = 100_000  # files the index remembers
MAX_HELD = 256 << 20  # about this many bytes of names and definitions remembered
_SYMBOL_BYTES = 250  # one remembered definition besides its strings' characters
_HEAD = 256  # bytes read to find a #! line
PARSED_KEPT = 10_000  # distinct file contents whose parse a process keeps (any root)

Key = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode


def file_key(st: os.stat_result) -> Key:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@dataclass(slots=True)
class Entry:
    """One file as the index last saw it."""

    key: Key
    language: str = ""  # '' : no grammar for this file
    names: str | None = None  # its distinct identifier-like words, '\n'-separated and
    #                           -framed; None until the file is parsed
    counts: bytes = b""  # uses of each name, same order, capped at 255
    outline: Outline | None = None  # parsed lazily
    note: str = ""  # why it is not indexed: 'binary', 'too large', 'unreadable'
    lacks: str = ""  # a word its bytes were last found not to hold (not parsed since)

    def held(self) -> int:
        """About how many bytes this entry keeps alive (objects and their strings)."""
        symbols = self.outline.symbols if self.outline is not None else ()
        text = sum(len(s.name) + len(s.scope) + len(s.signature) for s in symbols)
        return len(self.names or "") + len(self.counts) + text + _SYMBOL_BYTES * len(symbols) \
            + 400


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


class Wanted(Protocol):
    """What a question needs from a file, tested on its words (in memory) or its bytes."""

    @property
    def word(self) -> str: ...  # what in_bytes looks for: equal words, equal answers

    def in_names(self, names: str) -> bool: ...

    def in_bytes(self, data: bytes) -> bool: ...




class Index:
    """The index of one root; thread-safe (one call at a time walks it)."""

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
        scan = Scan(listing.start)
        with self.lock:
            deadline = time.monotonic() + MAX_SECONDS
            for visits, visit in enumerate(listing.visits, 1):
                if visits > MAX_VISITS:
                    scan.stopped = f"stopped after {MAX_VISITS:,} files"
                    break
                if time.monotonic() > deadline:
                    scan.stopped = (f"stopped after {MAX_SECONDS:.0f} s, {visits - 1:,} files in; "
                                    "what was read is kept, so calling again goes further")
                    break
                full = limit is not None and len(scan.files) >= limit
                self._visit(scan, visit.rel, visit.dir_fd, visit.name, wanted, listing.skips,
                            full)
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
            entry = self._load(rel, lang, None if full else wanted)
        if not self._counted(scan, rel, entry, skips):
            return
        if wanted is not None and entry.names is not None and not wanted.in_names(entry.names):
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

    def _counted(self, scan: Scan, rel: str, entry: Entry, skips: Skips) -> bool:
        """Count the entry in the scan's notes; True when it is an indexed source file."""
        if entry.note == "binary":
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

    # -- reading --------------------------------------------------------------------------

    def _load(self, rel: str, lang: Language | None, wanted: Wanted | None = None) -> Entry:
        """Read ``rel`` through Root once and parse it, unless ``wanted`` says from its
        bytes that it cannot hold what is asked (then only its language is remembered)."""
        try:
            with self.root.open_file(self.root.path / rel) as fd:
                key = file_key(os.fstat(fd))
                data = _read(fd) if key[0] <= MAX_FILE_BYTES else None
        except (PathError, OSError):
            return self._remember(rel, Entry((0, 0, 0, 0), note="unreadable"), keep=False)
        if data is None or len(data) > MAX_FILE_BYTES:  # (it may have grown since fstat)
            return self._remember(rel, Entry(key, note="too large"))
        src = as_utf8(data)
        if b"\0" in src:
            return self._remember(rel, Entry(key, note="binary"))
        if lang is None:
            lang = language_of_script(src[:_HEAD])
        if lang is None:
            return self._remember(rel, Entry(key))
        if wanted is not None and not wanted.in_bytes(src):
            return self._remember(rel, Entry(key, lang.name, lacks=wanted.word))
        names, counts, outline = _parsed(lang, src)
        return self._remember(rel, Entry(key, lang.name, names, counts, outline))

    def _remember(self, rel: str, entry: Entry, *, keep: bool = True) -> Entry:
        old = self.entries.pop(rel, None)
        if old is not None:
            self.held -= old.held()
        room = len(self.entries) < MAX_ENTRIES and self.held + entry.held() <= MAX_HELD
        if keep and room:
            self.entries[rel] = entry
            self.held += entry.held()
            self.changed += 1
        return entry


class _Parsed:
    """What parsing gave for file contents seen before in this process, whatever their path:
    a fresh checkout of a repository (a fleet attempt's working copy: each a new root, on
    a worker that runs attempt after attempt) is parsed once, not once per copy. Bounded;
    the least recently used go first. (Outlines are frozen: sharing them is safe.)"""

    def __init__(self, limit: int = PARSED_KEPT) -> None:
        self.limit = limit
        self.found: OrderedDict[tuple[str, bytes], tuple[str, bytes, Outline]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, lang: Language, src: bytes) -> tuple[str, bytes, Outline]:
        key = (lang.name, hashlib.blake2b(src, digest_size=16).digest())
        with self.lock:
            found = self.found.get(key)
            if found is not None:
                self.found.move_to_end(key)
                return found
        names, counts = identifiers(src)
        made = (names, counts, extract(lang, src))
        with self.lock:
            self.found[key] = made
            while len(self.found) > self.limit:
                self.found.popitem(last=False)
        return made


_parsed = _Parsed().get


def _language_by_name(rel: str) -> Language | None:
    return language_for(rel.rsplit("/", 1)[-1])


def _read(fd: int) -> bytes:
    """The whole file, read from ``fd`` up to one byte past the size cap."""
    chunks, size = [], 0
    while size <= MAX_FILE_BYTES and (chunk := os.read(fd, 1 << 20)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def as_utf8(data: bytes) -> bytes:
    """Source bytes as UTF-8, the way grep reads them: BOM dropped, UTF-16 transcoded."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", "replace").encode("utf-8", "replace")
    return data.removeprefix(codecs.BOM_UTF8)
