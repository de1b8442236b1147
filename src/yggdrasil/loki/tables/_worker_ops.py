"""What the table worker runs, inside its fence: previews and queries of open files.

Loaded by name in the worker process (``sandbox/_worker_main.py``), never in the agent.
Files arrive as descriptors that the agent opened through ``Root``; polars reads them
as ``/proc/self/fd/N``, so the worker never resolves a path of its own.
"""

from __future__ import annotations

import contextlib
import os

from yggdrasil.io import PreviewData, QueryData, TableError, preview_table, query_tables

EXPECTED_ERRORS = (TableError,)


def warm() -> None:
    """Import the parsers once, at start, so that the first call does not pay for it."""
    import polars  # noqa: F401

    with contextlib.suppress(ImportError):
        import fastexcel  # noqa: F401


def fd_path(fd: int) -> str:
    proc = f"/proc/self/fd/{fd}"
    return proc if os.path.exists(proc) else f"/dev/fd/{fd}"


def preview(fds: list[int], label: str, rows: int, sheet: str = "", fmt: str = "",
            suffix: str = "") -> PreviewData:
    """The preview as data (JSON: the reply crosses a socket); the agent makes it a
    ``TableRead``."""
    (fd,) = fds
    return preview_table(fd_path(fd), rows, label=label, sheet=sheet or None, fmt=fmt or None,
                         suffix=suffix or None).summary()


def query(fds: list[int], sql: str, labels: list[list[str]], rows: int) -> QueryData:
    """``labels`` holds [path as written, label] for each descriptor, in order."""
    sources = {path: (fd_path(fd), label) for fd, (path, label) in zip(fds, labels, strict=True)}
    return query_tables(sql, sources, rows).summary()
