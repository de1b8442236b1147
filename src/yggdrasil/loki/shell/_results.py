"""A finished command's typed result, from what ``sandbox.run_process`` kept of it."""

from __future__ import annotations

import signal
from typing import Any

from ..results import CommandResult, StreamOutput
from ..sandbox import Capture, Completed

__all__ = ["command_result", "stream_of"]


def stream_of(capture: Capture) -> StreamOutput:
    """What a stream kept: head and tail apart when bytes were cut between them."""
    head, tail = capture.decoded()
    return StreamOutput(head=head, tail=tail, cut=max(0, capture.cut), bytes=capture.total)


def command_result(done: Completed, **more: Any) -> CommandResult:
    """The command's typed result; ``more``: the fields a caller adds (what changed, what
    the fence refused). The exit code is None when it timed out or was cancelled; a
    negative one names the signal that killed it."""
    code = None if done.timed_out or done.cancelled else done.exit_code
    killed = (signal.Signals(-code).name
              if code is not None and code < 0 and -code in signal.valid_signals() else None)
    return CommandResult(exit_code=code, timed_out=done.timed_out and not done.cancelled,
                         cancelled=done.cancelled, timeout=done.timeout, signal=killed,
                         stdout=stream_of(done.stdout), stderr=stream_of(done.stderr),
                         held_open=done.held_open, **more)
