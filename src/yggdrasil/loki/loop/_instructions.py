"""Project instructions: the AGENTS.md files a run reads, and the user's own instructions.

AGENTS.md (agents.md, read by Codex, Cursor, Jules, Aider...) is a README for agents: the
nearest files apply, from the repository's top down to the folder the agent works in,
a more specific one later (so it wins where they disagree). The repository's top is the
nearest folder at or above the root holding ``.git``; without one, only the root's own
file is read. Each file is read through a ``Root`` with the toolbox's protected globs,
never with ``open()``: a protected AGENTS.md (or a link to a secret named AGENTS.md) is
not read, and is said to be. What is read is capped (``MAX_INSTRUCTIONS`` characters in
all); a cut says where.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LokiError
from ..files import Root

__all__ = ["AGENTS_FILE", "MAX_INSTRUCTIONS", "Instructions", "gather_instructions"]

AGENTS_FILE = "AGENTS.md"
MAX_INSTRUCTIONS = 32_768  # characters, as Codex's project_doc_max_bytes (32 KiB)
_READ_LIMIT = 4 * MAX_INSTRUCTIONS  # bytes read of one file at most (UTF-8: up to 4 a character)


@dataclass
class Instructions:
    """What a run is told beyond its task: each part labelled with where it came from."""

    parts: list[tuple[str, str]] = field(default_factory=list)  # (source, text)
    notes: list[str] = field(default_factory=list)  # files skipped or cut, and why

    @property
    def sources(self) -> list[str]:
        return [source for source, _ in self.parts]

    def text(self) -> str:
        return "\n\n".join(f"## {source}\n{body}" for source, body in self.parts)


def repository_folders(root: Path) -> list[Path]:
    """The folders whose AGENTS.md apply to ``root``: the repository's top first."""
    chain = [root, *root.parents]
    for i, folder in enumerate(chain):
        if (folder / ".git").exists():
            return list(reversed(chain[: i + 1]))
    return [root]


def gather_instructions(root: Root, *extra: tuple[str, str], agents_md: bool = True,
                        limit: int = MAX_INSTRUCTIONS) -> Instructions:
    """The AGENTS.md files for ``root`` (when ``agents_md``), then ``extra`` (source, text)
    pairs (the user's own instructions), all within ``limit`` characters."""
    found = Instructions()
    left = limit
    sources = _agents_files(root, found.notes) if agents_md else []
    for source, text in [*sources, *((s, t) for s, t in extra if t.strip())]:
        if left <= 0:
            found.notes.append(f"{source}: not read, the instructions are over {limit} characters")
            continue
        if len(text) > left:
            found.notes.append(f"{source}: cut at {left} of {len(text)} characters")
            text = text[:left] + (f"\n[cut: the instructions are capped at {limit} characters; "
                                  f"{len(text) - left} more characters of {source} not shown]")
        left -= len(text)
        found.parts.append((source, text.strip()))
    return found


def _agents_files(root: Root, notes: list[str]) -> list[tuple[str, str]]:
    folders = repository_folders(root.path)
    top = folders[0]
    files = []
    for folder in folders:
        label = (folder / AGENTS_FILE).relative_to(top).as_posix()
        if top != root.path:
            label = f"{label} (in {top})"
        text = _read(root, folder, notes, label)
        if text is not None:
            files.append((label, text))
    return files


def _read(root: Root, folder: Path, notes: list[str], label: str) -> str | None:
    """The file's text, read through a Root (the toolbox's, or one with its protected
    globs for a folder above it); None when it is absent, protected or unreadable."""
    where = root if folder == root.path else Root(folder, root.protect)
    if not os.path.lexists(folder / AGENTS_FILE):
        return None
    try:
        with where.open_file(where.resolve(AGENTS_FILE)) as fd:
            data = _head(fd, _READ_LIMIT)  # the cap cuts it below; the rest is never read
    except LokiError as exc:  # protected, a folder, a link out of its folder, a FIFO...
        notes.append(f"{label}: not read ({exc})")
        return None
    except OSError as exc:
        notes.append(f"{label}: not read ({exc.strerror or exc})")
        return None
    return data.decode("utf-8", "replace")


def _head(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
