"""The first records of a JSON array, read without loading the whole file.

polars can only parse a JSON document whole; for a big file that means reading all of it
into memory to show ten rows. This reader decodes one array element at a time from a
small buffer and stops after ``n`` records, reading a bounded number of bytes.
"""

from __future__ import annotations

import codecs
import json
import os
from typing import Any, BinaryIO

from ._errors import TableError

CHUNK = 64 * 1024
MAX_RECORD_BYTES = 16 * 1024 * 1024  # one record larger than this is refused, not buffered


class _ArrayCursor:
    """Walks the elements of a top-level JSON array from a binary file."""

    def __init__(self, fh: BinaryIO, name: str) -> None:
        self.fh, self.name = fh, name
        self.decoder = json.JSONDecoder()
        self.utf8 = codecs.getincrementaldecoder("utf-8-sig")()
        self.buf, self.pos, self.eof = "", 0, False

    def _more(self) -> None:
        if len(self.buf) - self.pos > MAX_RECORD_BYTES:
            raise TableError(f"{self.name}: a JSON record is larger than "
                             f"{MAX_RECORD_BYTES // 2**20} MB; convert the file to NDJSON")
        chunk = self.fh.read(CHUNK)
        self.eof = not chunk
        self.buf = self.buf[self.pos:] + self.utf8.decode(chunk, final=self.eof)
        self.pos = 0

    def _skip(self, chars: str) -> str:
        """Skip ``chars``; the next character ('' at the end of the file)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in chars:
                self.pos += 1
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos:self.pos + 1]
            self._more()

    def open(self) -> None:
        if self._skip(" \t\r\n") != "[":
            raise TableError(f"{self.name}: is not a JSON array of records")
        self.pos += 1

    def next(self) -> Any | None:
        """The next element, or None after the closing bracket."""
        nxt = self._skip(" \t\r\n,")
        if nxt in ("]", ""):
            return None
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if self.eof:
                    raise
                self._more()
                continue
            if end < len(self.buf) or self.eof:  # a number cut by the buffer is not done
                self.pos = end
                return obj
            self._more()


def read_json_head(path: str | os.PathLike[str], n: int, name: str) -> tuple[list[dict[str, Any]], bool]:
    """The first ``n`` records of the JSON array in ``path``, and whether that was all of them."""
    with open(path, "rb") as fh:
        cursor = _ArrayCursor(fh, name)
        cursor.open()
        records: list[dict[str, Any]] = []
        while len(records) < n:
            obj = cursor.next()
            if obj is None:
                return records, True
            if not isinstance(obj, dict):
                raise TableError(f"{name}: is a JSON array of {type(obj).__name__} values, "
                                 "not of records (objects)")
            records.append(obj)
        return records, cursor.next() is None
