"""A window of lines over a file of any size: read only up to the window's last byte."""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from ..errors import ToolError
from ..results import MAX_LINE, MAX_READ_CHARS, MAX_READ_LINES, FileRead, clip_line

__all__ = ["AsUtf8", "Window", "byte_window", "window_read"]

_CHUNK = 1 << 20
_COUNT_TAIL_LIMIT = 8 << 20  # count the lines after a window only in files this small
_LINE_BYTES = 4 * MAX_LINE + 8  # bytes of a line kept: MAX_LINE chars even if all 4-byte
_UTF8_CONTINUATION = bytes(range(0x80, 0xC0))  # bytes that start no char

Lines = list[tuple[int, str]]


@dataclass
class Window:
    lines: Lines
    remaining: int | None  # lines after the window; None when too costly to count


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class AsUtf8:
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


def byte_window(fh: _Readable, size: int, start: int, end: int) -> Window:
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


def window_read(rel: str, size: int, start: int, window: Window,
                encoding: str = "utf-8") -> FileRead:
    """The read of ``window``, the lines from ``start`` on; ToolError when there are none."""
    if not window.lines:
        raise ToolError(f"start={start} is past the end of {rel}; it has fewer lines")
    last = window.lines[-1][0]
    total = None if window.remaining is None else last + window.remaining
    return FileRead(path=rel, size=size, encoding=encoding, first=start, last=last, total=total,
                    lines=[text for _, text in window.lines])
