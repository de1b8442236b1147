"""read_table and query_table: table files inside the root, read through yggdrasil.io.

Every file is resolved and opened by :class:`Root` (no symlink followed, regular files
only), and polars is handed ``/proc/self/fd/N`` of that open descriptor rather than the
path: a symlink swapped in after the check cannot redirect the read. Where /proc is
missing, the resolved path is passed instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from ._root import Root
from .errors import ToolError


def fd_path(fd: int, real: Path) -> str:
    """A path that reopens exactly the file behind ``fd`` (Linux), else the checked path."""
    proc = f"/proc/self/fd/{fd}"
    return proc if os.path.exists(proc) else str(real)


@dataclass
class TableReader:
    root: Root

    @contextmanager
    def _opened(self, path: str, stack: ExitStack) -> Iterator[tuple[str, str]]:
        real = self.root.resolve(path)
        fd = stack.enter_context(self.root.open_file(real))
        yield fd_path(fd, real), self.root.rel(real)

    def read_table(self, path: str, rows: int = 10, sheet: str = "") -> str:
        from yggdrasil.io import TableError, preview_table

        if not 0 <= rows <= 1000:
            raise ToolError("rows must be between 0 and 1000")
        with ExitStack() as stack, self._opened(path, stack) as (source, rel):
            try:
                return preview_table(source, rows, label=rel, sheet=sheet or None).render()
            except TableError as exc:
                raise ToolError(str(exc)) from exc

    def query_table(self, sql: str, rows: int = 50) -> str:
        from yggdrasil.io import TableError, find_table_refs, query_tables

        if not 1 <= rows <= 1000:
            raise ToolError("rows must be between 1 and 1000")
        with ExitStack() as stack:
            sources: dict[str, tuple[str | Path, str]] = {}
            for ref in find_table_refs(sql):
                if ref.path not in sources:
                    sources[ref.path] = stack.enter_context(self._opened(ref.path, stack))
            try:
                return query_tables(sql, sources, rows).render()
            except TableError as exc:
                raise ToolError(str(exc)) from exc
