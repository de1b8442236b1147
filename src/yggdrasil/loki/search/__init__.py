"""find and grep (internal): ripgrep when it is installed, else an identical Python engine.

Owns the choice of engine, the ripgrep backend (run under a read-only Landlock fence),
the descriptor-based Python walker and line matcher, globs and ignore rules (.gitignore,
.ignore, .rgignore), the protected globs compiled for both engines (``_protected``: a
``files.Protection``, ripgrep overrides), linear-time matching (RE2, ``_linear``), and how
hits and skipped files are collected and rendered. Both engines give byte-identical output.
``list_files`` hands the same walk to other hands (code/) that read files themselves, and
``PathCheck`` says whether that walk would list one path, without walking.
Imports ``files`` (Root, the observation caps), ``sandbox`` (the fence) and ``errors``.
"""

from __future__ import annotations

from ._found import Skips
from ._globs import GlobError, IgnoreFile, glob_regex
from ._listing import Listing, list_files
from ._protected import protection, rg_overrides
from ._pysearch import COUNT_LIMIT
from ._rg import find_rg
from ._search import Backend, Search
from ._walk import PathCheck, Visit

__all__ = [
    "COUNT_LIMIT",
    "Backend",
    "GlobError",
    "IgnoreFile",
    "Listing",
    "PathCheck",
    "Search",
    "Skips",
    "Visit",
    "find_rg",
    "glob_regex",
    "list_files",
    "protection",
    "rg_overrides",
]
