"""Parse many files at once on every core: the first whole-root build of a large tree.

tree-sitter holds the GIL while it parses (0.26) and the walk over its nodes is Python,
so threads would take turns: the work goes to processes instead. This process reads
each file (through ``Root``, as every read does) and sends its bytes; a worker only
parses bytes it is given and returns what ``extract`` and ``identifiers`` found, so it
opens nothing. A few batches are in flight at a time, which bounds the memory of bytes
read ahead. Below ``MIN_FILES`` files, or when processes cannot be started (a sandbox,
a broken pool), the parsing happens here, one file after another, with the same result.

Workers are *spawned* (a fresh interpreter each, started through pipes): not forked from
this process, which has threads, and not from multiprocessing's fork server, which is
process-global and listens on a socket under the ``TMPDIR`` of the moment it started (a
fleet attempt's TMPDIR, deleted when the attempt ends: every later pool of the process
then failed to start). Nor do they re-run the main script, which multiprocessing does
by default (a script calling the toolbox without ``if __name__ == "__main__":`` would run
again in each worker).

What the pool parsed is kept here like what this process parsed itself, and a tree whose
first batch is all known (a fleet worker's next copy of a repository) is answered here
without starting a pool. ``LOKI_PARSE_PROCESSES`` caps the pool's processes (``1``: no
pool): a fleet's workers set it, being already one process per core or more.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import multiprocessing
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import suppress

from ..sandbox import main_not_rerun
from ._extract import Outline, extract, identifiers
from ._languages import Language, by_grammar

__all__ = ["MIN_FILES", "Parsed", "give_back", "parse_all"]

MIN_FILES = 200  # fewer files are parsed in this process (starting workers costs ~0.3 s)
_BATCH_BYTES = 1 << 20  # source bytes sent to a worker at once
_AHEAD = 3  # batches in flight per worker

Parsed = tuple[str, bytes, Outline]  # names, counts, outline (see Entry)
Job = tuple[str, Language, bytes]  # rel, language, UTF-8 source


PARSED_KEPT = 32 << 20  # bytes of source whose parses a process keeps (any root)
PARSED_FILE = 256 << 10  # a larger file's parse is not kept (it is rarely parsed again as is)


class _Parsed:
    """What parsing gave for file contents seen before in this process, whatever their path:
    a fresh checkout of a repository (a fleet attempt's working copy: each a new root, on
    a worker that runs attempt after attempt) is parsed once, not once per copy. Bounded by
    the bytes of source it stands for; the least recently used go first. (Outlines are
    frozen: sharing them is safe.)"""

    def __init__(self, limit: int = PARSED_KEPT) -> None:
        self.limit, self.held = limit, 0
        self.found: OrderedDict[tuple[str, bytes], tuple[Parsed, int]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, lang: Language, src: bytes) -> Parsed:
        if len(src) > PARSED_FILE:
            names, counts = identifiers(src)
            return names, counts, extract(lang, src)
        key = _key(lang, src)
        with self.lock:
            found = self.found.get(key)
            if found is not None:
                self.found.move_to_end(key)
                return found[0]
        names, counts = identifiers(src)
        made = (names, counts, extract(lang, src))
        self.keep(lang, src, made)
        return made

    def known(self, lang: Language, src: bytes) -> bool:
        """Whether :meth:`get` would answer from what it keeps."""
        with self.lock:
            return len(src) <= PARSED_FILE and _key(lang, src) in self.found

    def keep(self, lang: Language, src: bytes, made: Parsed) -> None:
        """Keep ``made`` (parsed elsewhere: a pool worker) as the parse of ``src``."""
        if len(src) > PARSED_FILE:
            return
        key = _key(lang, src)
        with self.lock:
            if key not in self.found:
                self.found[key] = (made, len(src))
                self.held += len(src)
            while self.held > self.limit:
                self.held -= self.found.popitem(last=False)[1][1]


def _key(lang: Language, src: bytes) -> tuple[str, bytes]:
    return lang.name, hashlib.blake2b(src, digest_size=16).digest()


_PARSED = _Parsed()
parse_one = _PARSED.get


def _parse_batch(batch: list[tuple[str, bytes]]) -> list[Parsed]:
    out = []
    for grammar, src in batch:
        lang = by_grammar(grammar)
        assert lang is not None
        out.append(parse_one(lang, src))
    return out


PROCESSES_VAR = "LOKI_PARSE_PROCESSES"  # at most this many parse processes (1: none)


def _workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    with suppress(ValueError):  # a process that is itself one of many workers says 1
        cores = min(cores, int(os.environ.get(PROCESSES_VAR) or cores))
    return min(8, cores)


def parse_all(jobs: Iterable[Job], count: int,
              progress: Callable[[int], None] | None = None) -> Iterator[tuple[str, Parsed]]:
    """(rel, parsed) for each job, in order; ``count`` is how many jobs there are."""
    workers = _workers()
    if count < MIN_FILES or workers < 2:
        yield from _here(jobs, progress)
        return
    # A tree this process has parsed before (a fleet worker's next copy of a repository)
    # is answered from what it keeps: no pool to start, nothing parsed twice.
    jobs = iter(jobs)
    first = _batch(jobs)
    jobs = itertools.chain(first, jobs)
    if all(_PARSED.known(lang, src) for _, lang, src in first):
        yield from _here(jobs, progress)
        return
    pool = _started(workers)
    if pool is None:
        yield from _here(jobs, progress)
        return
    try:
        yield from _in_pool(pool, jobs, workers * _AHEAD, progress)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _started(workers: int) -> ProcessPoolExecutor | None:
    """A pool with every worker started; None when processes cannot be started."""
    try:
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    except (OSError, ValueError):
        return None
    try:
        with main_not_rerun():
            for _ in range(workers):  # each submit starts a worker, while the script is hidden
                pool.submit(_ready)
    except (OSError, ValueError, RuntimeError):  # RuntimeError: BrokenProcessPool
        pool.shutdown(wait=True, cancel_futures=True)
        return None
    return pool


def _ready() -> None:
    """A worker's first job: nothing (it makes the pool start the worker)."""


def give_back(*, freeze: bool = False) -> None:
    """After a large build or ranking: return freed heap memory to the system (glibc keeps
    what it freed: ~15% of the process's size after a whole build; nothing elsewhere).
    ``freeze`` (a build of thousands of files): also move the objects alive now out of the
    cyclic garbage collector's reach (``gc.freeze``: the index's million definitions are
    freed by reference counts when replaced, never by the collector, whose full passes
    over them cost 0.5-1 s on whichever call they land)."""
    if freeze:
        gc.freeze()
    with suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _here(jobs: Iterable[Job], progress: Callable[[int], None] | None) -> Iterator[tuple[str, Parsed]]:
    for done, (rel, lang, src) in enumerate(jobs, 1):
        yield rel, parse_one(lang, src)
        if progress is not None:
            progress(done)


def _in_pool(pool: ProcessPoolExecutor, jobs: Iterator[Job], ahead: int,
             progress: Callable[[int], None] | None) -> Iterator[tuple[str, Parsed]]:
    pending: deque[tuple[list[Job], Future[list[Parsed]]]] = deque()
    done = 0
    while True:
        while len(pending) < ahead and (batch := _batch(jobs)):
            pending.append((batch, pool.submit(_parse_batch, [(lang.name, src) for _, lang, src in batch])))
        if not pending:
            return
        batch, future = pending.popleft()
        try:
            results = future.result()
        except Exception:  # a worker died (a grammar crashed on a file): parse here
            results = [parse_one(lang, src) for _, lang, src in batch]
        else:
            for (_, lang, src), parsed in zip(batch, results, strict=True):
                _PARSED.keep(lang, src, parsed)
        for (rel, _, _), parsed in zip(batch, results, strict=True):
            yield rel, parsed
        done += len(batch)
        if progress is not None:
            with suppress(Exception):
                progress(done)


def _batch(jobs: Iterator[Job]) -> list[Job]:
    batch: list[Job] = []
    size = 0
    for job in jobs:
        batch.append(job)
        size += len(job[2])
        if size >= _BATCH_BYTES:
            break
    return batch
