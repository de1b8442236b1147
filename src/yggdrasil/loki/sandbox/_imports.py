"""The agent process never imports a module a command planted in the root.

When the agent runs with the root on ``sys.path`` (``python -m`` or a script started from
the project, cwd first on the path), a ``polars.py`` or ``yaml.py`` that a fenced command
wrote there would shadow the installed package the next time a tool imports it, and run
unfenced, with the API key in the environment. :func:`guard_imports` puts a finder first
on ``sys.meta_path`` that, for a top-level module the ordinary search would take from
inside a guarded root:

- takes the installed one instead when there is one (the root's copy only shadows it);
- refuses with ImportError the optional modules the tools need (:data:`TOOL_MODULES`)
  when they are not installed at all, and any module that installed code asks for with
  an ``import`` statement (the standard library or an installed package: ``sqlglot``
  tries ``import sqlglotrs``, and countless packages try an optional accelerator the
  same way), since such a module can only be the root's copy;
- lets anything else through: the user's own modules, imported by the user's code or by
  name on the user's behalf (``logging.config`` handler classes, Django settings,
  ``importlib.import_module``), still import from their project.

Submodules are found through their package, so a package loaded from outside a root
keeps loading its submodules from outside.
"""

from __future__ import annotations

import dis
import importlib
import os
import sys
import sysconfig
import threading
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import FrameType, ModuleType

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
        asker, statement = _importer()
        if statement and _installed(asker) and not self._inside(asker):
            raise ModuleNotFoundError(
                f"refusing to import {fullname!r} from the agent root ({spec.origin}) for "
                f"installed code ({asker}): it is not installed", name=fullname)
        return None

    def _from_root(self, spec: ModuleSpec) -> bool:
        places = [spec.origin or "", *(spec.submodule_search_locations or [])]
        return any(p and self._inside(p) for p in places)


def _importer() -> tuple[str, bool]:
    """The file of the code that asked for the import being looked up (the first frame
    that is not the import system, ``importlib`` frozen or not), and whether it asked
    with an ``import`` statement. A module named in a string and imported by name
    (``logging.config``'s handler classes, Django's settings, ``uvicorn app:app``,
    ``importlib.import_module``) is the user's choice, not an optional accelerator."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith("<frozen importlib") or name.startswith(_IMPORTLIB)):
            code = frame.f_code.co_code
            lasti = frame.f_lasti
            return name, 0 <= lasti < len(code) and code[lasti] == _IMPORT_NAME
        frame = frame.f_back
    return "", False


_IMPORT_NAME = dis.opmap["IMPORT_NAME"]


def _installed_places() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")
             if paths.get(k)}
    found |= {os.path.realpath(p) for p in sys.path
              if p and ("site-packages" in p or "dist-packages" in p)}
    found.add(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
    return tuple(sorted(p.rstrip("/") + "/" for p in found))


def _installed(filename: str) -> bool:
    """Whether ``filename`` is code of the standard library or of an installed package
    (frozen standard modules such as ``<frozen runpy>`` included)."""
    if filename.startswith("<frozen "):
        return True
    if not filename or filename.startswith("<"):
        return False  # `python -c`, the REPL, exec'd text: the user's own code
    return os.path.realpath(filename).startswith(_INSTALLED)


_IMPORTLIB = os.path.dirname(os.path.realpath(importlib.__file__)) + "/"
_INSTALLED = _installed_places()
_GUARD = _ShadowGuard()


def guarded_roots() -> list[str]:
    """The roots guarded in this process (a worker process guards the same ones)."""
    return list(_GUARD.roots)


def guard_imports(root: str | os.PathLike[str]) -> None:
    """From now on, modules of this process are not taken from inside ``root`` when an
    installed one exists (see the module docstring). Idempotent; never removed."""
    _GUARD.add(os.path.realpath(os.fspath(root)))
    if _GUARD not in sys.meta_path:
        sys.meta_path.insert(0, _GUARD)
