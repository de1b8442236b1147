"""A finished command's typed result, from what ``sandbox.run_process`` kept of it."""

from __future__ import annotations

import signal
from typing import Any

from ..outputs import Outputs, Spilled, scan_errors
from ..results import CommandResult, OutputLine, StreamOutput
from ..sandbox import Capture, Completed

__all__ = ["command_result", "cut_stream", "stream_of"]


def stream_of(capture: Capture, name: str = "output",
              outputs: Outputs | None = None) -> StreamOutput:
    """What a stream kept: head and tail apart when bytes were cut between them; a cut
    stream's head and tail within ``outputs.stream`` tokens each, its whole kept (when
    ``outputs`` has a spill folder) and the lines between that look like errors found."""
    head, tail = capture.decoded()
    spilled = capture.settle()
    if capture.cut <= 0:
        return StreamOutput(head=head, tail=tail, bytes=capture.total, name=name)
    return cut_stream(head, tail, capture.cut, capture.total, name, outputs,
                      spilled if isinstance(spilled, Spilled) else None)


def cut_stream(head: str, tail: str, cut: int, total: int, name: str,
               outputs: Outputs | None, spilled: Spilled | None, why: str = "",
               ) -> StreamOutput:
    """A cut stream as shown (see ``stream_of``): ``cut`` bytes between ``head`` and
    ``tail`` of ``total``, the whole in ``spilled``."""
    if outputs is not None:
        shown_head = outputs.tokens.head(head, outputs.stream)
        shown_tail = outputs.tokens.tail(tail, outputs.stream)
        cut += _size(head) - _size(shown_head) + _size(tail) - _size(shown_tail)
        head, tail = shown_head, shown_tail
    kept: dict[str, Any] = {}
    if spilled is not None:
        found, more, stopped = scan_errors(spilled.path, _size(head), total - _size(tail))
        kept = {"kept": spilled.id, "dropped": spilled.dropped, "errors_more": more,
                "errors_stopped": stopped,
                "errors": [OutputLine(line=e.line, text=e.text) for e in found]}
    return StreamOutput(head=head, tail=tail, cut=cut, bytes=total, why=why, name=name,
                        **kept)


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def command_result(done: Completed, outputs: Outputs | None = None,
                   **more: Any) -> CommandResult:
    """The command's typed result; ``more``: the fields a caller adds (what changed, what
    the fence refused). The exit code is None when it timed out or was cancelled; a
    negative one names the signal that killed it."""
    code = None if done.timed_out or done.cancelled else done.exit_code
    killed = (signal.Signals(-code).name
              if code is not None and code < 0 and -code in signal.valid_signals() else None)
    return CommandResult(exit_code=code, timed_out=done.timed_out and not done.cancelled,
                         cancelled=done.cancelled, timeout=done.timeout, signal=killed,
                         stdout=stream_of(done.stdout, "stdout", outputs),
                         stderr=stream_of(done.stderr, "stderr", outputs),
                         held_open=done.held_open, **more)
