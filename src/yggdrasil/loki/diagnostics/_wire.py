"""The Language Server Protocol's framing: ``Content-Length`` headers, then JSON.

:class:`Frames` is a sink for a server's stdout (it is fed the bytes as they come, in the
process's pump thread) that hands each whole message on. Whatever the server sends is
untrusted: a header block or a message over the limits, a body that is not JSON, or a
flood (more messages a second than any real server sends) is a ``fault``: the reader
stops and says why, and the server is stopped by its owner.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_MESSAGE", "Frames", "encode"]

MAX_MESSAGE = 32 << 20  # bytes of one message (a workspace's diagnostics at once)
MAX_HEADER = 8192
FLOOD_MESSAGES = 5_000  # messages within FLOOD_WINDOW seconds: a server gone wrong
FLOOD_WINDOW = 2.0


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8",
                                                                              "surrogatepass")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Frames:
    """Bytes in, messages out to ``deliver``; ``fault(why)`` once, then nothing more."""

    def __init__(self, deliver: Callable[[dict[str, Any]], None],
                 fault: Callable[[str], None], *, max_message: int = MAX_MESSAGE) -> None:
        self.deliver, self.fault = deliver, fault
        self.max_message = max_message
        self.buffer = bytearray()
        self.need: int | None = None  # the body's length once its header was read
        self.broken = False
        self.window_start = time.monotonic()
        self.in_window = 0

    def feed(self, chunk: bytes) -> None:
        if self.broken:
            return
        self.buffer += chunk
        try:
            while self._next():
                pass
        except _Bad as exc:
            self.broken = True
            self.buffer.clear()
            self.fault(str(exc))

    def _next(self) -> bool:
        if self.need is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEADER:
                    raise _Bad("it sent a header block over 8 KB")
                return False
            self.need = _length(bytes(self.buffer[:end]), self.max_message)
            del self.buffer[: end + 4]
        if len(self.buffer) < self.need:
            return False
        body = bytes(self.buffer[: self.need])
        del self.buffer[: self.need]
        self.need = None
        self._count()
        try:
            message = json.loads(body)
        except ValueError:
            raise _Bad("it sent a message that is not JSON") from None
        if not isinstance(message, dict):
            raise _Bad("it sent a message that is not a JSON object")
        self.deliver(message)
        return True

    def _count(self) -> None:
        now = time.monotonic()
        if now - self.window_start > FLOOD_WINDOW:
            self.window_start, self.in_window = now, 0
        self.in_window += 1
        if self.in_window > FLOOD_MESSAGES:
            raise _Bad(f"it flooded its output (over {FLOOD_MESSAGES} messages in "
                       f"{FLOOD_WINDOW:g}s)")


class _Bad(Exception):
    pass


def _length(header: bytes, limit: int) -> int:
    length = None
    for line in header.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise _Bad("it sent a Content-Length that is not a number") from None
    if length is None or length < 0:
        raise _Bad("it sent a header without Content-Length")
    if length > limit:
        raise _Bad(f"it sent a message of {length} bytes (at most {limit} are read)")
    return length
