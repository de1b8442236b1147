"""The agent process never imports a module a command planted in the root.

When the agent runs with the root on ``sys.path`` (``python -m`` or a script started from
the project, cwd first on the path), a ``polars.py`` or ``yaml.py`` that a fenced command
wrote there would shadow the installed package the next time a tool imports it, and run
unfenced, with the API key in the environment. :func:`guard_imports` puts a finder first
on ``sys.meta_path`` that, for a top-level module the ordinary search would take from
inside a guarded root:

- takes the installed one instead when there is one (the root's copy only shadows it);
- refuses with ImportError the optional modules the tools need (:data:`TOOL_MODULES`)
  when they are not installed at all;
- lets anything else through: the user's own modules still import from their project.

Submodules are found through their package, so a package loaded from outside a root
keeps loading its submodules from outside.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType

# What the tools import lazily (and what those import): never from an agent root.
TOOL_MODULES = frozenset({
    "polars", "pyarrow", "pandas", "numpy", "fastexcel", "python_calamine", "openpyxl",
    "yaml", "tomllib", "tomli", "PIL", "lxml", "trafilatura", "httpx", "httpcore", "h11",
    "h2", "certifi", "idna", "sniffio", "anyio", "charset_normalizer", "openai",
    "anthropic", "rich", "mcp", "mcp_types", "pydantic", "pydantic_core",
    "tree_sitter", "tree_sitter_language_pack", "sqlglot", "ripgrep",
})


class _ShadowGuard(MetaPathFinder):
    def __init__(self) -> None:
        self.roots: list[str] = []
        self._lock = threading.Lock()

    def add(self, root: str) -> None:
        with self._lock:
            if root not in self.roots:
                self.roots.append(root)

    def _inside(self, path: str) -> bool:
        real = os.path.realpath(path or os.curdir)
        return any(real == r or real.startswith(r.rstrip("/") + "/") for r in self.roots)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if path is not None or not self.roots:
            return None  # a submodule: its package says where it lives
        entries = [e for e in sys.path if isinstance(e, str)]
        planted = [e for e in entries if self._inside(e)]
        if not planted:
            return None
        spec = PathFinder.find_spec(fullname, entries)
        if spec is None or not self._from_root(spec):
            return None
        outside = PathFinder.find_spec(fullname, [e for e in entries if e not in planted])
        if outside is not None:
            return outside
        if fullname in TOOL_MODULES:
            raise ImportError(f"refusing to import {fullname!r} from the agent root "
                              f"({spec.origin}): the tools import it from the installed "
                              "packages only, and it is not installed", name=fullname)
        return None

    def _from_root(self, spec: ModuleSpec) -> bool:
        places = [spec.origin or "", *(spec.submodule_search_locations or [])]
        return any(p and self._inside(p) for p in places)


_GUARD = _ShadowGuard()


def guard_imports(root: str | os.PathLike[str]) -> None:
    """From now on, modules of this process are not taken from inside ``root`` when an
    installed one exists (see the module docstring). Idempotent; never removed."""
    _GUARD.add(os.path.realpath(os.fspath(root)))
    if _GUARD not in sys.meta_path:
        sys.meta_path.insert(0, _GUARD)
