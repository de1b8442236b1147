"""read_table and query_table: table files inside the root, parsed in a fenced worker.

Every file is resolved and opened by :class:`Root` (no symlink followed, regular files
only) in the agent; the open descriptor, never the path, goes to the table worker
(``sandbox.FencedWorker`` running ``_worker_ops``), where polars reads it as
``/proc/self/fd/N``. The worker is fenced read-only to the root by Landlock and limited
in memory and time, so a crafted file that crashes or exhausts the parser costs an
``ERROR:`` observation naming the file and the limit, not the agent.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from annotated_types import Interval
from pydantic import ValidationError

from ..errors import ToolError
from ..files import Root
from ..results import QueryRows, Result, TableRead
from ..sandbox import FencedWorker, WorkerFailed, WorkerLimits

OPS = "yggdrasil.loki.tables._worker_ops"
R = TypeVar("R", bound=Result)


def _anonymous_file() -> int:
    """A descriptor of a file without a name: a memfd on Linux, an unlinked temporary
    file where there is none (macOS)."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("loki-download", os.MFD_CLOEXEC)
    fd, name = tempfile.mkstemp(prefix="loki-download-")
    os.unlink(name)
    return fd


@dataclass
class TableReader:
    """The table tools of one root; ``limits`` bound the worker, ``sandbox=False`` skips
    its Landlock fence (the limits stay)."""

    root: Root
    limits: WorkerLimits = field(default_factory=WorkerLimits)
    sandbox: bool = True
    worker: FencedWorker = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.worker = FencedWorker(OPS, [str(self.root.path)], name="table worker",
                                   limits=self.limits, sandbox=self.sandbox)

    def status(self) -> str:
        return f"Tables (read_table, query_table, web_table) are parsed in a worker {self.worker.status()}."

    def _open(self, path: str, stack: ExitStack) -> tuple[int, str]:
        """(an fd of the file, the root-relative label); the fd lives as long as ``stack``."""
        real = self.root.resolve(path)
        return stack.enter_context(self.root.open_file(real)), self.root.rel(real)

    def read_table(self, path: str, rows: Annotated[int, Interval(ge=0, le=1000)] = 10,
                   sheet: str = "") -> TableRead:
        with ExitStack() as stack:
            fd, rel = self._open(path, stack)
            return self._run(TableRead, "preview", {"label": rel, "rows": rows, "sheet": sheet},
                             [fd], f"reading {rel}")

    def query_table(self, sql: str, rows: Annotated[int, Interval(ge=1, le=1000)] = 50
                    ) -> QueryRows:
        from yggdrasil.io import TableError, find_table_refs
        from yggdrasil.io.query import MAX_FILES

        try:
            paths = list(dict.fromkeys(ref.path for ref in find_table_refs(sql)))
        except TableError as exc:
            raise ToolError(str(exc)) from exc
        if len(paths) > MAX_FILES:  # refused before any of them is opened
            raise ToolError(f"the query names {len(paths)} files; at most {MAX_FILES} per query")
        with ExitStack() as stack:
            opened = [self._open(path, stack) for path in paths]
            labels = [[path, rel] for path, (_, rel) in zip(paths, opened, strict=True)]
            what = "the query over " + ", ".join(repr(rel) for _, rel in opened)
            return self._run(QueryRows, "query", {"sql": sql, "labels": labels, "rows": rows},
                             [fd for fd, _ in opened], what)

    def preview_bytes(self, data: bytes, label: str, suffix: str, fmt: str, rows: int
                      ) -> TableRead:
        """The read_table preview of downloaded bytes (web_table), parsed in the worker."""
        fd = _anonymous_file()
        try:
            with os.fdopen(os.dup(fd), "wb") as fh:
                fh.write(data)
            os.lseek(fd, 0, os.SEEK_SET)  # /dev/fd/N (not Linux) shares this offset
            return self._run(TableRead, "preview", {"label": label, "rows": rows, "fmt": fmt,
                                                    "suffix": suffix}, [fd], f"reading {label}")
        finally:
            os.close(fd)

    def _run(self, kind: type[R], op: str, args: dict[str, Any], fds: list[int], what: str
             ) -> R:
        """The worker's answer to ``op`` as a result of ``kind``; its data is checked like
        any input from outside (the worker parses the files a model names)."""
        try:
            reply = self.worker.call(op, args, fds)
        except WorkerFailed as exc:
            raise ToolError(f"{what} stopped: {exc}") from None
        if "error" in reply:
            raise ToolError(str(reply["error"]))
        try:
            return kind.model_validate(reply.get("ok"))
        except ValidationError:
            raise ToolError(f"{what} stopped: the table worker sent a malformed reply") from None

    def close(self) -> None:
        self.worker.close()
