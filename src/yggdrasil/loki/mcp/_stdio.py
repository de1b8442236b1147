"""The stdio transport of ``loki mcp``: JSON-RPC lines on stdin/stdout, stoppable.

Why not the SDK's ``stdio_server``: it reads stdin in an anyio worker thread that
cannot be cancelled, so a server told to stop (SIGTERM) while the client keeps stdin
open could never finish; and a line it cannot parse is passed on silently (2.x) or
answered on the wire but not logged (1.x). Here a daemon thread reads stdin, so
stopping never waits for the client, and every line that is not a JSON-RPC message
is logged to stderr (and dropped: it has no id that an error could answer).

A line longer than the message limit (``MAX_MESSAGE_BYTES`` unless told) is read in
chunks and dropped as it arrives, never held whole, and answered with a JSON-RPC error
(its id, when the head of the line names one); the next line is served as usual.

While serving, fd 0 reads the null device and fd 1 points at stderr, as the SDK does,
so nothing a tool or a library prints can corrupt the protocol; the wire uses private
duplicates, and both descriptors are restored on exit.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from ._limits import MAX_MESSAGE_BYTES, too_large
from ._sdk import Sdk

__all__ = ["stdio_streams"]

log = logging.getLogger("yggdrasil.loki.mcp")

_SHOWN = 200  # characters of an unparseable line shown in the log
_CHUNK = 1 << 16  # bytes read from stdin at a time
_HEAD = 1 << 12  # bytes of an over-long line kept to find its id


@dataclass
class _Oversize:
    """A line over the limit: its first bytes and how long it was."""

    head: bytes
    size: int


@asynccontextmanager
async def stdio_streams(sdk: Sdk, *, max_message_bytes: int = MAX_MESSAGE_BYTES,
                        ) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream of SessionMessages, write stream) over this process's stdin/stdout.

    The read stream ends when stdin reaches EOF (the client closed it). A line over
    ``max_message_bytes`` is answered with an error and never reaches the server.
    """
    sys.stdout.flush()
    wire_in, wire_out = _divert(0, os.O_RDONLY), _divert(1, os.O_WRONLY)
    to_server, from_client = anyio.create_memory_object_stream[Any](16)
    to_client, from_server = anyio.create_memory_object_stream[Any](16)
    token = anyio.lowlevel.current_token()
    wire = _Wire(sdk, to_server, to_client, token)
    reader = threading.Thread(target=_read, args=(wire, wire_in, max_message_bytes),
                              name="loki-mcp-stdin", daemon=True)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_write, sdk, wire_out, from_server)
            reader.start()
            try:
                yield from_client, to_client
            finally:
                to_client.close()  # the writer drains what is queued, then ends
    finally:
        _restore(0, wire_in)
        _restore(1, wire_out)


def _divert(fd: int, mode: int) -> int:
    """A private duplicate of ``fd`` for the wire; ``fd`` itself points elsewhere."""
    wire = os.dup(fd)
    os.set_inheritable(wire, False)
    target = os.open(os.devnull, mode) if fd == 0 else os.dup(2)
    os.dup2(target, fd)
    os.close(target)
    return wire


def _restore(fd: int, wire: int) -> None:
    with suppress(OSError):
        os.dup2(wire, fd)
    # the reader thread may still block on the stdin duplicate: leave that one open
    if fd != 0:
        with suppress(OSError):
            os.close(wire)


@dataclass
class _Wire:
    """Where the reader thread delivers: the server's inbox, the client's outbox."""

    sdk: Sdk
    to_server: Any
    to_client: Any
    token: Any

    def deliver(self, line: bytes) -> None:
        try:
            message = self.sdk.parse(line)
        except Exception as exc:
            shown = line[:_SHOWN].decode("utf-8", "replace")
            log.warning("ignored a line that is not a valid JSON-RPC message (%s): %s",
                        _first_line(exc), shown)
            return
        anyio.from_thread.run(self.to_server.send, message, token=self.token)

    def refuse(self, line: _Oversize, limit: int) -> None:
        error, rid = too_large(line.head, line.size, limit)
        log.warning("refused a message of %d+ bytes (over the %d-byte limit), id %r",
                    line.size, limit, rid)
        anyio.from_thread.run(self.to_client.send, error, token=self.token)


def _read(wire: _Wire, fd: int, limit: int) -> None:
    """Hand each stdin line to the event loop; close the server's stream at EOF."""
    try:
        for line in _lines(fd, limit):
            if isinstance(line, _Oversize):
                wire.refuse(line, limit)
            elif line.strip():
                wire.deliver(line.strip())
    except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        return  # the server stopped first: nothing left to deliver to
    with suppress(RuntimeError):
        anyio.from_thread.run_sync(wire.to_server.close, token=wire.token)
    log.info("the client closed stdin")


def _lines(fd: int, limit: int) -> Iterator[bytes | _Oversize]:
    """The lines of ``fd`` (without their newline); a line over ``limit`` bytes comes as an
    ``_Oversize``, its bytes past the head dropped as they are read."""
    line = bytearray()
    over: _Oversize | None = None
    while chunk := os.read(fd, _CHUNK):
        parts = chunk.split(b"\n")
        for i, piece in enumerate(parts):
            if over is not None:
                over.size += len(piece)
            elif len(line) + len(piece) > limit:
                head = bytes(line[:_HEAD]) + piece[:max(0, _HEAD - len(line))]
                over = _Oversize(head, len(line) + len(piece))
                line.clear()
            else:
                line += piece
            if i < len(parts) - 1:  # this piece ended a line
                yield over if over is not None else bytes(line)
                over = None
                line.clear()
    if over is not None or line:
        yield over if over is not None else bytes(line)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


async def _write(sdk: Sdk, fd: int, from_server: Any) -> None:
    out = os.fdopen(os.dup(fd), "w", encoding="utf-8")
    with out:
        async for message in from_server:
            try:  # a str is a line made here (an error the SDK's types cannot hold)
                out.write((message if isinstance(message, str) else sdk.dump(message)) + "\n")
                out.flush()
            except (BrokenPipeError, OSError):
                return  # the client is gone; nobody reads what is left
