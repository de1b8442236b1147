"""The diagnostician of one toolbox: what each change introduced, and what files hold.

During an edit tool's call (:meth:`Diagnostician.watch`), the file layer tells it which
files are about to change (it keeps their text) and which changed; after the call,
:meth:`Diagnostician.report` checks them: the language server of each file's language in
its slot and, meanwhile, ruff for Python; the servers are waited for at most ``wait``
seconds from when they were asked (ruff's time counts).
A check still running then is "pending"; its findings are kept for the next observation
(:meth:`late`), unless the file changed again meanwhile (the newer check covers it).
Nothing here raises for what a checker did: a failure is a sentence in the diagnosis.
"""

from __future__ import annotations

import difflib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LokiError
from ..files import Root
from ..results import Diagnosis, Diagnostic, DiagnosticsReport, LateDiagnostics
from ._compare import introduced, ranked
from ._launch import Launcher
from ._pool import Check, Pool
from ._ruff import RUFF_SUFFIXES, Ruff, RuffFailed
from ._servers import ServerSpec

__all__ = ["DiagnosticLimits", "Diagnostician"]

MAX_FILE_BYTES = 2 << 20  # a file larger than this is not checked (nor its text kept)
MAX_REPORT_FILES = 200  # files diagnostics(paths) checks in one call
MAX_DATA = 200  # new diagnostics a result carries as data, at most


@dataclass(frozen=True)
class DiagnosticLimits:
    """``per_file``/``per_call``: new diagnostics shown; ``wait``: seconds an edit waits
    for the language servers; ``hang``: seconds a server may take to answer before it is
    taken as hung; ``warm``: servers running at once; ``report``: diagnostics
    ``diagnostics(paths)`` shows."""

    per_file: int = 10
    per_call: int = 30
    wait: float = 1.5
    hang: float = 30.0
    warm: int = 3
    report: int = 100


@dataclass
class _Change:
    before: str | None = None  # None: the file is new (or was not text)


@dataclass
class Watched:
    """The files one call changed: root-relative path -> its text before and after."""

    changes: dict[str, _Change] = field(default_factory=dict)


class Diagnostician:
    """See the module docstring. ``start`` runs a server's command in the fence (None:
    no language servers); ``ruff`` checks Python (None: not at all)."""

    def __init__(self, root: Root, *, ruff: Ruff | None, servers: dict[str, ServerSpec],
                 start: Launcher | None, limits: DiagnosticLimits | None = None) -> None:
        self.root = root
        self.ruff = ruff if ruff is not None and ruff.available else None
        self.limits = limits or DiagnosticLimits()
        self.start = start
        self.pool = (Pool(servers, root.path, start, warm=self.limits.warm,
                          hang=self.limits.hang) if start is not None and servers else None)
        self._watch: Watched | None = None
        self._lock = threading.Condition()
        self._late: list[LateDiagnostics] = []
        self._generation: dict[str, int] = {}
        self.unusable: list[str] = []  # servers of the settings that cannot start, and why

    def describe(self, *, edits: bool = True) -> str:
        """One line for the toolbox status: which checkers run (after edits, where the
        toolbox has edit tools)."""
        checkers = ["ruff (Python)"] if self.ruff is not None else []
        if self.pool is not None:
            checkers += [f"{name} ({os.path.basename(slot.spec.command[0])})"
                         for name, slot in self.pool.slots.items()]
        if not checkers and not self.unusable:
            return ""
        by = ", ".join(checkers) or "no checker"
        line = (f"After each edit the diagnostics it introduced are shown, by {by}; "
                f"diagnostics(paths) lists them all." if edits else
                f"diagnostics(paths) lists what {by} reports.")
        if self.unusable:
            line += f" Not started: {'; '.join(self.unusable)}."
        return line

    # -- what the file layer tells during a call -------------------------------------------

    @contextmanager
    def watch(self) -> Iterator[Watched]:
        """The scope of one edit call: the changes heard meanwhile are collected."""
        outer, self._watch = self._watch, Watched()
        try:
            yield self._watch
        finally:
            self._watch = outer

    def before(self, rel: str, real: Path) -> None:
        """``rel`` is about to change: keep its text (when a checker reads it)."""
        watched = self._watch
        if watched is None or rel in watched.changes or not self.checks(rel):
            return
        watched.changes[rel] = _Change(before=self._text(real))

    def after(self, rel: str) -> None:
        """``rel`` changed (written, or deleted: it is then gone)."""
        watched = self._watch
        if watched is None or not self.checks(rel):
            return
        watched.changes.setdefault(rel, _Change())

    def checks(self, rel: str) -> bool:
        """Whether a checker reads ``rel`` (by its suffix)."""
        return ((self.ruff is not None and rel.lower().endswith(RUFF_SUFFIXES))
                or (self.pool is not None and self.pool.slot_for(rel) is not None))

    def _text(self, real: Path) -> str | None:
        try:
            data = self.root.read_bytes(real, limit=MAX_FILE_BYTES)
        except (OSError, LokiError):
            return None
        if data is None or b"\0" in data[:8192]:
            return None
        return data.decode("utf-8", "surrogateescape")

    def _current(self, rel: str) -> str | None:
        try:
            real = self.root.resolve(rel)
        except LokiError:
            return None
        return self._text(real)

    # -- after the call --------------------------------------------------------------------

    def report(self, watched: Watched) -> tuple[list[Diagnostic], Diagnosis | None]:
        """The new diagnostics of the call's changes (capped, errors first) and the
        diagnosis; None when no changed file is one a checker reads."""
        texts = {rel: (c.before, self._current(rel)) for rel, c in watched.changes.items()}
        if not texts:
            return [], None
        for rel in texts:
            self._generation[rel] = self._generation.get(rel, 0) + 1
        new: list[Diagnostic] = []
        diagnosis = _Diagnosis()
        futures = self._submit(texts)  # the servers work while ruff does
        deadline = time.monotonic() + self.limits.wait
        ruffed = self._ruff(texts, new, diagnosis)
        for rel, server, future in futures:
            if not _wait(future, deadline - time.monotonic()):
                diagnosis.pending.append(f"{server}: {rel}")
                self._later(rel, future, ruffed.get(rel, []), texts[rel])
                continue
            self._take(future.result(), new, diagnosis, ruffed.get(rel, []), texts[rel])
        return self._capped(new, diagnosis)

    def _ruff(self, texts: dict[str, tuple[str | None, str | None]], new: list[Diagnostic],
              diagnosis: _Diagnosis) -> dict[str, list[Diagnostic]]:
        """Ruff's findings on the Python files, the new ones added to ``new``; what it
        found after the change, by path (the servers' duplicates of it are dropped)."""
        if self.ruff is None:
            return {}
        wanted = {rel: pair for rel, pair in texts.items()
                  if rel.lower().endswith(RUFF_SUFFIXES) and pair[1] is not None}
        if not wanted:
            return {}
        asked = {rel: pair[1] or "" for rel, pair in wanted.items()}
        asked |= {f"{rel}\0before": pair[0] for rel, pair in wanted.items()
                  if pair[0] is not None}
        try:
            found = self.ruff.check(asked)
        except RuffFailed as exc:
            diagnosis.problems.append(f"ruff could not check the files: {exc}")
            return {}
        for rel, (before, after) in wanted.items():
            added, kept = introduced(found.get(f"{rel}\0before", []), found[rel],
                                     _spans(before, after))
            new += added
            diagnosis.preexisting += kept
        return {rel: found[rel] for rel in wanted}

    def _submit(self, texts: dict[str, tuple[str | None, str | None]],
                ) -> list[tuple[str, str, Future[Check]]]:
        if self.pool is None:
            return []
        futures = []
        for rel, (before, after) in texts.items():
            slot = self.pool.slot_for(rel)
            if slot is not None:
                futures.append((rel, slot.spec.name, slot.submit(rel, before, after)))
        return futures

    def _take(self, check: Check, new: list[Diagnostic], diagnosis: _Diagnosis,
              ruffed: Sequence[Diagnostic], texts: tuple[str | None, str | None]) -> None:
        if check.problem:
            diagnosis.problems.append(check.problem)
            return
        after = _without(check.after, ruffed)
        before = _without(check.before or [], ruffed)
        added, kept = introduced(before, after, _spans(*texts))
        new += added
        diagnosis.preexisting += kept

    def _later(self, rel: str, future: Future[Check], ruffed: Sequence[Diagnostic],
               texts: tuple[str | None, str | None]) -> None:
        generation = self._generation.get(rel, 0)

        def arrived(done: Future[Check]) -> None:
            if self._generation.get(rel, 0) != generation:
                return  # the file changed again: the newer check says what holds
            new: list[Diagnostic] = []
            diagnosis = _Diagnosis()
            self._take(done.result(), new, diagnosis, ruffed, texts)
            shown, said = self._capped(new, diagnosis)
            if said is None:
                return
            with self._lock:
                self._late.append(LateDiagnostics(diagnostics=shown, diagnosis=said,
                                                  paths=[rel]))
                self._lock.notify_all()

        future.add_done_callback(arrived)

    def wait_late(self, timeout: float) -> bool:
        """Block until a pending check's findings are ready to show (True), or
        ``timeout`` seconds passed (False)."""
        with self._lock:
            return self._lock.wait_for(lambda: bool(self._late), timeout)

    def late(self) -> list[LateDiagnostics]:
        """The findings of pending checks that finished since the last look."""
        with self._lock:
            found, self._late = self._late, []
        return found

    def _capped(self, new: list[Diagnostic], diagnosis: _Diagnosis,
                ) -> tuple[list[Diagnostic], Diagnosis]:
        shown: list[Diagnostic] = []
        per_file: dict[str, int] = {}
        for d in ranked(new):
            if len(shown) >= self.limits.per_call or per_file.get(d.path, 0) >= \
                    self.limits.per_file:
                continue
            per_file[d.path] = per_file.get(d.path, 0) + 1
            shown.append(d)
        return shown, Diagnosis(preexisting=diagnosis.preexisting,
                                not_shown=len(new) - len(shown),
                                pending=diagnosis.pending, problems=diagnosis.problems)

    # -- diagnostics(paths) ----------------------------------------------------------------

    def diagnostics(self, files: Sequence[str], wait: float) -> DiagnosticsReport:
        """Every finding in ``files`` (root-relative, checkable), errors first, up to the
        report's cap; the servers waited for ``wait`` seconds at most."""
        texts: dict[str, tuple[str | None, str | None]] = {
            rel: (None, self._current(rel)) for rel in files}
        found: list[Diagnostic] = []
        diagnosis = _Diagnosis()
        futures = self._submit(texts)  # the servers work while ruff does
        deadline = time.monotonic() + wait
        ruffed = self._ruff(texts, found, diagnosis)
        diagnosis.preexisting = 0
        for rel, server, future in futures:
            if not _wait(future, deadline - time.monotonic()):
                diagnosis.pending.append(f"{server}: {rel}")
                continue
            check = future.result()
            if check.problem:
                diagnosis.problems.append(check.problem)
            else:
                found += _without(check.after, ruffed.get(rel, []))
        every = ranked(found)
        return DiagnosticsReport(files=list(files), diagnostics=every[: self.limits.report],
                                 total=len(every), diagnosis=Diagnosis(
                                     pending=diagnosis.pending, problems=diagnosis.problems))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self.start is not None:
            self.start.close()


@dataclass
class _Diagnosis:
    preexisting: int = 0
    pending: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _wait(future: Future[Check], seconds: float) -> bool:
    try:
        future.result(timeout=max(0.0, seconds))
    except TimeoutError:
        return False
    return True


def _spans(before: str | None, after: str | None) -> Callable[[], list[tuple[int, int]]]:
    """:func:`changed_spans` when asked (most changes introduce nothing: no diff made)."""
    return lambda: changed_spans(before, after)


def changed_spans(before: str | None, after: str | None) -> list[tuple[int, int]]:
    """The line ranges (1-based, inclusive) of ``after`` that differ from ``before``.
    The lines both share at the start and at the end are set aside first, and the
    middle is matched line by line (difflib), within bounds."""
    if before is None or after is None:
        return []
    old, new = before.splitlines(), after.splitlines()
    shorter = min(len(old), len(new))
    head = next((i for i in range(shorter) if old[i] != new[i]), shorter)
    tail = 0
    while tail < shorter - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    old, new = old[head:len(old) - tail], new[head:len(new) - tail]
    if not new:  # lines removed only: the place they were (none: nothing changed)
        return [(head + 1, head + 1)] if old else []
    if not old:
        return [(head + 1, head + len(new))]
    if len(old) * len(new) > 4_000_000:  # too big to match line by line: all of it
        return [(head + 1, head + len(new))]
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [(head + j1 + 1, head + max(j1 + 1, j2)) for tag, _, _, j1, j2
            in matcher.get_opcodes() if tag != "equal"]


def _without(found: Sequence[Diagnostic], ruffed: Sequence[Diagnostic]) -> list[Diagnostic]:
    """A server's findings less those ruff already reported at the same place (both say
    an undefined name: it is shown once, as ruff's)."""
    places = {(d.line, d.column) for d in ruffed}
    return [d for d in found if (d.line, d.column) not in places]

