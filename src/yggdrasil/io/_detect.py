"""Which table format a file holds: by its bytes first, by its extension second.

Binary formats carry magic bytes (Parquet ``PAR1``, Arrow IPC ``ARROW1``, XLSX is a zip),
so their content decides even when the name lies. Text is checked to be UTF-8, then
told apart: ``[`` opens a JSON array, a first line that is a whole JSON object is NDJSON,
anything else is delimited text whose delimiter is sniffed from the first lines.
"""

from __future__ import annotations

import codecs
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ._errors import TableError

FORMATS = ("csv", "tsv", "parquet", "arrow", "json", "ndjson", "xlsx")
"""The table formats, as ``fmt=`` names them."""
SNIFF_BYTES = 64 * 1024  # what detection (and the CSV row estimate) looks at

EXTENSIONS = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
    ".parquet": "parquet", ".pq": "parquet",
    ".arrow": "arrow", ".feather": "arrow", ".ipc": "arrow",
    ".json": "json", ".ndjson": "ndjson", ".jsonl": "ndjson",
    ".xlsx": "xlsx", ".xlsm": "xlsx", ".xls": "xlsx", ".xlsb": "xlsx", ".ods": "xlsx",
}
FORMAT_NAMES = {
    "csv": "CSV", "tsv": "TSV", "parquet": "Parquet", "arrow": "Arrow IPC/Feather",
    "json": "JSON", "ndjson": "NDJSON", "xlsx": "XLSX",
}
SEPARATORS = (",", "\t", ";", "|")

_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # legacy .xls, and the wrapper of encrypted XLSX
_ENCRYPTED = "EncryptedPackage".encode("utf-16-le")
_MAGIC = ((b"PAR1", "parquet"), (b"ARROW1", "arrow"), (b"PK\x03\x04", "xlsx"), (_OLE2, "xlsx"))
_NOT_TABLES = (
    (b"\x1f\x8b", "a gzip archive; decompress it first (gunzip)"),
    (b"BZh", "a bzip2 archive; decompress it first (bunzip2)"),
    (b"\x28\xb5\x2f\xfd", "a zstd archive; decompress it first (unzstd)"),
    (b"\xff\xff\xff\xff", "an Arrow IPC stream; only the Arrow IPC file format (Feather v2) is read"),
    (b"FEA1", "a Feather v1 file, which polars cannot read; rewrite it as Feather v2"),
    (b"Obj\x01", "an Avro file; only CSV/TSV, Parquet, Arrow, JSON/NDJSON and XLSX are read"),
    (b"SQLite format 3\x00", "an SQLite database; query it with sqlite3 instead"),
    (b"%PDF", "a PDF document, not a table"),
    (b"\x89PNG", "a PNG image, not a table"),
    (b"\xff\xd8\xff", "a JPEG image, not a table"),
)
_UTF16 = (b"\xff\xfe", b"\xfe\xff")


@dataclass(frozen=True)
class Sample:
    """The first and last bytes of a file, and its size: all that detection reads."""

    head: bytes
    tail: bytes
    size: int

    @classmethod
    def of(cls, path: str | os.PathLike[str], n: int = SNIFF_BYTES) -> Sample:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(n)
            tail = head if size <= n else _read_tail(fh, size, n)
        return cls(head, tail, size)


def _read_tail(fh: BinaryIO, size: int, n: int) -> bytes:
    fh.seek(size - n)
    return fh.read(n)


@dataclass(frozen=True)
class Detected:
    fmt: str
    separator: str = ","
    note: str = ""  # e.g. "named .parquet, but the content is CSV"


def detect_format(name: str, sample: Sample, fmt: str | None = None, *,
                  suffix: str | None = None) -> Detected:
    """The format of the file ``name`` from its bytes; ``fmt`` overrides the guess.

    ``suffix`` is the extension to weigh (default: ``name``'s).
    """
    if sample.size == 0:
        raise TableError(f"{name}: is empty (0 bytes); there is no table to read")
    if fmt is not None:
        return _forced(name, sample, fmt)
    suffix = Path(name).suffix if suffix is None else suffix
    ext = EXTENSIONS.get(suffix.lower())
    found = _by_content(name, sample, ext)
    if ext and ext != found.fmt and {ext, found.fmt} != {"csv", "tsv"}:
        note = f"named {suffix}, but the content is {FORMAT_NAMES[found.fmt]}"
        return Detected(found.fmt, found.separator, note)
    return found


def _forced(name: str, sample: Sample, fmt: str) -> Detected:
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise TableError(f"{name}: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "tsv":
        return Detected("tsv", "\t")
    if fmt == "csv":
        return Detected("csv", sniff_separator(_text(name, sample.head)))
    return Detected(fmt)


def _by_content(name: str, sample: Sample, ext: str | None) -> Detected:
    head = sample.head
    for magic, fmt in _MAGIC:
        if head.startswith(magic):
            _check_binary(name, sample, fmt, ext)
            return Detected(fmt)
    for magic, what in _NOT_TABLES:
        if head.startswith(magic):
            raise TableError(f"{name}: is {what}")
    text = _text(name, head).lstrip()
    if not text:
        raise TableError(f"{name}: holds only whitespace; there is no table to read")
    if text.startswith("["):
        return Detected("json")
    if text.startswith("{"):
        return Detected("ndjson" if _is_json_object(text.split("\n", 1)[0]) else "json")
    sep = sniff_separator(text, prefer="\t" if ext == "tsv" else None)
    return Detected("tsv" if sep == "\t" else "csv", sep)


def _check_binary(name: str, sample: Sample, fmt: str, ext: str | None) -> None:
    """Refuse early what a binary format's own bytes already say cannot be read."""
    if fmt == "parquet" and not sample.tail.endswith(b"PAR1"):
        raise TableError(f"{name}: is a truncated Parquet file (it starts with PAR1 but does "
                         "not end with the PAR1 footer); it has to be written again")
    if sample.head.startswith(_OLE2) and _ENCRYPTED in sample.head + sample.tail:
        raise TableError(f"{name}: is a password-protected (encrypted) workbook; "
                         "save a copy without a password to read it")
    if sample.head.startswith(b"PK") and ext != "xlsx" and not _looks_like_workbook(sample.head):
        raise TableError(f"{name}: is a zip archive, not an XLSX workbook; unzip it first")


def _looks_like_workbook(head: bytes) -> bool:
    return any(m in head for m in (b"xl/", b"[Content_Types].xml", b"opendocument.spreadsheet"))


def _text(name: str, head: bytes) -> str:
    """``head`` decoded as UTF-8 (a cut character at the end is fine), or a TableError."""
    if head.startswith(_UTF16):
        raise TableError(f"{name}: is UTF-16 text; convert it to UTF-8 first, "
                         "e.g. `iconv -f utf-16 -t utf-8 in.csv > out.csv`")
    if b"\0" in head:
        shown = " ".join(f"{b:02x}" for b in head[:8])
        raise TableError(f"{name}: unknown table format: binary content starting with {shown}; "
                         f"read_table reads {', '.join(FORMAT_NAMES.values())}")
    try:
        return codecs.getincrementaldecoder("utf-8-sig")().decode(head, final=False)
    except UnicodeDecodeError as exc:
        raise TableError(
            f"{name}: is not UTF-8 text (byte 0x{head[exc.start]:02x} at offset {exc.start}; "
            "Latin-1 or cp1252?); convert it first, e.g. "
            "`iconv -f latin1 -t utf-8 in.csv > out.csv`") from None


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def sniff_separator(text: str, prefer: str | None = None) -> str:
    """The delimiter found the same number of times on (nearly) every one of the first lines."""
    lines = [line for line in text.splitlines()[:50] if line.strip()]
    if len(lines) > 1 and not text.endswith(("\n", "\r")):
        lines.pop()  # the sample may end in the middle of a line
    best, best_score = ",", (False, 0)
    for sep in (prefer, *SEPARATORS) if prefer else SEPARATORS:
        counts = [_count_outside_quotes(line, sep) for line in lines] or [0]
        if counts[0] == 0:
            continue
        steady = sum(c == counts[0] for c in counts) >= 0.9 * len(counts)
        if sep == prefer and steady:
            return sep
        if (steady, counts[0]) > best_score:
            best, best_score = sep, (steady, counts[0])
    return best


def _count_outside_quotes(line: str, sep: str) -> int:
    count, quoted = 0, False
    for ch in line:
        if ch == '"':
            quoted = not quoted
        elif ch == sep and not quoted:
            count += 1
    return count


def estimate_rows(sample: Sample, *, header: bool) -> int | None:
    """Rows of a line-per-row file, guessed from the average line length of its head."""
    body = sample.head[: sample.head.rfind(b"\n") + 1]
    lines = body.count(b"\n")
    if lines < 2:
        return None
    return max(round(sample.size * lines / len(body)) - int(header), 0)
