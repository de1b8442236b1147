"""read_table and query_table: table files inside the root, read through yggdrasil.io.

Every file is resolved and opened by :class:`Root` (no symlink followed, regular files
only), and polars is handed ``/proc/self/fd/N`` of that open descriptor rather than the
path: a symlink swapped in after the check cannot redirect the read. Where /proc is
missing, the resolved path is passed instead.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from annotated_types import Interval

from ..errors import ToolError
from ..files import Root


def fd_path(fd: int, real: Path) -> str:
    """A path that reopens exactly the file behind ``fd`` (Linux), else the checked path."""
    proc = f"/proc/self/fd/{fd}"
    return proc if os.path.exists(proc) else str(real)


@dataclass
class TableReader:
    root: Root

    def _open(self, path: str, stack: ExitStack) -> tuple[str, str]:
        """(a path polars can read, the root-relative label); the fd lives as long as ``stack``."""
        real = self.root.resolve(path)
        fd = stack.enter_context(self.root.open_file(real))
        return fd_path(fd, real), self.root.rel(real)

    def read_table(self, path: str, rows: Annotated[int, Interval(ge=0, le=1000)] = 10,
                   sheet: str = "") -> str:
        from yggdrasil.io import TableError, preview_table

        with ExitStack() as stack:
            source, rel = self._open(path, stack)
            try:
                return preview_table(source, rows, label=rel, sheet=sheet or None).render()
            except TableError as exc:
                raise ToolError(str(exc)) from exc

    def query_table(self, sql: str, rows: Annotated[int, Interval(ge=1, le=1000)] = 50) -> str:
        from yggdrasil.io import TableError, find_table_refs, query_tables
        from yggdrasil.io.query import MAX_FILES

        paths = list(dict.fromkeys(ref.path for ref in find_table_refs(sql)))
        if len(paths) > MAX_FILES:  # refused before any of them is opened
            raise ToolError(f"the query names {len(paths)} files; at most {MAX_FILES} per query")
        with ExitStack() as stack:
            sources = {path: self._open(path, stack) for path in paths}
            try:
                return query_tables(sql, sources, rows).render()
            except TableError as exc:
                raise ToolError(str(exc)) from exc
