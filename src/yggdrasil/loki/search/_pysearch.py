"""The pure-Python search engine, used where ripgrep is not installed.

It reads files the way ripgrep does: a UTF-8 BOM is dropped, UTF-16 with a BOM is
transcoded, a NUL byte anywhere makes the file binary (never searched, its hits
dropped), lines end at ``\\n`` and a regex never matches across lines. The regex is
RE2's (``_linear``), matched on the UTF-8 bytes like ripgrep's Rust regex, so no
pattern can make a line take more than linear time: see README, "Regex dialects".
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import ToolError
from ..files import READ_FLAGS, Root
from ..results import MAX_ENTRIES, MAX_HITS, clip_line
from ._found import Accept, Found, Hit, HitCollector, PathCollector, Pattern, Query, Skips
from ._linear import LinearError, LinearPattern, compile_linear
from ._walk import Walker

CHUNK = 1 << 20
COUNT_LIMIT = 10 * MAX_HITS  # grep counts hits up to here, then says "more than"
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# Constructs whose meaning changes when a line is searched inside a longer text.
_LINE_ONLY = re.compile(r"\\[Az]")


def text_chunks(fd: int) -> Iterator[bytes]:
    """The file's bytes as ripgrep searches them (BOMs handled), chunk by chunk."""
    first = os.read(fd, CHUNK)
    if not first.startswith(_UTF16_BOMS):
        yield first.removeprefix(codecs.BOM_UTF8)
        while chunk := os.read(fd, CHUNK):
            yield chunk
        return
    decoder = codecs.getincrementaldecoder("utf-16")("replace")
    chunk = first
    while chunk:
        yield decoder.decode(chunk).encode("utf-8", "replace")
        chunk = os.read(fd, CHUNK)
    yield decoder.decode(b"", final=True).encode("utf-8", "replace")


def is_binary(fd: int) -> bool:
    return any(b"\0" in chunk for chunk in text_chunks(fd))


@dataclass
class LineMatcher:
    """Finds matching lines in a block of whole lines, quickly but line by line exactly."""

    line: LinearPattern
    block: LinearPattern | None  # None: test every line on its own

    @classmethod
    def compile(cls, pattern: Pattern) -> LineMatcher:
        regex = pattern.regex.encode("utf-8", "surrogateescape")
        try:
            line = compile_linear(regex, ignore_case=pattern.ignore_case)
            block = compile_linear(b"(?m)" + regex, ignore_case=pattern.ignore_case)
        except LinearError as exc:
            raise ToolError(
                f"pattern {pattern.regex!r} is not a valid regex (RE2 syntax, the Python "
                f"engine's: like ripgrep's, no look-around or backreferences): {exc}"
            ) from None
        return cls(line, None if _LINE_ONLY.search(pattern.regex) else block)

    def lines(self, text: bytes) -> Iterator[tuple[int, bytes]]:
        """(offset of the line start, line) for every matching line of ``text``."""
        if self.block is None:
            pos, lines = 0, text.split(b"\n")
            if text.endswith(b"\n"):
                lines.pop()
            for line in lines:
                if self.line.search(line):
                    yield pos, line
                pos += len(line) + 1
            return
        pos, end = 0, len(text)
        last = end - 1 if text.endswith(b"\n") else end  # past it: after the final line break
        while pos < end and (m := self.block.search(text, pos)) and m.start() <= last:
            start = text.rfind(b"\n", 0, m.start()) + 1
            stop = text.find(b"\n", m.start())
            stop = end if stop < 0 else stop
            line = text[start:stop]
            if self.line.search(line):
                yield start, line
            pos = stop + 1


def grep_file(fd: int, rel: str, matcher: LineMatcher, hits: HitCollector) -> bool:
    """Feed the file's matching lines to ``hits``; True when the file turned out binary."""
    number, carry = 1, b""
    for chunk in text_chunks(fd):
        if b"\0" in chunk:
            return True
        block = carry + chunk
        cut = block.rfind(b"\n") + 1
        carry = block[cut:]
        if cut and _feed(block[:cut], number, rel, matcher, hits):
            return False
        number += block.count(b"\n", 0, cut)
    if carry:
        _feed(carry, number, rel, matcher, hits)
    return False


def _feed(text: bytes, number: int, rel: str, matcher: LineMatcher, hits: HitCollector) -> bool:
    counted = 0
    for start, line in matcher.lines(text):
        number += text.count(b"\n", counted, start)
        counted = start
        shown = line.removesuffix(b"\r").decode("utf-8", "replace")
        if hits.add(Hit(rel, number, clip_line(shown))):
            return True
    return False


def grep_output(path: str, shown: str, pattern: Pattern) -> Found:
    """grep over one kept output (a spill file, outside the root: opened as it is, the
    caller having checked its id), its matches named ``shown``."""
    matcher = LineMatcher.compile(pattern)
    skips, hits = Skips(), HitCollector(MAX_HITS, COUNT_LIMIT)
    fd = os.open(path, READ_FLAGS)
    try:
        grep_file(fd, shown, matcher, hits)
    finally:
        os.close(fd)
    hits.end_file(False)
    return hits.found(skips)


@dataclass
class PythonEngine:
    root: Root
    name: str = "python"

    def find(self, query: Query, accept: Accept) -> Found:
        skips, paths = Skips(), PathCollector(MAX_ENTRIES)
        for visit in Walker(self.root, query, skips).files():
            if accept(visit.rel):
                paths.extend([visit.rel])
        return paths.found(skips)

    def grep(self, query: Query, pattern: Pattern) -> Found:
        matcher = LineMatcher.compile(pattern)
        skips, hits = Skips(), HitCollector(MAX_HITS, COUNT_LIMIT)
        for visit in Walker(self.root, query, skips).files():
            binary = self._grep_one(visit.dir_fd, visit.name, visit.rel, matcher, hits)
            if binary:
                skips.add("binary", visit.rel)
            if hits.over:
                break
        return hits.found(skips)

    def _grep_one(self, dir_fd: int, name: str, rel: str, matcher: LineMatcher,
                  hits: HitCollector) -> bool:
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
        except OSError:
            return False  # vanished or unreadable: ripgrep goes on too
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            binary = grep_file(fd, rel, matcher, hits)
        except OSError:
            binary = False
        finally:
            os.close(fd)
        hits.end_file(binary)
        return binary
