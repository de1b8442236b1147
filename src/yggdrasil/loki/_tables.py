"""read_table: a table file inside the root, previewed through yggdrasil.io."""

from __future__ import annotations

from dataclasses import dataclass

from ._root import Root
from .errors import PathError, ToolError


@dataclass
class TableReader:
    root: Root

    def read_table(self, path: str, rows: int = 10) -> str:
        from yggdrasil.io import TableError, preview_table

        if not 1 <= rows <= 1000:
            raise ToolError("rows must be between 1 and 1000")
        real = self.root.resolve(path)
        rel = self.root.rel(real)
        if self.root.stat(real) is None:
            raise PathError(f"{rel} does not exist")
        try:
            return preview_table(real, rows, label=rel).render()
        except TableError as exc:
            raise ToolError(str(exc)) from exc
