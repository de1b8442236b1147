"""Which language server checks which files, and where its program is.

A :class:`ServerSpec` names a server (``python``, ``typescript``...), the command that
starts it speaking LSP on stdin/stdout, the file suffixes it checks with their LSP
language ids, and what it is told at start (``init``: initializationOptions) and when it
asks (``settings``: answers to ``workspace/configuration`` by section). :func:`default_servers`
makes the defaults for the servers found on PATH: basedpyright or pyright, typescript-
language-server (with the TypeScript installed beside it, never the repository's own),
gopls, rust-analyzer (build scripts and proc macros off: they run the repository's code)
and clangd (no background index: it would write into the root).

A program is looked up on the agent's PATH and must lie outside the root: a repository
cannot ship the binary its checks run (:func:`resolve_program`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ServerSpec", "default_servers", "resolve_program"]

_PY_ANALYSIS = {"typeCheckingMode": "standard", "diagnosticMode": "openFilesOnly",
                "autoSearchPaths": True, "useLibraryCodeForTypes": True}


@dataclass(frozen=True)
class ServerSpec:
    """One language server: ``name``, ``command`` (program and arguments), ``languages``
    (file suffix -> LSP language id), ``init`` (initializationOptions), ``settings``
    (``workspace/configuration`` answers by section: ``python.analysis``...) and ``reads``
    (folders its program runs from, kept visible inside the fence)."""

    name: str
    command: tuple[str, ...]
    languages: Mapping[str, str]
    init: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    reads: tuple[str, ...] = ()

    def language_of(self, path: str) -> str | None:
        suffix = os.path.splitext(path)[1].lower()
        return self.languages.get(suffix)

    def setting(self, section: str | None) -> Any:
        """The answer to a ``workspace/configuration`` item: the section's value, or the
        values under it as a tree (``python`` -> {"analysis": {...}})."""
        if not section:
            return _tree(self.settings)
        if section in self.settings:
            return self.settings[section]
        found = _tree(self.settings)
        for part in section.split("."):
            if not isinstance(found, dict) or part not in found:
                return None
            found = found[part]
        return found


def _tree(flat: Mapping[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for dotted, value in flat.items():
        node = tree
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def resolve_program(program: str, root: Path, path: str | None = None) -> str | None:
    """``program`` as an absolute path: as given when absolute, else found on ``path``
    (default the agent's PATH); None when missing, or when it (or what a link of it leads
    to) lies inside ``root``. The path found is kept, not where its links lead: a
    multi-call binary (rustup's proxies) tells what to be by the name it was run as."""
    found = program if os.path.isabs(program) else shutil.which(program, path=path)
    if found is None or not os.access(found, os.X_OK):
        return None
    top = Path(os.path.realpath(root))
    for candidate in (Path(os.path.abspath(found)), Path(os.path.realpath(found))):
        if candidate == top or candidate.is_relative_to(top):
            return None
    return os.path.abspath(found)


def program_reads(program: str) -> tuple[str, ...]:
    """The folders a program needs to see: its own, and the ``node_modules`` (or Python
    prefix) it belongs to, where its modules and its TypeScript live."""
    reads = [os.path.dirname(os.path.abspath(program))]
    real = os.path.realpath(program)
    reads.append(os.path.dirname(real))
    parts = Path(real).parts
    if "node_modules" in parts:
        reads.append(str(Path(*parts[: len(parts) - parts[::-1].index("node_modules")])))
    elif "site-packages" in parts:
        reads.append(str(Path(*parts[: len(parts) - parts[::-1].index("site-packages")])))
    return tuple(dict.fromkeys(reads))


def _first(names: Sequence[str], root: Path) -> tuple[str, str] | None:
    for name in names:
        real = resolve_program(name, root)
        if real is not None:
            return name, real
    return None


def _tsserver(real: str) -> str | None:
    """The tsserver.js of the TypeScript installed beside typescript-language-server (or
    on PATH as ``tsserver``)."""
    parts = Path(real).parts
    if "node_modules" in parts:
        top = Path(*parts[: len(parts) - parts[::-1].index("node_modules")])
        candidate = top / "typescript" / "lib" / "tsserver.js"
        if candidate.is_file():
            return str(candidate)
    on_path = shutil.which("tsserver")
    if on_path is not None:
        candidate = Path(os.path.realpath(on_path)).parent.parent / "lib" / "tsserver.js"
        if candidate.is_file():
            return str(candidate)
    return None


def default_servers(root: Path) -> dict[str, ServerSpec]:
    """The default servers whose programs are on PATH (outside ``root``), by name."""
    found: dict[str, ServerSpec] = {}
    python = _first(["basedpyright-langserver", "pyright-langserver"], root)
    if python is not None:
        section = "basedpyright" if python[0].startswith("based") else "python"
        found["python"] = ServerSpec(
            "python", (python[1], "--stdio"), {".py": "python", ".pyi": "python"},
            settings={"python.analysis": _PY_ANALYSIS, f"{section}.analysis": _PY_ANALYSIS},
            reads=program_reads(python[1]))
    ts = _first(["typescript-language-server"], root)
    tsserver = _tsserver(ts[1]) if ts is not None else None
    if ts is not None and tsserver is not None:
        found["typescript"] = ServerSpec(
            "typescript", (ts[1], "--stdio"),
            {".ts": "typescript", ".tsx": "typescriptreact", ".mts": "typescript",
             ".cts": "typescript", ".js": "javascript", ".jsx": "javascriptreact",
             ".mjs": "javascript", ".cjs": "javascript"},
            init={"tsserver": {"path": tsserver}, "disableAutomaticTypingAcquisition": True},
            reads=(*program_reads(ts[1]), *program_reads(tsserver)))
    go = _first(["gopls"], root)
    if go is not None:
        found["go"] = ServerSpec("go", (go[1], "serve"), {".go": "go"},
                                 reads=program_reads(go[1]))
    rust = _first(["rust-analyzer"], root)
    if rust is not None:
        found["rust"] = ServerSpec(
            "rust", (rust[1],), {".rs": "rust"},
            init={"checkOnSave": False, "cargo": {"buildScripts": {"enable": False}},
                  "procMacro": {"enable": False}},
            reads=program_reads(rust[1]))
    clangd = _first(["clangd"], root)
    if clangd is not None:
        found["c"] = ServerSpec(
            "c", (clangd[1], "--background-index=false", "--log=error"),
            {".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp",
             ".hh": "cpp"}, reads=program_reads(clangd[1]))
    return found
