"""The background jobs of a shell: start, read, answer, stop, list; and what they changed.

:class:`Jobs` holds the jobs of one toolbox (``_job.Job``), numbered from 1, at most
``max_jobs`` running at once, and gives the model's tools their words. A job changes
files between tool calls, when nobody is looking, so its changes are *settled*: the
change tracker stays open while a job runs, and everything it saw since the last
settle is charged to the jobs that ran meanwhile (into each job's ``changed`` list and
the run's journal, so ``revert()`` covers it). Settling happens before and after every
mutating tool call (the toolbox calls :meth:`Jobs.settle`), in ``job_output``,
``job_stop`` and ``jobs()``, when a job ends, and when the toolbox closes. What changes
while a foreground command runs is reported by that command.

The observation that first shows a job's exit shows everything it changed: a job ends
in its watcher thread, which settles what it did; a call reporting on an ended job
settles first itself or, when another thread holds the lock (that settle, a mutating
call's), waits for the job's end to be settled (unless a foreground command holds the
tracker: what changes then is that command's to report).

Jobs end with their toolbox: ``close()`` (the toolbox's) stops them all, and so does
the interpreter's exit (``atexit``), for every ``Jobs`` still alive.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Annotated

from annotated_types import Interval, MaxLen

from ..errors import ToolError
from ..files import Journal, Root
from ..outputs import Outputs
from ..results import FileChange, JobInput, JobList, JobReport, JobStarted
from ..sandbox import Process, WarmLauncher, current_cancel
from ._job import GRACE, Job, JobLimits, OutputBuffer, describe
from ._notes import ProxyNotes
from ._tracker import ChangeTracker

log = logging.getLogger("yggdrasil.loki.tools")

FIRST_LOOK = 1.0  # seconds of a new job's output shown by the call that starts it
INPUT_LOOK = 1.0  # seconds job_input waits for the job to answer
INPUT_WAIT = 5.0  # seconds job_input waits for a job that does not read its stdin
SETTLE_WAIT = 60.0  # seconds a report waits for an ended job's changes (a guard only)
KEPT_ENDED = 50  # ended jobs remembered (their unread output, their exit) per toolbox
MAX_INPUT = 1_000_000  # characters one job_input may send
Wait = Annotated[float, Interval(ge=0, le=60)]
JobId = Annotated[int, Interval(ge=1)]
InputText = Annotated[str, MaxLen(MAX_INPUT)]
# (argv, env, reaped) for a job, given its scratch folder: the shell's fence and launcher.
Prepare = Callable[[Path], tuple[list[str], dict[str, str], bool]]
Lock = Callable[..., AbstractContextManager[bool]]  # (blocking=True): False when not taken


class Jobs:
    """The background jobs of one shell (see the module docstring)."""

    def __init__(self, root: Root, tracker: ChangeTracker, journal: Journal | None,
                 limits: JobLimits, outputs: Outputs | None = None,
                 warm: Callable[[], WarmLauncher | None] = lambda: None) -> None:
        self.root, self.tracker, self.journal, self.limits = root, tracker, journal, limits
        self.outputs = outputs  # where a read's cut output is kept whole
        self.warm = warm  # the shell's warm launcher (``sandbox._warm``), asked at each start
        self._jobs: dict[int, Job] = {}
        self._next = 1
        self._charged: list[Job] = []  # jobs that ran since the last settle
        self._tracking = False  # the tracker is open for the jobs' changes
        self._held = False  # a foreground command took the tracker over (settle(resume=False))
        self.lock: Lock = _private_lock()  # the toolbox's mutating-call lock, once attached
        self.closed = False
        _LIVE.add(self)

    # -- the tools ---------------------------------------------------------------------

    def start(self, label: str, prepare: Prepare,
              screen: Callable[[str], None] | None = None,
              on_start: Callable[[Job], None] | None = None) -> JobStarted:
        """Start a job; ``started job <id>: <label>`` and its first second of output.
        ``screen(text)`` raises for input the job must not be sent (see ``send``);
        ``on_start(job)`` is called once it runs."""
        self._check_room()
        self.settle()  # what changed before the job is not the job's
        scratch = Path(tempfile.mkdtemp(prefix="loki-tmp-"))
        try:
            if not self._tracking:  # before prepare: the mount plan needs the tracker's view
                self._begin(extra=[scratch])
            argv, env, reaped = prepare(scratch)
            job = Job(self._next, _short(label),
                      _starter(argv, env, reaped, self.root, self.warm()),
                      scratch=scratch, keep=self.limits.buffer, lifetime=self.limits.lifetime,
                      outputs=self.outputs,
                      on_end=self._ended, screen=screen)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            ProxyNotes(scratch).finish()  # the proxy's notes file, if the launcher got one
            raise
        if on_start is not None:
            on_start(job)
        self._next += 1
        self._jobs[job.id] = job
        self._charged.append(job)
        self._forget_old()
        job.ended.wait(FIRST_LOOK)
        return JobStarted(job=job.id, label=job.label, report=self._report(job))

    def output(self, job: JobId, wait: Wait = 0) -> JobReport:
        """A read tool: it runs beside a foreground command, and waits holding no lock."""
        found = self._get(job)
        if wait:
            found.wait_quietly(wait, current_cancel())
        return self._report(found)

    def send(self, job: JobId, text: InputText, eof: bool = False) -> JobInput:
        found = self._get(job)
        if not found.running:
            raise ToolError(f"job {job} has ended ({found.state()}); it reads no more input. "
                            "job_output reads what it left")
        if found.input_closed:
            raise ToolError(f"job {job}'s stdin is closed (eof=true was sent); it reads no "
                            "more input. Start a new job to send more")
        if found.screen is not None and text.strip():
            found.screen(text)  # a shell's input is a command line: the rules judge it
        # "" alone is Enter; with eof=true it only closes stdin
        data = "" if eof and not text else text if text.endswith("\n") else text + "\n"
        sent = self._send(found, data.encode("utf-8"))
        if eof:
            found.process.close_input()
            found.input_closed = True
        found.wait_quietly(INPUT_LOOK, current_cancel())
        return JobInput(job=job, sent=sent, closed=eof, report=self._report(found))

    def stop(self, job: JobId) -> JobReport:
        found = self._get(job)
        if found.running:
            found.request_stop("job_stop")
            found.ended.wait(2 * GRACE + 30)  # the kill that follows is quick; a guard only
        return self._report(found)

    def listing(self) -> JobList:
        self._settle_if_free()
        running = sum(job.running for job in self._jobs.values())
        return JobList(running=running, max_jobs=self.limits.max_jobs,
                       jobs=[describe(job) for job in self._jobs.values()])

    # -- settling changes ----------------------------------------------------------------

    def settle(self, exclude: Collection[str] = (), *, resume: bool = True) -> None:
        """Charge what changed in the root since the last settle to the jobs that ran
        meanwhile (``exclude``: paths a tool call just changed itself), then watch again
        (``resume=False``: a foreground command takes the tracker over and resumes after).
        Call it holding the lock that serialises mutating calls."""
        self._held = not resume
        if not self._tracking:
            return
        self._tracking = False
        try:
            diff = self.tracker.end(self._skip())
            put_back = self.journal.after_command(diff) if self.journal is not None else []
            for job in self._charged:
                job.charge(diff, set(exclude))
                job.put_back += put_back
            if resume:
                self.resume()
        except Exception:  # never let bookkeeping fail the tool call it runs around
            log.warning("settling what background jobs changed failed", exc_info=True)

    def resume(self) -> None:
        """After a foreground command: keep watching for the running jobs' changes."""
        self._held = False
        self._charged = [job for job in self._jobs.values() if job.running]
        if self._charged:
            self._begin()

    def scratches(self) -> list[Path]:
        """The running jobs' scratch folders (never tracked as changes of the root)."""
        return [job.scratch for job in self._jobs.values() if job.running]

    def _begin(self, extra: Collection[Path] = ()) -> None:
        self.tracker.begin([*self._skip(), *extra])
        if self.journal is not None:
            self.journal.keep_originals(self.tracker.code_files())
        self._tracking = True

    def _skip(self) -> list[Path]:
        return [*self.scratches(), *(self.journal.private_dirs() if self.journal else [])]

    def _ended(self, job: Job) -> None:
        """In the job's watcher thread: settle what it did (unless we are shutting down)."""
        try:
            if not _EXITING:
                with self.lock():
                    self.settle()
        finally:
            job.settled.set()

    # -- status and lifetime -------------------------------------------------------------

    def status(self) -> str:
        """One line naming the running jobs, '' when none runs (from any thread)."""
        running = [job for job in list(self._jobs.values()) if job.running]
        if not running:
            return ""
        names = "; ".join(f"job {job.id} `{job.label}`" for job in running)
        return (f"Background jobs running: {names} (job_output reads them, job_stop stops "
                "them; they stop when the toolbox closes)")

    def close(self) -> None:
        """Stop every running job (all at once) and settle what they did."""
        self.closed = True
        running = [job for job in self._jobs.values() if job.running]
        for job in running:
            job.request_stop("the toolbox closing")
        for job in running:
            job.ended.wait(2 * GRACE + 30)
        if not _EXITING:
            with self.lock():
                self.settle()

    # -- helpers -------------------------------------------------------------------------

    def _check_room(self) -> None:
        if self.closed:
            raise ToolError("this toolbox is closed; background jobs can no longer start")
        running = [job for job in self._jobs.values() if job.running]
        if self.limits.max_jobs == 0:
            raise ToolError("background jobs are off in this toolbox (max_jobs=0); run the "
                            "command without background")
        if len(running) >= self.limits.max_jobs:
            names = ", ".join(f"{job.id} `{job.label}`" for job in running)
            raise ToolError(f"{len(running)} jobs are running, the most this toolbox allows "
                            f"(max_jobs={self.limits.max_jobs}); stop one with job_stop(job=N) "
                            f"first. Running: {names}")

    def _get(self, job: int) -> Job:
        found = self._jobs.get(job)
        if found is not None:
            return found
        if not self._jobs:
            raise ToolError(f"no job {job}: no background job was started yet; "
                            "run(command, background=true) starts one")
        known = ", ".join(f"{n} ({'running' if j.running else 'ended'})"
                          for n, j in self._jobs.items())
        raise ToolError(f"no job {job}; the jobs of this toolbox are {known} (jobs() lists them)")

    def _send(self, job: Job, data: bytes) -> int:
        if not data:
            return 0
        try:
            sent = job.process.write_input(data, INPUT_WAIT)
        except BrokenPipeError as exc:
            raise ToolError(f"job {job.id} closed its stdin: it reads no more input") from exc
        if sent < len(data):
            raise ToolError(f"job {job.id} did not read its input: {sent} of {len(data)} "
                            f"bytes were written in {INPUT_WAIT:g}s and the rest was dropped; "
                            "check with job_output that it is waiting for input")
        return sent

    def _settle_if_free(self) -> None:
        """Settle unless a mutating call is running (it settles when it ends): reading a
        job's output never waits behind a command."""
        with self.lock(blocking=False) as turn:
            if turn:
                self.settle()

    def _report(self, job: Job) -> JobReport:
        """The job's state, output and changes; an ended job's changes all there."""
        ended = job.ended.is_set()  # the state shown: it may end while this reads
        with self.lock(blocking=False) as turn:
            if turn:  # its end's own settle waits for this lock: this one covers it
                self.settle()
        if ended and not turn and not self._held:
            job.settled.wait(SETTLE_WAIT)
        state, stdout, stderr, proxy, held_open = job.read(ended)
        return JobReport(state=state, stdout=stdout, stderr=stderr, proxy=proxy,
                         held_open=held_open,
                         changes=[FileChange(path=rel, change=verb)
                                  for rel, verb in job.changes.items()],
                         put_back=list(dict.fromkeys(job.put_back)))

    def _forget_old(self) -> None:
        ended = [n for n, job in self._jobs.items() if not job.running]
        for n in ended[: max(0, len(ended) - KEPT_ENDED)]:
            del self._jobs[n]


def _starter(argv: list[str], env: dict[str, str], reaped: bool, root: Root,
             warm: WarmLauncher | None) -> Callable[[OutputBuffer, OutputBuffer], Process]:
    def start(out: OutputBuffer, err: OutputBuffer) -> Process:
        return Process(argv, cwd=str(root.path), env=env, reaped=reaped, stdin=True,
                       stdout=out, stderr=err, warm=warm)
    return start


def _short(label: str, limit: int = 120) -> str:
    one = " ".join(label.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


@contextmanager
def _lock_of(lock: threading.RLock, blocking: bool) -> Iterator[bool]:
    if not lock.acquire(blocking=blocking):
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def _private_lock() -> Lock:
    lock = threading.RLock()
    return lambda blocking=True: _lock_of(lock, blocking)


# -- every job ends with the interpreter -------------------------------------------------

_LIVE: weakref.WeakSet[Jobs] = weakref.WeakSet()
_EXITING = False


@atexit.register
def _stop_all_jobs() -> None:
    global _EXITING
    _EXITING = True  # no settling: the toolbox may be mid-call on a thread that is gone
    for jobs in list(_LIVE):
        jobs.close()
