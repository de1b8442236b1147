"""The edit tools with diagnostics: each call's changes checked, what they introduced said.

:func:`diagnosed` wraps a file tool's function (write_file, edit_file, apply_patch): the
diagnostician watches the files the call changes, then reports the diagnostics the
change introduced; they go into the result (``diagnostics`` and ``diagnosis`` of an edit's
typed result, rendered after its diff) and never stop the edit: a checker that fails
says so in the diagnosis. :func:`diagnostics_tool` is ``diagnostics(paths)``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from ..diagnostics import Diagnostician
from ..errors import LokiError, PathError, ToolError
from ..files import Root
from ..results import DiagnosticsReport, diagnosis_lines
from ._tool import Tool

__all__ = ["diagnosed", "diagnostics_tool"]

MAX_FILES = 200  # files one diagnostics(paths) call checks
_SKIP_FOLDERS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache",
                 ".ruff_cache", ".tox", "dist", "build", "target"}


def diagnosed(fn: Callable[..., Any], doctor: Diagnostician) -> Callable[..., Any]:
    """``fn`` (a file tool) whose result also says the diagnostics its changes introduced."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with doctor.watch() as watched:
            result = fn(*args, **kwargs)
        found, diagnosis = doctor.report(watched)
        if diagnosis is None:
            return result
        if isinstance(result, BaseModel) and "diagnostics" in type(result).model_fields:
            return result.model_copy(update={"diagnostics": found, "diagnosis": diagnosis})
        lines = diagnosis_lines(found, diagnosis)
        if not isinstance(result, str) or not lines:
            return result
        return result + ("" if result.endswith("\n") else "\n") + "\n".join(lines)
    return run


def diagnostics_tool(root: Root, doctor: Diagnostician) -> Tool:
    def diagnostics(paths: list[str]) -> DiagnosticsReport:
        files = _files(root, doctor, paths)
        return doctor.diagnostics(files, wait=max(doctor.limits.wait, 10.0))

    return Tool(
        "diagnostics", "Every diagnostic (errors first, then warnings) that ruff and the "
        "language servers report for these files: what is wrong in them now, old problems "
        "included (an edit's answer already lists what that edit introduced).",
        {"paths": "files or folders, relative to the root (a folder: the files in it a "
                   "checker reads, at most 200)"},
        diagnostics, title="Diagnostics of files", idempotent=True)


def _files(root: Root, doctor: Diagnostician, paths: list[str]) -> list[str]:
    if not paths:
        raise ToolError("paths is empty; give files or folders, e.g. ['src/app.py']",
                        category="argument")
    found: list[str] = []
    for path in paths:
        real = root.resolve(path)
        rel = root.rel(real)
        if real.is_dir():
            found += _walk(root, real, doctor, MAX_FILES - len(found))
        elif real.is_file():
            found.append(rel)
        else:
            raise PathError(f"{rel} does not exist; give files or folders inside the root")
    return [rel for rel in dict.fromkeys(found) if doctor.checks(rel)][:MAX_FILES]


def _walk(root: Root, folder: os.PathLike[str], doctor: Diagnostician, room: int) -> list[str]:
    """The checkable files under ``folder`` (no link followed, vendored and hidden
    folders skipped), at most ``room``."""
    found: list[str] = []
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_FOLDERS and not d.startswith("."))
        for name in sorted(names):
            try:
                rel = root.rel(root.resolve(os.path.join(top, name)))
            except LokiError:  # protected, or a link out of the root
                continue
            if doctor.checks(rel):
                found.append(rel)
                if len(found) >= room:
                    return found
    return found
