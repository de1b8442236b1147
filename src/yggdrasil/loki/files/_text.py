"""A file's bytes as text to edit, and back to bytes that differ only where edited.

- A BOM names the codec (UTF-8, UTF-16, UTF-32) and is written back.
- UTF-8 is the default. A file that is mostly UTF-8 but holds a few bytes that are not
  (a stray byte in a comment) is decoded with ``surrogateescape``: each such byte
  becomes a lone surrogate and is written back as the same byte, while the text the
  model adds is written as UTF-8 like the rest of the file.
- A file with high bytes and no UTF-8 sequence at all is a legacy 8-bit file: it is
  read as latin-1 (every byte round-trips) and new characters are written in it.
- An all-CRLF file is edited in LF form and written back with CRLF.

Files larger than ``MAX_EDIT_BYTES`` are refused: an edit holds the file several times
in memory (bytes, text, lines, the result), so the limit bounds memory at a few hundred
MB whatever the file; ``run`` with sed or a script streams a bigger file.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolError
from ..results import human_size
from ._root import Root

__all__ = ["MAX_EDIT_BYTES", "Encoding", "Text", "decode", "printable", "read_text", "wide_codec"]

MAX_EDIT_BYTES = 64 << 20

BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Encoding:
    """How to write text back byte for byte: BOM, codec, error handler, CRLF or not."""

    bom: bytes = b""
    codec: str = "utf-8"
    errors: str = "strict"
    crlf: bool = False

    def encode(self, text: str) -> bytes:
        if self.crlf:
            text = text.replace("\n", "\r\n")
        try:
            return self.bom + text.encode(self.codec, self.errors)
        except UnicodeEncodeError as exc:
            raise ToolError(
                f"the edit adds characters that the file's encoding ({self.codec}) cannot "
                f"hold: {printable(exc.object[exc.start:exc.end])!r}") from exc


@dataclass
class Text:
    """A file as the edit tools see it: LF text (for an all-CRLF file) and its encoding."""

    text: str
    encoding: Encoding
    data: bytes  # the bytes read, to put back if a multi-file change must be undone

    def encode(self, text: str) -> bytes:
        return self.encoding.encode(text)


def wide_codec(head: bytes) -> tuple[bytes, str] | None:
    """(BOM, codec) of a UTF-16/32 file, whose text the UTF-8 line walk cannot read as is."""
    return next(((bom, codec) for bom, codec in BOMS
                 if codec != "utf-8" and head.startswith(bom)), None)


def decode(data: bytes) -> tuple[str, Encoding]:
    """The text of ``data`` and how to encode it back (see the module docstring)."""
    for bom, codec in BOMS:
        if data.startswith(bom):
            errors = "surrogateescape" if codec == "utf-8" else "strict"
            try:
                return _lf(data[len(bom):].decode(codec, errors), Encoding(bom, codec, errors))
            except UnicodeDecodeError as exc:
                raise ToolError(f"the file starts with a {codec} BOM but is not valid {codec}: "
                                f"{exc.reason} at byte {exc.start + len(bom)}") from exc
    try:
        return _lf(data.decode("utf-8"), Encoding())
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", "surrogateescape")
    if _SURROGATES.sub("", text.translate(_ASCII)):  # a char from a valid multi-byte sequence
        return _lf(text, Encoding(errors="surrogateescape"))
    return _lf(data.decode("latin-1"), Encoding(codec="latin-1"))


_ASCII = dict.fromkeys(range(0x80))  # str.translate deletes these


def _lf(text: str, encoding: Encoding) -> tuple[str, Encoding]:
    # (a lone "\r" is found at memchr's speed; "\r\n" takes ~40x as long)
    crlf = "\r" in text and "\r\n" in text and text.count("\r\n") == text.count("\n")
    if crlf:
        text = text.replace("\r\n", "\n")
    return text, Encoding(encoding.bom, encoding.codec, encoding.errors, crlf)


def read_text(root: Root, real: Path, rel: str) -> Text:
    """The decoded text of an existing file, refusing files above ``MAX_EDIT_BYTES``."""
    data = root.read_bytes(real, limit=MAX_EDIT_BYTES)
    if data is None:
        raise ToolError(
            f"{rel} is larger than {human_size(MAX_EDIT_BYTES)}, the most the edit tools "
            "change in one go (an edit holds the file in memory several times); change it "
            "with run (sed, or a script that streams it) or split it")
    if b"\0" in data[:8192] and wide_codec(data[:4]) is None:
        raise ToolError(f"{rel} is a binary file; the edit tools change text files only")
    text, encoding = decode(data)
    return Text(text, encoding, data)


def printable(text: str) -> str:
    """``text`` safe to print or send as JSON: a byte kept as a lone surrogate shows as U+FFFD."""
    return _SURROGATES.sub("\ufffd", text)
