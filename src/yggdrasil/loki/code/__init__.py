"""Code navigation by structure (internal): outlines, symbols and a map of the repository.

Owns the per-root code index (tree-sitter outlines and identifier lists, kept current by
size/mtime/ctime/inode, bounded in memory, optionally cached under the user's cache
folder), the language table, find_symbol's name matching, the PageRank that ranks
definitions for the repo map, and how all of it is rendered. Imports ``files`` (Root,
caps), ``search`` (the same walk, ignore rules and skipped counts as grep) and
``errors``; tree-sitter (the ``code`` extra) is imported only when a file is parsed.
"""

from __future__ import annotations

from ._code import MAX_BUDGET, MIN_BUDGET, Code
from ._extract import grammars_available, syntax_error
from ._languages import LANGUAGES
from ._match import KINDS, MAX_NAME
from ._roots import cache_wanted
from ._store import CACHE_KEY, cache_hidden

__all__ = ["CACHE_KEY", "KINDS", "LANGUAGES", "MAX_BUDGET", "MAX_NAME", "MIN_BUDGET", "Code", "cache_hidden", "cache_wanted",
           "grammars_available", "syntax_error"]
