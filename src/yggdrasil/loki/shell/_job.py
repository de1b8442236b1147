"""One background job: a command started like ``run``'s, read a piece at a time.

A :class:`Job` owns a ``sandbox.Process`` (the same launcher, fence and whole-tree kill
as a foreground command, with stdin as a pipe) and a watcher thread that waits for it
to end, for a stop request or for its lifetime. Its output goes into an
:class:`OutputBuffer` per stream: what came since the last read, as head and tail of a
fixed size, so memory stays flat whatever the job prints, and each read shows exactly
what the previous one did not (a cut in between is announced). Stopping asks first
(SIGINT, then SIGTERM, to the command's own processes) and kills last (the launcher's
SIGKILL of everything below it, then the sweep that follows every command).
"""

from __future__ import annotations

import codecs
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..files import Diff
from ..outputs import Outputs, Spilled
from ..results import JobRow, JobState, StreamOutput, job_state
from ..sandbox import Capture, Process
from ._notes import ProxyNotes
from ._results import cut_stream

GRACE = 2.0  # seconds a job gets after SIGINT, and again after SIGTERM, before SIGKILL
HOLD = 0.05  # seconds a partial last line may be kept back for the rest of it to come
HOLD_MAX = 4096  # bytes of a partial line kept back at most
QUIET = 0.1  # seconds without new output that end a wait once output came
LINGER = 0.5  # seconds a wait goes on after the first new output, at most
_STOPS = ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM"))
# How each net change of a file folds into the next one (created then deleted: gone).
_FOLD = {("created", "modified"): "created", ("created", "deleted"): None,
         ("modified", "deleted"): "deleted", ("deleted", "created"): "modified"}


@dataclass(frozen=True)
class JobLimits:
    """``max_jobs`` running at once, each stopped after ``lifetime`` seconds, keeping at
    most ``buffer`` bytes per stream of output not yet read (head and tail)."""

    max_jobs: int = 8
    lifetime: float = 3600.0
    buffer: int = 32_768

    def __post_init__(self) -> None:
        if self.max_jobs < 0:
            raise ValueError(f"max_jobs must be 0 or more (0: no background jobs), got {self.max_jobs}")
        if not self.lifetime > 0:
            raise ValueError(f"job_lifetime must be more than 0 seconds, got {self.lifetime}")
        if self.buffer < 1024:
            raise ValueError(f"job_buffer must be at least 1024 bytes, got {self.buffer}")


class OutputBuffer:
    """A stream's output since the last read: head and tail of ``keep`` bytes at most.

    A read shows whole lines: a partial last line that is still being written (its
    bytes came less than ``HOLD`` seconds ago) waits for the next read, so a line the
    job writes in two pieces is not split between reads; one that stays put (a prompt
    such as ``name? ``) is shown."""

    def __init__(self, keep: int, wake: threading.Condition, name: str = "output",
                 outputs: Outputs | None = None) -> None:
        self.head, self.tail = keep // 2, keep - keep // 2
        self.wake = wake  # shared by the job's streams: a reader waits on both
        self.name, self.outputs = name, outputs
        spill = outputs.spill if outputs is not None else None
        self._spill = spill.new if spill is not None else None  # a read's whole output
        self.unread = Capture(self.head, self.tail, self._spill)
        self.held = b""  # a partial last line kept back by the last read
        self.total = 0
        self.last_feed = 0.0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, chunk: bytes) -> None:
        with self.wake:
            self.unread.feed(chunk)
            self.total += len(chunk)
            self.last_feed = time.monotonic()
            self.wake.notify_all()

    @property
    def pending(self) -> int:
        """Bytes a read would show now (0 while only a fresh partial line waits)."""
        if self.unread.total:
            return self.unread.total + len(self.held)
        return len(self.held) if self.held and not self._fresh() else 0

    def _fresh(self) -> bool:
        return time.monotonic() - self.last_feed < HOLD

    def take(self, *, final: bool = False) -> StreamOutput:
        """What came since the last read (``final``: the stream has ended, flush it all);
        a multi-byte character split across two reads is shown whole by the second."""
        with self.wake:
            got, self.unread = self.unread, Capture(self.head, self.tail, self._spill)
            fresh = self._fresh()
        held, self.held = self.held, b""
        decode = self._decoder.decode
        spilled = got.settle()
        if got.cut > 0:
            head = decode(held + bytes(got.head), True)
            self._decoder.reset()  # the tail starts wherever the cut fell
            return cut_stream(head, decode(bytes(got.tail), final), got.cut,
                              got.total + len(held), self.name, self.outputs,
                              spilled if isinstance(spilled, Spilled) else None,
                              why=" (more came between two reads than job_buffer keeps)")
        data = held + bytes(got.head + got.tail)
        line_end = data.rfind(b"\n") + 1
        if not final and fresh and line_end < len(data) and len(data) - line_end <= HOLD_MAX:
            data, self.held = data[:line_end], data[line_end:]
        return StreamOutput(head=decode(data, final), bytes=len(data))


class Job:
    """A background command (see the module docstring); ``on_end`` runs in its watcher."""

    def __init__(self, number: int, label: str, start: Callable[[OutputBuffer, OutputBuffer],
                 Process], *, scratch: Path, keep: int, lifetime: float,
                 on_end: Callable[[Job], None],
                 screen: Callable[[str], None] | None = None,
                 outputs: Outputs | None = None) -> None:
        self.id, self.label, self.scratch = number, label, scratch
        self.notes = ProxyNotes(scratch)  # what the proxy refused it (a file, if it has one)
        self.lifetime = lifetime
        self.wake = threading.Condition()
        self.stdout = OutputBuffer(keep, self.wake, "stdout", outputs)
        self.stderr = OutputBuffer(keep, self.wake, "stderr", outputs)
        self.process = start(self.stdout, self.stderr)
        self.started = time.monotonic()
        self.ended_at = 0.0
        self.stop_requested = threading.Event()
        self.ended = threading.Event()
        self.settled = threading.Event()  # what it changed up to its end is in ``changes``
        self.why = ""  # who stopped it: "job_stop", "the toolbox closed", a lifetime
        self.stopped_by = ""  # the signal that ended a stopped job
        self.held_open = False
        self.input_closed = False
        self.screen = screen  # judges what job_input sends (a shell's input: the rules)
        self.changes: dict[str, str] = {}  # root-relative path -> created/modified/deleted
        self.put_back: list[str] = []  # git's command files its changes to were undone
        self._on_end = on_end
        self._watcher = threading.Thread(target=self._watch, name=f"loki-job-{number}",
                                         daemon=True)
        self._watcher.start()

    # -- state -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return not self.ended.is_set()

    @property
    def exit_code(self) -> int | None:
        if self.stopped_by == "SIGKILL":
            return -signal.SIGKILL  # the launcher reports its own stop (143), not the kill
        return self.process.returncode

    def age(self) -> float:
        return (self.ended_at or time.monotonic()) - self.started

    def output_size(self) -> int:
        return self.stdout.total + self.stderr.total

    def status(self, ended: bool | None = None) -> JobState:
        """Whether it runs and how it ended (``ended``: as the caller saw it, default now)."""
        if not (self.ended.is_set() if ended is None else ended):
            return JobState(job=self.id, running=True)
        return JobState(job=self.id, running=False, exit_code=self.exit_code,
                        stopped_why=self.why, stopped_by=self.stopped_by, grace=GRACE)

    def state(self, ended: bool | None = None) -> str:
        """``job 3 running`` or ``exit=<code>`` with how it was stopped."""
        return job_state(self.status(ended))

    # -- reading -----------------------------------------------------------------------

    def wait_for_output(self, seconds: float, cancel: threading.Event | None) -> None:
        """Return once there is unread output, the job ended, ``cancel`` is set or
        ``seconds`` passed."""
        deadline = time.monotonic() + seconds
        with self.wake:
            while not (self.stdout.pending or self.stderr.pending or self.ended.is_set()
                       or (cancel is not None and cancel.is_set())):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.wake.wait(min(left, 0.05))

    def wait_quietly(self, seconds: float, cancel: threading.Event | None) -> None:
        """Wait up to ``seconds`` for output (or the end); once some came, a little longer
        while more follows (``QUIET`` pauses, ``LINGER`` at most), so a burst (a prompt, a
        traceback) is read whole rather than cut at its first bytes."""
        deadline = time.monotonic() + seconds
        self.wait_for_output(seconds, cancel)
        deadline = min(deadline, time.monotonic() + LINGER)
        seen = -1
        while self.running and time.monotonic() < deadline and not (cancel and cancel.is_set()):
            size = self.output_size()
            if size == seen:
                return
            seen = size
            self.ended.wait(min(QUIET, max(0.0, deadline - time.monotonic())))

    def read(self, ended: bool | None = None) -> tuple[JobState, StreamOutput, StreamOutput,
                                                       list[str], bool]:
        """The state, then what the job printed since the last read on each stream, what
        the proxy refused it since, and whether an escaped process holds its output open
        (``ended``: whether the job had ended as the caller saw it, default now)."""
        final = self.ended.is_set() if ended is None else ended
        return (self.status(final), self.stdout.take(final=final),
                self.stderr.take(final=final), self.notes.take().splitlines(),
                final and self.held_open)

    # -- changes -----------------------------------------------------------------------

    def charge(self, diff: Diff, exclude: set[str]) -> None:
        """Fold what changed in the root while this job ran into its own list."""
        for verb, paths in (("created", diff.created), ("modified", diff.modified),
                            ("deleted", diff.deleted),
                            ("deleted", [d + "/" for d in diff.lost_dirs])):
            for rel in paths:
                if rel in exclude:
                    continue
                was = self.changes.pop(rel, None)
                now = _FOLD.get((was, verb), was or verb) if was else verb
                if now is not None:
                    self.changes[rel] = now

    # -- stopping ----------------------------------------------------------------------

    def request_stop(self, why: str) -> None:
        if not self.stop_requested.is_set() and not self.ended.is_set():
            self.why = why
            self.stop_requested.set()

    def _watch(self) -> None:
        try:
            finished = self.process.wait(self.lifetime, self.stop_requested)
            if not finished:
                if not self.stop_requested.is_set():
                    self.why = f"its lifetime of {self.lifetime:g}s (job_lifetime)"
                finished = self._ask_to_stop()
            self.held_open = self.process.finish(stop=not finished)
            if not finished:
                self.stopped_by = "SIGKILL"
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.notes.finish()
            self.ended_at = time.monotonic()
            with self.wake:
                self.ended.set()
                self.wake.notify_all()
            self._on_end(self)

    def _ask_to_stop(self) -> bool:
        """SIGINT, then SIGTERM, each with ``GRACE`` seconds to end; True if it did."""
        for sig, name in _STOPS:
            self.process.signal(sig)
            if self.process.wait(GRACE):
                self.stopped_by = name
                return True
        return False


def describe(job: Job) -> JobRow:
    """One row of ``jobs()``: id, state, age, output size, command."""
    status = job.status()
    return JobRow(job=job.id, running=status.running, exit_code=status.exit_code,
                  seconds=job.age(), output_bytes=job.output_size(),
                  unread_bytes=job.stdout.pending + job.stderr.pending, label=job.label)
