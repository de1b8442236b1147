"""yggdrasil.io: tabular files (CSV, Parquet) opened lazily and previewed.

Importing this package does no work; polars is imported on first use.
"""

from __future__ import annotations

from .tables import TableError, TablePreview, preview_table

__all__ = ["TableError", "TablePreview", "preview_table"]
