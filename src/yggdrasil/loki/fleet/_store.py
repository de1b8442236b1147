"""A fleet's output folder: ``results.jsonl``, ``preds.json`` and one transcript per task.

``results.jsonl`` is the record of what is finished, and the only one resume reads: one
line per task, appended as the task finishes with a single ``write`` on an ``O_APPEND``
descriptor and fsynced before the task counts as done. A line is therefore whole or
absent; should a crash of the machine itself leave a torn last line, it is cut off when
the folder is opened again (that task simply runs again). The transcript is written
(to a temp file, then renamed) before its line, so a line never names a missing file.
``preds.json`` (SWE-bench predictions) is derived from the results at the end of a run,
streamed from the file. The store keeps no result in memory, only counts: a run of
10,000 tasks costs the driver what a run of 10 does (the file is the record).
One fleet at a time may write a folder: a second one is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ._task import TaskResult

__all__ = ["ResultStore", "iter_results", "read_results", "recorded", "write_atomic"]

log = logging.getLogger("yggdrasil.loki.fleet")
RESULTS = "results.jsonl"
PREDS = "preds.json"


class ResultStore:
    """The output folder ``out``, opened for one run (``close`` when done)."""

    def __init__(self, out: str | os.PathLike[str]) -> None:
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self._lock: IO[str] | None = open(self.out / ".lock", "w")  # noqa: SIM115
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise RuntimeError(f"another fleet is writing to {self.out}; wait for it, or "
                               "choose another out folder") from None
        self.path = self.out / RESULTS
        _cut_torn_line(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.added = 0  # results recorded by this store (the results are in the file only)

    def add(self, result: TaskResult, transcript: str) -> None:
        """Record a finished task: its transcript, then its line (whole, on disk)."""
        if transcript:
            folder = self.out / result.id
            folder.mkdir(exist_ok=True)
            write_atomic(folder / "transcript.jsonl", transcript.encode("utf-8", "replace"))
            result.transcript = f"{result.id}/transcript.jsonl"
        line = (json.dumps(result.to_dict(), ensure_ascii=True) + "\n").encode("ascii")
        written = os.write(self._fd, line)
        while written < len(line):  # a short write (disk full, a signal): finish the line
            written += os.write(self._fd, line[written:])
        os.fsync(self._fd)
        self.added += 1

    def write_preds(self, model: str) -> None:
        """``preds.json``: every result as a SWE-bench prediction (failed ones: empty patch),
        streamed from ``results.jsonl`` (the last line of an id wins), one per line."""
        last = {result.id: n for n, result in _numbered(self.path)}
        with atomic_writer(self.out / PREDS) as handle:
            handle.write(b"[")
            first = True
            for n, r in _numbered(self.path):
                if last.get(r.id) != n:
                    continue
                pred = {"instance_id": r.id, "model_name_or_path": r.model or model,
                        "model_patch": r.patch}
                handle.write((b"\n" if first else b",\n") + json.dumps(pred).encode("ascii"))
                first = False
            handle.write(b"\n]\n")

    def close(self) -> None:
        os.close(self._fd)
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def read_results(out: str | os.PathLike[str]) -> dict[str, TaskResult]:
    """The results recorded in ``out`` (the last line wins should an id repeat), all in
    memory: for a summary of a big run, :func:`iter_results` or :func:`recorded`."""
    return {result.id: result for result in iter_results(out)}


def iter_results(out: str | os.PathLike[str]) -> Iterator[TaskResult]:
    """Each result line of ``out``, in the file's order, read as it goes (an id that
    repeats comes again: the last one counts)."""
    for _, result in _numbered(Path(out) / RESULTS):
        yield result


def recorded(out: str | os.PathLike[str]) -> dict[str, str]:
    """The status of each task recorded in ``out`` (the last line wins): what a new run
    needs to know to skip or redo them, without holding their results."""
    return {result.id: result.status for result in iter_results(out)}


def _numbered(path: Path) -> Iterator[tuple[int, TaskResult]]:
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return
    with handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                data: Any = json.loads(raw)
                result = TaskResult.from_dict(data)
            except (ValueError, TypeError, AttributeError, RecursionError) as exc:
                log.warning("%s:%d is not a result (%s); its task will run again", path,
                            number, exc)
                continue
            yield number, result


def _cut_torn_line(path: Path) -> None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        log.warning("%s ends in a torn line (%d bytes); cutting it off: that task runs again",
                    path, len(data) - keep)
        with open(path, "r+b") as handle:
            handle.truncate(keep)
            os.fsync(handle.fileno())


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` whole, or what it held before (no temp file left behind)."""
    with atomic_writer(path) as handle:
        handle.write(data)


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[IO[bytes]]:
    """A file to write ``path`` through: it holds what was written whole once the block
    ends, or (should the block raise) what it held before; no temp file is left behind."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
