"""Cheap checks of a binary table's own structure before a parser is let loose on it.

Some files are small and still ruin a parser: calamine sizes a sheet from its extreme
cells (A1 and XFD1048576 ask for 17 billion cells, 512 GiB), a few MB of zipped
shared strings inflate to gigabytes, and polars overflows its stack on a Parquet column
nested 500 lists deep. These checks read only the zip directory, the sheet XML (streamed,
cell references only) and the Parquet footer's schema, and refuse such files with a
TableError that says what is allowed. (The table worker's memory and time limits catch
what they do not.)
"""

from __future__ import annotations

import os
import re
import struct
import zipfile

from ._errors import TableError
from ._units import human_size

MAX_SHEET_CELLS = 20_000_000  # rows x columns of the area a sheet's cells span
MAX_SHARED_STRINGS = 128 * 2**20  # uncompressed bytes of xl/sharedStrings.xml
MAX_NESTING = 128  # schema levels of a Parquet column (a list is 2; polars reads 400)
MAX_FOOTER = 64 * 2**20  # bytes of a Parquet footer we are willing to read
_CHUNK = 1 << 20
_CELL = re.compile(rb"<(?:\w+:)?c\b[^>]*?\sr=\"([A-Z]{1,3})([0-9]{1,7})\"")
_ROW = re.compile(rb"<(?:\w+:)?row\b[^>]*?\sr=\"([0-9]{1,7})\"")
_DIMENSION = re.compile(rb"<(?:\w+:)?dimension\b[^>]*?\sref=\"([A-Z]{1,3})([0-9]{1,7})(?::([A-Z]{1,3})([0-9]{1,7}))?\"")


# -- XLSX -----------------------------------------------------------------------------------


def check_xlsx(path: str | os.PathLike[str], name: str) -> None:
    """Refuse a workbook whose shared strings or sheet area would swamp calamine."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a zip (legacy .xls, .ods...): the parser reports it
    with zf:
        for info in zf.infolist():
            low = info.filename.lower()
            if low.endswith("sharedstrings.xml") and info.file_size > MAX_SHARED_STRINGS:
                raise TableError(
                    f"{name}: its shared-strings table is {human_size(info.file_size)} "
                    f"uncompressed ({human_size(info.compress_size)} zipped); read_table reads "
                    f"workbooks whose shared strings take at most "
                    f"{human_size(MAX_SHARED_STRINGS)}; save the sheet as CSV or Parquet")
            if low.startswith("xl/worksheets/") and low.endswith(".xml"):
                _check_sheet(zf, info, name)


def _column(letters: bytes) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ch - 64
    return n


class _Extent:
    def __init__(self) -> None:
        self.rows = [0, 0]
        self.cols = [0, 0]

    def add(self, row: int, col: int | None) -> None:
        if row:
            self.rows = [min(self.rows[0] or row, row), max(self.rows[1], row)]
        if col:
            self.cols = [min(self.cols[0] or col, col), max(self.cols[1], col)]

    def cells(self) -> int:
        rows = self.rows[1] - self.rows[0] + 1 if self.rows[1] else 0
        cols = self.cols[1] - self.cols[0] + 1 if self.cols[1] else 0
        return rows * max(cols, 1)


def _check_sheet(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> None:
    """Stream the sheet XML for its dimension and cell references: the area they span."""
    extent, dimension, tail = _Extent(), _Extent(), b""
    with zf.open(info) as fh:
        while chunk := fh.read(_CHUNK):
            block = tail + chunk
            cut = block.rfind(b">") + 1  # scan whole tags only
            for m in _CELL.finditer(block, 0, cut):
                extent.add(int(m[2]), _column(m[1]))
            for m in _ROW.finditer(block, 0, cut):
                extent.add(int(m[1]), None)
            if not dimension.rows[1] and (d := _DIMENSION.search(block, 0, cut)):
                dimension.add(int(d[2]), _column(d[1]))
                if d[3]:
                    dimension.add(int(d[4]), _column(d[3]))
            tail = block[cut:][-4096:]
    for what, area in (("its cells span", extent), ("its declared dimension spans", dimension)):
        if area.cells() > MAX_SHEET_CELLS:
            sheet = info.filename.rsplit("/", 1)[-1]
            raise TableError(
                f"{name}: sheet {sheet}: {what} {area.rows[1] - area.rows[0] + 1:,} rows x "
                f"{area.cols[1] - area.cols[0] + 1:,} columns ({area.cells():,} cells); "
                f"read_table reads sheets spanning at most {MAX_SHEET_CELLS:,} cells")


# -- Parquet ----------------------------------------------------------------------------------


def check_parquet(path: str | os.PathLike[str], name: str) -> None:
    """Refuse a Parquet file whose schema nests deeper than MAX_NESTING levels."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < 12:
            return
        fh.seek(size - 8)
        (length,) = struct.unpack("<I", fh.read(4))
        if length > min(MAX_FOOTER, size - 12):
            return  # a corrupt footer: the parser reports it
        fh.seek(size - 8 - length)
        footer = fh.read(length)
    try:
        depth = _schema_depth(footer)
    except (ValueError, IndexError, RecursionError):
        return  # not a footer we can read: the parser reports it
    if depth > MAX_NESTING:
        raise TableError(f"{name}: a column is nested {depth} levels deep (lists or structs "
                         f"inside each other); read_table reads Parquet nested at most "
                         f"{MAX_NESTING} levels")


def _schema_depth(footer: bytes) -> int:
    """Depth of the schema tree in a Thrift-compact FileMetaData (field 2: the schema as
    a flat list of SchemaElements, each with num_children, field 5)."""
    reader = _Compact(footer)
    children: list[int] = []
    for fid, kind in _FieldIter(reader):
        if fid == 2 and kind == 9:  # list<SchemaElement>
            count, _ = reader.list_header()
            for _ in range(count):
                children.append(reader.schema_element())
            break
        reader.skip(kind)
    depth, stack = 0, list[int]()  # remaining children of each open group
    for n in children:
        while stack and stack[-1] == 0:
            stack.pop()
        if stack:
            stack[-1] -= 1
        if n > 0:
            stack.append(n)
            depth = max(depth, len(stack))
    return depth - 1  # the root group is not a nesting level


class _Compact:
    """Just enough of the Thrift compact protocol to walk a Parquet footer."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def list_header(self) -> tuple[int, int]:
        head = self.byte()
        count = head >> 4
        if count == 15:
            count = self.varint()
        return count, head & 0x0F

    def skip(self, kind: int, depth: int = 0) -> None:
        if depth > 64:
            raise ValueError("footer nested too deeply")
        if kind in (1, 2):  # bool true / false (in a field header)
            return
        if kind == 3:
            self.pos += 1
        elif kind in (4, 5, 6):
            self.varint()
        elif kind == 7:
            self.pos += 8
        elif kind == 8:
            length = self.varint()  # (read before pos: ``pos += varint()`` reads pos first)
            self.pos += length
        elif kind in (9, 10):
            count, elem = self.list_header()
            for _ in range(count):
                if elem in (1, 2):  # a bool in a list is one byte
                    self.byte()
                else:
                    self.skip(elem, depth + 1)
        elif kind == 11:
            count = self.varint()
            types = self.byte() if count else 0
            for _ in range(count):
                self.skip(types >> 4, depth + 1)
                self.skip(types & 0x0F, depth + 1)
        elif kind == 12:
            for _fid, sub in _FieldIter(self):
                self.skip(sub, depth + 1)
        else:
            raise ValueError(f"unknown compact type {kind}")
        if self.pos > len(self.data):
            raise ValueError("footer ends early")

    def schema_element(self) -> int:
        """A SchemaElement struct; its num_children (0 for a leaf)."""
        children = 0
        for fid, kind in _FieldIter(self):
            if fid == 5 and kind == 5:
                children = self.zigzag()
            else:
                self.skip(kind)
        return children


class _FieldIter:
    """(field id, compact type) of each field of a struct, up to its stop byte."""

    def __init__(self, reader: _Compact) -> None:
        self.reader, self.last = reader, 0

    def __iter__(self) -> _FieldIter:
        return self

    def __next__(self) -> tuple[int, int]:
        head = self.reader.byte()
        if head == 0:
            raise StopIteration
        delta, kind = head >> 4, head & 0x0F
        self.last = self.last + delta if delta else self.reader.zigzag()
        return self.last, kind
