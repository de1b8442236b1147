"""The file tools: list, read a window, write, edit. All paths go through a Root."""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, BinaryIO, Protocol

from annotated_types import Ge

from ..errors import PathError, Refused, ToolError
from . import _edit
from ._observe import (
    MAX_ENTRIES,
    MAX_LINE,
    MAX_READ_CHARS,
    MAX_READ_LINES,
    clip_line,
    clip_list,
    human_size,
)
from ._protect import ProtectedError
from ._root import Root

_CHUNK = 1 << 20
_SNIFF = 8192
_COUNT_TAIL_LIMIT = 8 << 20  # count the lines after a window only in files this small
_LINE_BYTES = 4 * MAX_LINE + 8  # bytes of a line kept: MAX_LINE chars even if all 4-byte
_UTF8_CONTINUATION = bytes(range(0x80, 0xC0))  # bytes that start no char

Confirm = Callable[[str], bool]


@dataclass
class Files:
    """File tools bound to one root; ``on_change`` hears every created or edited path."""

    root: Root
    confirm: Confirm | None = None
    on_change: Callable[[str], None] = field(default=lambda rel: None)
    before_change: Callable[[str, Path], None] = field(default=lambda rel, real: None)

    # -- reading -------------------------------------------------------------------------

    def list_dir(self, path: str = ".") -> str:
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
            if not entries:
                return f"{self.root.rel(real)}/ is empty"
            names = clip_list([e.name for e in entries], MAX_ENTRIES, "entries",
                              "list a subfolder, or use find")
            rows = [self._entry(real, entry) for entry in entries[:MAX_ENTRIES]]
        return "\n".join(rows + names[MAX_ENTRIES:])  # + the cut note, if any

    def _entry(self, folder: Path, entry: os.DirEntry[str]) -> str:
        rel = self.root.rel(folder / entry.name)
        is_dir = entry.is_dir(follow_symlinks=False)
        if self.root.protected(folder / entry.name, is_dir):  # shown to exist, never its size
            return f"{rel}{'/' if is_dir else ''}  [protected]"
        if entry.is_symlink():
            try:
                target = self.root.rel(self.root.resolve(rel))
            except ProtectedError as exc:
                return f"{rel}@ -> {exc.rel}  [protected]"
            except PathError:
                return f"{rel}@ -> (outside the root, not followed)"
            return f"{rel}@ -> {target}"
        if is_dir:
            return f"{rel}/"
        if entry.is_file(follow_symlinks=False):
            return f"{rel}  ({entry.stat(follow_symlinks=False).st_size}b)"
        return f"{rel}  (special file, not readable)"

    def read_file(self, path: str, start: Annotated[int, Ge(1)] = 1,
                  end: Annotated[int, Ge(0)] = 0) -> str:
        if start < 1 or end < 0 or (end and end < start):
            raise ToolError("start is a 1-based line number and end (0 = to the end) is >= start")
        real = self.root.resolve(path)
        rel = self.root.rel(real)
        with self.root.open_file(real) as fd, os.fdopen(os.dup(fd), "rb") as fh:
            size = os.fstat(fd).st_size
            head = fh.read(_SNIFF)
            fh.seek(0)
            if size == 0:
                return f"{rel} is empty (0 bytes)"
            wide = _wide_codec(head)
            if wide is not None:
                bom, codec = wide
                fh.seek(len(bom))
                window = _byte_window(_AsUtf8(fh, codec), size, start, end)
            elif b"\0" in head:
                raise ToolError(
                    f"{rel} is a binary file ({human_size(size)}); read_file shows text only"
                    " (read_table reads data files)"
                )
            else:
                window = _byte_window(fh, size, start, end)
            return _render_window(rel, size, start, window)

    # -- writing ------------------------------------------------------------------------

    def write_file(self, path: str, content: str) -> str:
        real = self.root.resolve(_file_path(path))
        message = self.write_bytes(real, content.encode("utf-8"))
        return _with_warning(message, self.root.rel(real), content)

    def write_bytes(self, real: Path, data: bytes) -> str:
        """The one write path for whole files: confirm gate, journal hooks, atomic replace."""
        rel = self.root.rel(real)
        self._gate("overwrite", real, rel)
        self.before_change(rel, real)
        created = self.root.write_atomic(real, data)
        self.on_change(rel)
        return f"{'created' if created else 'overwrote'} {rel} ({len(data)} bytes)"

    def edit_file(self, path: str, old: str, new: str, replace_all: bool = False) -> str:
        real = self.root.resolve(_file_path(path))
        rel = self.root.rel(real)
        if self.root.stat(real) is None:
            raise PathError(f"{rel} does not exist; use write_file to create it")
        original = self.root.read_bytes(real)
        text, encoding = _decode(original)
        edited, count = _edit.replace(text, old, new, rel, replace_all=replace_all)
        self._gate("edit", real, rel)
        self.before_change(rel, real)
        self.root.write_atomic(real, _encode(edited, encoding))
        self.on_change(rel)
        noun = "replacement" if count == 1 else "replacements"
        return _with_warning(f"edited {rel} ({count} {noun})", rel, edited)

    def _gate(self, verb: str, real: Path, rel: str) -> None:
        """Ask ``confirm`` before changing an existing file outside the system temp dir."""
        if self.confirm is None or self.root.is_temporary(real) or self.root.stat(real) is None:
            return
        if not self.confirm(f"{verb} {rel}"):
            raise Refused(verb, rel)


# -- windows over a file ---------------------------------------------------------------

Lines = list[tuple[int, str]]


@dataclass
class Window:
    lines: Lines
    remaining: int | None  # lines after the window; None when too costly to count


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _AsUtf8:
    """A UTF-16/32 stream read as UTF-8, decoded one chunk at a time (bad units -> U+FFFD)."""

    def __init__(self, fh: BinaryIO, codec: str) -> None:
        self.fh = fh
        self.decoder = codecs.getincrementaldecoder(codec)("replace")

    def read(self, size: int = -1, /) -> bytes:
        """Some text (at least one char unless at the end), or b"" at the end."""
        while True:
            raw = self.fh.read(size)
            text = self.decoder.decode(raw, final=not raw)
            if text or not raw:
                return text.encode("utf-8")


def _byte_window(fh: _Readable, size: int, start: int, end: int) -> Window:
    """Lines start..end of a binary stream, reading only up to the window's last byte."""
    stop = end or start + MAX_READ_LINES - 1
    shown: Lines = []
    budget = MAX_READ_CHARS
    n, line = 1, _Line()
    for chunk in iter(lambda: fh.read(_CHUNK), b""):
        if n < start:
            newlines = chunk.count(b"\n")
            if n + newlines < start:
                n += newlines
                continue
            cut = -1
            for _ in range(start - n):
                cut = chunk.index(b"\n", cut + 1)
            n, chunk = start, chunk[cut + 1 :]
        pos = 0
        while (nl := chunk.find(b"\n", pos)) >= 0:
            line.add(chunk[pos:nl])
            budget -= _show(shown, n, line)
            n, pos, line = n + 1, nl + 1, _Line()
            if n > stop or budget <= 0:
                return Window(shown, _count_rest(fh, size, chunk[pos:]))
        line.add(chunk[pos:])
    if line.head:
        _show(shown, n, line)
    return Window(shown, 0)


class _Line:
    """A line being read: its first _LINE_BYTES bytes; past them only a count of chars, so
    a file of one huge line costs neither memory nor repeated copies."""

    __slots__ = ("cr", "head", "more")

    def __init__(self) -> None:
        self.head, self.more, self.cr = b"", 0, False

    def add(self, part: bytes) -> None:
        room = _LINE_BYTES - len(self.head)
        if room > 0:
            self.head += part[:room]
            part = part[room:]
        if part:
            self.more += len(part.translate(None, _UTF8_CONTINUATION))
            self.cr = part.endswith(b"\r")

    def text(self, first: bool) -> str:
        text = self.head.decode("utf-8", "replace")
        text = text.removeprefix("\ufeff") if first else text
        more = self.more - self.cr  # the CR of a CRLF is no char of the line
        if not self.more:
            return clip_line(text.removesuffix("\r"))
        return f"{text[:MAX_LINE]} [... {len(text) - MAX_LINE + more} more chars on this line]"


def _count_rest(fh: _Readable, size: int, rest: bytes) -> int | None:
    if size > _COUNT_TAIL_LIMIT:
        return None if rest or fh.read(1) else 0
    tail = rest + fh.read()
    return tail.count(b"\n") + (0 if not tail or tail.endswith(b"\n") else 1)


def _show(shown: Lines, n: int, line: _Line) -> int:
    text = line.text(first=n == 1)
    shown.append((n, text))
    return len(text) + 8


def _render_window(rel: str, size: int, start: int, window: Window) -> str:
    if not window.lines:
        raise ToolError(f"start={start} is past the end of {rel}; it has fewer lines")
    body = "\n".join(f"{n}\t{text}" for n, text in window.lines)
    last = window.lines[-1][0]
    if window.remaining == 0:
        return body if start == 1 else f"{body}\n[lines {start}-{last}; end of file]"
    total = f"of a {human_size(size)} file" if window.remaining is None else (
        f"of {last + window.remaining}")
    return (
        f"{body}\n[showing lines {start}-{last} {total}; "
        f"read_file(path={rel!r}, start={last + 1}) for more, or grep to find a line]"
    )


# -- encodings ----------------------------------------------------------------------------

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _wide_codec(head: bytes) -> tuple[bytes, str] | None:
    """(BOM, codec) of a UTF-16/32 file, whose text the UTF-8 line walk cannot read as is."""
    return next(((bom, codec) for bom, codec in _BOMS if codec != "utf-8" and head.startswith(bom)), None)


def _decode(data: bytes) -> tuple[str, tuple[bytes, str]]:
    """Text plus how to write it back byte-for-byte: (BOM, codec)."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(codec), (bom, codec)
    try:
        return data.decode("utf-8"), (b"", "utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1"), (b"", "latin-1")  # round-trips every byte


def _encode(text: str, encoding: tuple[bytes, str]) -> bytes:
    bom, codec = encoding
    try:
        return bom + text.encode(codec)
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"the edit adds characters that the file's encoding ({codec}) cannot hold: "
            f"{exc.object[exc.start:exc.end]!r}"
        ) from exc


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


def _with_warning(message: str, rel: str, text: str) -> str:
    problem = _edit.syntax_problem(rel, text)
    return f"{message}\nWARNING: {rel} no longer parses: {problem}" if problem else message
