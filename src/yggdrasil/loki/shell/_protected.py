"""Which protected paths of the root a command gets masked (``Root.protect``).

Before each command the tracker's view of the root (kept current by inotify, see
``_watch``) is matched against the protected globs, so the list is as fresh as the
command: a ``.env`` made by an earlier command, by a tool or by the user is masked from
the next command on. Only the outermost protected path is listed (a protected folder
covers its contents). Matches are remembered per path, so a command costs the names that
are new since the last one, not a match per file of the tree.

Folders the tracker does not walk (``.git``, ``node_modules``, virtualenvs, caches) are
not looked into: what matches there is package data (certifi's ``cacert.pem``), and
masking it would break the tools that read it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..files import Protection
from ._changes import SKIP_DIRS

_MAX_REMEMBERED = 1_000_000  # paths; past this the memory is dropped and rebuilt


class ProtectedPaths:
    """The protected paths of a tree, remembered between calls."""

    def __init__(self, protect: Protection) -> None:
        self.protect = protect
        self._dirs: dict[str, bool] = {}
        self._files: dict[str, bool] = {}

    def outermost(self, files: Iterable[str], dirs: Iterable[str]) -> list[str]:
        """Root-relative protected paths among ``files`` and ``dirs``, none inside another."""
        if len(self._dirs) + len(self._files) > _MAX_REMEMBERED:
            self._dirs.clear()
            self._files.clear()
        covered: set[str] = set()
        found = []
        for rel in sorted((d for d in dirs if d), key=lambda d: d.count("/")):
            parent = rel.rpartition("/")[0]
            if parent in covered:
                covered.add(rel)
            elif self._is(self._dirs, rel, True):
                covered.add(rel)
                found.append(rel)
        for rel in files:
            if rel.rpartition("/")[0] not in covered and self._is(self._files, rel, False):
                found.append(rel)
        return sorted(found)

    def _is(self, memo: dict[str, bool], rel: str, is_dir: bool) -> bool:
        hit = memo.get(rel)
        if hit is None:
            hit = memo[rel] = self.protect.entry(rel, is_dir) is not None
        return hit


def walk_protected(root: str, protect: Protection) -> list[str]:
    """The same list from a walk of its own (a tree too big for the tracker's view)."""
    found: list[str] = []
    stack = [""]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(os.path.join(root, folder)) as it:
                entries = list(it)
        except OSError:
            continue
        if folder and any(e.name == "pyvenv.cfg" for e in entries):
            continue
        for entry in entries:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if protect.entry(rel, is_dir) is not None:
                found.append(rel)
            elif is_dir and entry.name not in SKIP_DIRS:
                stack.append(rel)
    return sorted(found)
