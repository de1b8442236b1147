"""The stdio transport of ``loki mcp``: JSON-RPC lines on stdin/stdout, stoppable.

Why not the SDK's ``stdio_server``: it reads stdin in an anyio worker thread that
cannot be cancelled, so a server told to stop (SIGTERM) while the client keeps stdin
open could never finish; and a line it cannot parse is passed on silently (2.x) or
answered on the wire but not logged (1.x). Here a daemon thread reads stdin, so
stopping never waits for the client, and every line that is not a JSON-RPC message
is logged to stderr (and dropped: it has no id that an error could answer).

While serving, fd 0 reads the null device and fd 1 points at stderr, as the SDK does,
so nothing a tool or a library prints can corrupt the protocol; the wire uses private
duplicates, and both descriptors are restored on exit.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from ._sdk import Sdk

__all__ = ["stdio_streams"]

log = logging.getLogger("yggdrasil.loki.mcp")

_SHOWN = 200  # characters of an unparseable line shown in the log


@asynccontextmanager
async def stdio_streams(sdk: Sdk) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream of SessionMessages, write stream) over this process's stdin/stdout.

    The read stream ends when stdin reaches EOF (the client closed it).
    """
    sys.stdout.flush()
    wire_in, wire_out = _divert(0, os.O_RDONLY), _divert(1, os.O_WRONLY)
    to_server, from_client = anyio.create_memory_object_stream[Any](16)
    to_client, from_server = anyio.create_memory_object_stream[Any](16)
    token = anyio.lowlevel.current_token()
    reader = threading.Thread(target=_read, args=(sdk, wire_in, to_server, token),
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


def _read(sdk: Sdk, fd: int, to_server: Any, token: Any) -> None:
    """Parse each stdin line and hand it to the event loop; close the stream at EOF."""
    try:
        with open(fd, "rb", closefd=False) as stream:
            for raw in stream:
                line = raw.strip()
                if not line:
                    continue
                try:
                    message = sdk.parse(line)
                except Exception as exc:
                    shown = line[:_SHOWN].decode("utf-8", "replace")
                    log.warning("ignored a line that is not a valid JSON-RPC message (%s): %s",
                                _first_line(exc), shown)
                    continue
                anyio.from_thread.run(to_server.send, message, token=token)
    except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        return  # the server stopped first: nothing left to deliver to
    with suppress(RuntimeError):
        anyio.from_thread.run_sync(to_server.close, token=token)
    log.info("the client closed stdin")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


async def _write(sdk: Sdk, fd: int, from_server: Any) -> None:
    out = os.fdopen(os.dup(fd), "w", encoding="utf-8")
    with out:
        async for message in from_server:
            try:
                out.write(sdk.dump(message) + "\n")
                out.flush()
            except (BrokenPipeError, OSError):
                return  # the client is gone; nobody reads what is left
