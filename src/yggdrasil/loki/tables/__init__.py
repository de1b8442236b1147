"""read_table and query_table (internal): table files in the root, through ``yggdrasil.io``.

Owns opening each table file through ``Root`` and handing the open descriptor (never the
path) to the toolbox's fenced, limited table worker (``sandbox.FencedWorker``), which runs
``_worker_ops`` (``yggdrasil.io``) in its own process; turns io's errors, the worker's crashes
and its limits into observations. Imports ``files``, ``errors``, ``sandbox`` and, on
first use, ``yggdrasil.io`` (in the agent only to find a query's files).
"""

from __future__ import annotations

from ._reader import TableReader

__all__ = ["TableReader"]
