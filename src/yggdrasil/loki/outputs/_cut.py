"""Cutting a long output so that nothing is lost: head, tail, the lines that look like
errors from the middle, and the id of the whole.

The lines kept from the cut part are those a person would look for in a failing build or
test run: a Python traceback (with the frames under it and the exception line), lines
that say ``error``, ``FAILED``, ``fatal``, ``panic`` or ``Exception``, and compiler
diagnostics (``file:line:col: error``, rust's ``error[E0308]``, tsc's ``file(3,5):
error``). They are shown with their line number in the whole output, as read_file shows
lines, so ``read_file(path=<id>, start=<n>)`` reads around one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import re2

from yggdrasil.io import human_size

from ._spill import Spill
from ._tokens import Tokens

__all__ = ["ERROR_WORDS", "ErrorLine", "cut_text", "errors_note", "scan_errors", "seen_note"]

ERROR_WORDS = "error|FAILED|Traceback|fatal|panic|Exception"  # for the grep the note suggests
# What a line that looks like an error holds; searched for by RE2 (linear time, a DFA:
# 20 MB scanned in ~0.1 s), then widened to its line.
_ERROR = re2.compile(
    rb"Traceback \(most recent call last\)|[Ee]rror\b|ERROR|\bERR!|FAILED|\bFAIL\b|\b[Ff]atal\b|"
    rb"FATAL|\bpanic(?:ked)?\b|Exception\b|Segmentation fault")
_TRACEBACK = b"Traceback (most recent call last)"
MAX_FIRST, MAX_LAST = 20, 40  # error lines kept from the start and the end of the cut part
TRACEBACK_LINES = 30  # lines of one traceback kept at most
LINE_CHARS = 300  # characters of one kept line
SCAN_BYTES = 64 << 20  # bytes of a cut part looked at for error lines at most
_CHUNK = 4 << 20


@dataclass(frozen=True)
class ErrorLine:
    """A line of the cut part that looks like an error: its 1-based number in the whole
    output, and its text (cut at ``LINE_CHARS``)."""

    line: int
    text: str


def _shown(raw: bytes) -> str:
    text = raw.rstrip(b"\r").decode("utf-8", "replace")
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + " [...]"


def _found(data: bytes, first_line: int) -> Iterator[ErrorLine]:
    """Error lines in ``data`` (whole lines), numbered from ``first_line``; a traceback
    brings the lines under it up to its exception line."""
    line, at, pos = first_line, 0, 0
    while (match := _ERROR.search(data, pos)) is not None:
        start = data.rfind(b"\n", 0, match.start()) + 1
        end = data.find(b"\n", match.end())
        end = len(data) if end < 0 else end
        line += data.count(b"\n", at, start)
        at, pos = start, end + 1
        text = data[start:end]
        yield ErrorLine(line, _shown(text))
        if _TRACEBACK in text:
            yield from _frames(data, end, line)


def _frames(data: bytes, start: int, line: int) -> Iterator[ErrorLine]:
    for n in range(1, TRACEBACK_LINES):
        if start >= len(data):
            return
        end = data.find(b"\n", start + 1)
        end = len(data) if end < 0 else end
        raw = data[start + 1 : end]
        yield ErrorLine(line + n, _shown(raw))
        if raw[:1] not in (b" ", b"\t"):  # the exception line ends the traceback
            return
        start = end


def _chosen(found: Iterable[ErrorLine]) -> tuple[list[ErrorLine], int]:
    """The first MAX_FIRST and last MAX_LAST distinct lines, and how many others."""
    first: list[ErrorLine] = []
    last: list[ErrorLine] = []
    seen: set[int] = set()
    skipped = 0
    for item in found:
        if item.line in seen:
            continue
        seen.add(item.line)
        if len(first) < MAX_FIRST:
            first.append(item)
            continue
        last.append(item)
        if len(last) > MAX_LAST:
            last.pop(0)
            skipped += 1
    return first + last, skipped


def scan_errors(path: Path, start: int, end: int) -> tuple[list[ErrorLine], int, bool]:
    """Error lines of the file's bytes ``start``..``end`` (the cut part), numbered in the
    whole file: (the lines kept, how many more there are, whether the scan stopped at
    ``SCAN_BYTES`` before the end of the part)."""
    with open(path, "rb") as fh:
        line, left = 1, start
        while left > 0:  # the lines before the cut part (the head: small)
            chunk = fh.read(min(_CHUNK, left))
            if not chunk:
                break
            line += chunk.count(b"\n")
            left -= len(chunk)
        fh.seek(start)
        size = os.fstat(fh.fileno()).st_size
        stop = min(end, start + SCAN_BYTES, size)

        def pieces() -> Iterator[ErrorLine]:
            nonlocal line
            carry = b""
            while fh.tell() < stop:
                chunk = fh.read(min(_CHUNK, stop - fh.tell()))
                if not chunk:  # the kept file ends first (it keeps the start only)
                    break
                data = carry + chunk
                whole = data.rfind(b"\n") + 1 if fh.tell() < stop else len(data)
                if whole == 0 and len(data) >= _CHUNK:  # a line of megabytes: taken in
                    whole = len(data)  # pieces, so memory stays at a chunk or two
                piece, carry = data[:whole], data[whole:]
                yield from _found(piece, line)
                line += piece.count(b"\n")

        kept, more = _chosen(pieces())
    return kept, more, min(end, size) > stop


def errors_note(found: list[ErrorLine], more: int, whole: str, output_id: str | None,
                stopped: bool = False) -> str:
    """The lines kept from the cut part, each as ``<n>\\t<text>``, between two notes."""
    if not found:
        return ""
    lines = [f"[lines of the cut part that look like errors, by their line number in the "
             f"whole {whole}:]"]
    lines += [f"{item.line}\t{item.text}" for item in found]
    if more or stopped:
        where = f"grep(pattern='{ERROR_WORDS}', path='{output_id}')" if output_id else \
            "run it again with less output"
        what = f"{more} more such lines not shown" if more else "lines past the first " \
            f"{human_size(SCAN_BYTES)} of the cut part not looked at"
        lines.append(f"[... {what}: {where} ...]")
    else:
        lines.append("[... end of the lines kept from the cut part ...]")
    return "\n".join(lines) + "\n"


def seen_note(output_id: str | None, whole: str, only: int = 0) -> str:
    """The clause of a cut note that says where the whole is: ``; the whole stdout is kept
    as output://...: read_file or grep it``; ``only``: the bytes kept when not all were."""
    if output_id is None:
        return ""
    part = f" (its first {human_size(only)} only)" if only else ""
    return (f"; the whole {whole} is kept{part} as {output_id}: read_file(path='{output_id}', "
            "start=N) or grep(pattern, path=...) shows any part")


def cut_text(text: str, budget: int, tokens: Tokens, spill: Spill | None = None,
             whole: str = "output") -> str:
    """``text`` within ``budget`` tokens: unchanged when it fits; else its head (3/4)
    and tail (1/4), the lines from the middle that look like errors, and a note that
    says what was cut and where the whole is kept (``spill``)."""
    if tokens.fits(text, budget):
        return text
    output_id = spill.keep(text) if spill is not None else None
    room = max(1, budget - min(1_500, budget // 5) - 100)
    head = tokens.head(text, room * 3 // 4)
    rest = text[len(head):]
    tail = tokens.tail(rest, room - room * 3 // 4)
    middle = rest[: len(rest) - len(tail)]
    found, more = _chosen(_found(middle.encode("utf-8", "surrogateescape"),
                                 head.count("\n") + 1))
    errors = errors_note(found, more, whole, output_id)
    if not tokens.fits(errors, budget // 5 + 200):
        errors = tokens.head(errors, budget // 5) + "[... more lines that look like errors cut]\n"
    lines = middle.count("\n")
    how = seen_note(output_id, whole) or "; ask for less at a time"
    note = f"[... {lines} lines ({len(middle)} characters) cut from the middle{how} ...]"
    sep = "" if head.endswith("\n") or not head else "\n"
    return f"{head}{sep}{note}\n{errors}{tail}"
