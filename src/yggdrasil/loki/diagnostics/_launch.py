"""Starting a language server's process: in the fence, with a scratch folder of its own.

The toolbox hands in how a reader of the root is fenced (``Fence``: the shell's
``reader_argv``: the root read-only, no network, hidden and protected paths out of sight,
writes only to the server's scratch folder). Each process gets a new scratch folder,
removed when the launcher closes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from ..sandbox import Capture, Process
from ._wire import Frames

__all__ = ["Fence", "Launcher"]

# fence(argv, scratch, reads) -> (argv to run, its environment, reaped by the launcher)
Fence = Callable[[list[str], Path, Sequence[str]], tuple[list[str], dict[str, str], bool]]


class Launcher:
    """Starts server processes in ``root`` through ``fence`` (None: unfenced, with the
    agent's environment: for a toolbox whose sandbox is off)."""

    def __init__(self, root: Path, fence: Fence | None, reads: Sequence[str] = ()) -> None:
        self.root, self.fence, self.reads = root, fence, tuple(reads)
        self.scratches: list[str] = []

    def __call__(self, argv: list[str], stdout: Frames, stderr: Capture) -> Process:
        scratch = Path(tempfile.mkdtemp(prefix="loki-lsp-"))
        self.scratches.append(str(scratch))
        (scratch / "cache").mkdir()
        if self.fence is None:
            env = {**os.environ, "TMPDIR": str(scratch), "XDG_CACHE_HOME": str(scratch / "cache")}
            run, reaped = argv, False
        else:
            run, env, reaped = self.fence(argv, scratch, (*self.reads, *_reads_of(argv)))
        return Process(run, cwd=str(self.root), stdout=stdout, stderr=stderr, env=env,
                       reaped=reaped, stdin=True)

    def close(self) -> None:
        for folder in self.scratches:
            shutil.rmtree(folder, ignore_errors=True)
        self.scratches.clear()


def _reads_of(argv: list[str]) -> list[str]:
    from ._servers import program_reads

    return list(program_reads(argv[0])) if argv and os.path.isabs(argv[0]) else []
