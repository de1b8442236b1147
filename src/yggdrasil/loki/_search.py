"""find and grep over the root (pure-Python engine).

Walks the tree without following links, skips .git, hidden and binary files, and
reports how many it skipped. Results are root-relative and capped.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ._observe import MAX_ENTRIES, MAX_HITS, clip_line, clip_list
from ._root import Root
from .errors import PathError, ToolError


@dataclass
class Skipped:
    hidden: int = 0
    binary: int = 0

    def note(self) -> str:
        parts = [f"{n} {what}" for what, n in (("hidden", self.hidden), ("binary", self.binary)) if n]
        return f"[skipped: {', '.join(parts)}]" if parts else ""


@dataclass
class Search:
    root: Root
    skipped: Skipped = field(default_factory=Skipped)

    def _start(self, path: str) -> Path:
        real = self.root.resolve(path)
        if self.root.stat(real) is None:
            raise PathError(f"{self.root.rel(real)} does not exist")
        return real

    def _walk(self, start: Path, skipped: Skipped) -> Iterator[Path]:
        if start.is_file():
            yield start
            return
        for folder, dirs, files in os.walk(start, followlinks=False):
            keep = [d for d in dirs if not d.startswith(".")]
            skipped.hidden += len(dirs) - len(keep)
            dirs[:] = sorted(keep)
            for name in sorted(files):
                if name.startswith("."):
                    skipped.hidden += 1
                    continue
                p = Path(folder, name)
                if not p.is_symlink():
                    yield p

    def find(self, pattern: str, path: str = ".") -> str:
        start = self._start(path)
        skipped = Skipped()
        hits = [
            self.root.rel(p)
            for p in self._walk(start, skipped)
            if fnmatch.fnmatch(p.name, pattern) or fnmatch.fnmatch(self.root.rel(p), pattern)
        ]
        if not hits:
            return _joined([f"no files match {pattern!r}", skipped.note()])
        rows = clip_list(hits, MAX_ENTRIES, "paths", "use a narrower pattern or path")
        return _joined([*rows, skipped.note()])

    def grep(self, pattern: str, path: str = ".", glob: str = "") -> str:
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"pattern {pattern!r} is not a valid regex: {exc}") from exc
        start = self._start(path)
        skipped = Skipped()
        hits: list[str] = []
        for p in self._walk(start, skipped):
            if glob and not fnmatch.fnmatch(p.name, glob):
                continue
            with open(p, "rb") as fh:
                data = fh.read()
            if b"\0" in data[:8192]:
                skipped.binary += 1
                continue
            rel = self.root.rel(p)
            for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{rel}:{n}: {clip_line(line)}")
                    if len(hits) > MAX_HITS:
                        break
        if not hits:
            return _joined([f"no matches for {pattern!r}", skipped.note()])
        rows = clip_list(hits, MAX_HITS, "matches", "narrow the pattern, path or glob")
        return _joined([*rows, skipped.note()])


def _joined(rows: list[str]) -> str:
    return "\n".join(r for r in rows if r)
