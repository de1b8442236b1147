"""TableError, and the one place where polars / fastexcel / OS errors become TableErrors.

A reader never lets a foreign exception out: every parser call runs inside
:func:`translating`, which maps what the libraries raise to a one-line message that names
the file, says what is wrong with it, and (where there is one) what to do instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

MAX_DETAIL = 300  # characters of a library's own message kept in ours


class TableError(ValueError):
    """A file that cannot be read as a table; the message names the file and the problem."""


def is_library_failure(exc: BaseException) -> bool:
    """True for what a parser raises on bad input (not for our own TableError, or Ctrl-C)."""
    if isinstance(exc, TableError):
        return False
    # polars/pyo3 raise PanicException, a BaseException, on some corrupt inputs.
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"


@contextmanager
def translating(name: str, fmt: str) -> Iterator[None]:
    """Run a read of ``name`` (as ``fmt``); any library failure becomes a TableError."""
    try:
        yield
    except BaseException as exc:
        if not is_library_failure(exc):
            raise
        raise explain(exc, name, fmt) from exc


def known_problem(exc: BaseException, fmt: str = "") -> str | None:
    """What a library's message means for a file of format ``fmt`` ('' for any format)."""
    low, detail = str(exc).lower(), first_line(str(exc))
    for formats, needles, problem in _KNOWN:
        if (not fmt or fmt in formats) and any(n in low for n in needles):
            return problem.format(detail=detail)
    return None


def explain(exc: BaseException, name: str, fmt: str) -> TableError:
    """The TableError that tells a reader what ``exc`` means for file ``name``."""
    detail = first_line(str(exc))
    problem = known_problem(exc, fmt)
    if problem is not None:
        return TableError(f"{name}: {problem}")
    if isinstance(exc, FileNotFoundError):
        return TableError(f"{name}: does not exist")
    if isinstance(exc, OSError):
        return TableError(f"{name}: cannot be read: {exc.strerror or detail}")
    if isinstance(exc, UnicodeDecodeError):
        return TableError(f"{name}: {_NOT_UTF8.format(detail=detail)}")
    return TableError(f"{name}: cannot be read as {fmt}: {detail}")


def first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no details"
    return line if len(line) <= MAX_DETAIL else line[:MAX_DETAIL] + " [...]"


_NOT_UTF8 = ("is not UTF-8 text ({detail}); convert it first, e.g. "
             "`iconv -f latin1 -t utf-8 in.csv > out.csv`, or read it in run_python with "
             "polars.read_csv(..., encoding='utf8-lossy')")

_TEXT = ("CSV", "TSV", "JSON", "NDJSON")
# (formats it applies to, substrings of the lowercased library message, what to tell the
# reader); the first match wins.
_KNOWN: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (_TEXT, ("invalid utf-8", "invalid utf8", "utf-8 sequence"), _NOT_UTF8),
    (_TEXT, ("found more fields than defined",),
     "has ragged rows: a row has more fields than the header ({detail}); fix the file, "
     "or look at the raw lines with read_file"),
    (_TEXT, ("empty csv", "empty data"), "holds no table: no header and no rows"),
    (("JSON",), ("can only deserialize json objects",),
     "is not a JSON array of records (objects) ({detail})"),
    (("Parquet",), ("parquet", "out of spec", "thrift", "eof"),
     "is a truncated or corrupt Parquet file ({detail}); it has to be written again"),
    (("Arrow IPC/Feather",), ("arrow", "ipc", "out-of-spec", "out of spec", "footer", "eof"),
     "is a truncated or corrupt Arrow IPC file ({detail})"),
    (("XLSX",), ("password", "encrypt"),
     "is password-protected (encrypted); save a copy without a password to read it"),
    (("XLSX",), ("zip", "eocd", "xlsx error", "calamine error", "cannot detect file format"),
     "is not a valid XLSX workbook, it is corrupt or truncated ({detail})"),
    (_TEXT, ("could not parse", "conversion from", "failed to parse"),
     "a value does not fit the column type inferred from the first rows ({detail})"),
]
