"""Diagnostics: what checkers say about the files an edit changed (internal).

Owns the :class:`Diagnostician` of a toolbox (which files a call changed, what each
change introduced compared with the file before it, pending checks and their late
findings, ``diagnostics(paths)``), ruff for Python (``_ruff``: its binary over private
copies of the texts, the project's configuration not read), a small pool of warm
language servers started on first use and restarted with backoff when they fail
(``_pool``), each spoken to in LSP with ``lsprotocol``'s types (``_client``, ``_wire``)
and started in the fence the toolbox hands in (``_launch``), the default servers found
on PATH (``_servers``), and the comparison by message and symbol (``_compare``).
Imports ``files`` (``Root``), ``sandbox`` (processes), ``results`` and ``errors``.
"""

from __future__ import annotations

from ._client import LanguageClient, ServerFailed
from ._compare import introduced, ranked
from ._engine import Diagnostician, DiagnosticLimits, Watched, changed_spans
from ._launch import Fence, Launcher
from ._pool import MAX_FAILURES, Pool
from ._ruff import RUFF_SUFFIXES, Ruff, RuffFailed, find_ruff
from ._servers import ServerSpec, default_servers, resolve_program

__all__ = [
    "MAX_FAILURES",
    "RUFF_SUFFIXES",
    "DiagnosticLimits",
    "Diagnostician",
    "Fence",
    "LanguageClient",
    "Launcher",
    "Pool",
    "Ruff",
    "RuffFailed",
    "ServerFailed",
    "ServerSpec",
    "Watched",
    "changed_spans",
    "default_servers",
    "find_ruff",
    "introduced",
    "ranked",
    "resolve_program",
]
