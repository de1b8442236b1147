"""read_table and query_table (internal): table files in the root, through ``yggdrasil.io``.

Owns opening each table file through ``Root`` (polars reads the checked descriptor, never
the path) and turning io's errors into observations. Imports ``files``, ``errors`` and,
on first use, ``yggdrasil.io``.
"""

from __future__ import annotations

from ._reader import TableReader

__all__ = ["TableReader"]
