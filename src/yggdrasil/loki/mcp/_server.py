"""``loki mcp``: the toolbox as a Model Context Protocol server over stdio.

Built on the official SDK's low-level ``Server`` (1.x or 2.x, see ``_sdk``) rather than
its high-level one: the toolbox already owns each tool's JSON Schema, and the low-level
server passes it to clients unchanged instead of re-deriving one from a signature.

- Each tool is listed with ``Tool.input_schema`` as is, a ``title`` and all four
  annotations, from the Tool's own fields: ``readOnlyHint``/``destructiveHint`` (its
  ``read_only``, by default ``not mutates``), ``idempotentHint`` (``idempotent``),
  ``openWorldHint`` (``open_world``: the web tools).
- Each tool declares an ``outputSchema`` (its result kind's JSON Schema; a tool that
  answers with text: ``{"result": <text>}``) and each call returns ``structuredContent``
  (the typed result) beside the text; errors and refusals are error results
  (``isError``), their structured content the ``ErrorResult``/``Refusal``.
- Confirmation: a server has no terminal to ask, so the toolbox gets ``confirm=None``; the
  MCP client, which sees ``destructiveHint``, is the one that asks its user. Serve with
  ``read_only`` to rule out changes altogether.
- Calls run in worker threads, and the toolbox decides what runs together: mutating
  calls one at a time, read-only calls alongside them (``Toolbox``).
- ``notifications/cancelled`` stops the call (a command with its whole process tree);
  so do SIGTERM, SIGINT and the client closing stdin (a client that disconnects), after
  which the server stops every background job and exits with nothing left running and
  no undo or scratch folder left behind.
"""

from __future__ import annotations

import base64
import functools
import logging
import signal
import sys
import threading
from importlib import metadata
from typing import Any

import anyio
import anyio.lowlevel

from ..results import ImagePart, TextPart, text_result
from ..tools import Tool, Toolbox, ToolResult
from ._limits import MAX_MESSAGE_BYTES
from ._sdk import Sdk, load_sdk
from ._stdio import stdio_streams

__all__ = ["build_server", "call_result", "mcp_tool", "serve"]

log = logging.getLogger("yggdrasil.loki.mcp")


TEXT_SCHEMA = {"type": "object", "properties": {"result": {"type": "string"}},
               "required": ["result"]}  # the structured form of a tool that answers in text


def mcp_tool(tool: Tool) -> dict[str, Any]:
    """The MCP form of a tool (wire field names): its own schemas, a title and its hints."""
    # all four hints on every tool, each said (the spec's defaults assume the worst: a
    # client that auto-approves reads needs readOnlyHint true, not a missing one)
    hints: dict[str, Any] = {"title": tool.title, "readOnlyHint": bool(tool.read_only),
                             "destructiveHint": not tool.read_only,
                             "idempotentHint": bool(tool.idempotent),
                             "openWorldHint": bool(tool.open_world)}
    return {"name": tool.name, "title": tool.title, "description": tool.description,
            "inputSchema": tool.input_schema,
            "outputSchema": tool.output_schema or TEXT_SCHEMA, "annotations": hints}


def call_result(result: str | ToolResult, *, typed: bool = True) -> dict[str, Any]:
    """A tool's result in wire form: its parts as content, its data as
    ``structuredContent``, errors and refusals ``isError``. ``typed``: the tool declared
    its result's schema; else (and for a string) the structured form is its text."""
    if not isinstance(result, ToolResult):
        result = text_result(result)
    structured = result.structured() if typed or not result.ok else None
    return {"content": [_content(part) for part in result.parts],
            "structuredContent": structured if structured is not None else
            {"result": result.text},
            "isError": not result.ok}


def _content(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, ImagePart):
        return {"type": "image", "mimeType": part.mime,
                "data": base64.b64encode(part.data).decode("ascii")}
    return {"type": "text", "text": part.text}


async def run_call(box: Toolbox, name: str, args: dict[str, Any]) -> ToolResult:
    """``box.invoke`` in a worker thread; cancelling the awaiting task cancels the call.

    The thread cannot be abandoned (it may be changing files), so a cancel sets the
    call's event and then waits for the tool to wind up (a command is killed at once).
    """
    event = threading.Event()
    finished = False

    async def cancel_when_cancelled() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            if not finished:
                event.set()
                log.info("cancelled %s", name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_when_cancelled)
        try:
            observation = await anyio.to_thread.run_sync(
                functools.partial(box.invoke, name, args, cancel=event))
        finally:
            finished = True
            tg.cancel_scope.cancel()
    # A cancel that came while the thread wound up is raised here: a cancelled request
    # must not be answered (mcp 1.x has already answered it, and a second answer crashes)
    await anyio.lowlevel.checkpoint()
    return observation


def build_server(box: Toolbox, *, instructions: str = "", sdk: Sdk | None = None) -> Any:
    """A low-level MCP server exposing ``box``: tools/list and tools/call."""
    sdk = sdk or load_sdk()
    listed = [mcp_tool(tool) for tool in box]
    typed = {tool.name for tool in box if tool.output_schema is not None}

    async def list_tools() -> list[dict[str, Any]]:
        return listed

    async def call_tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
        log.info("call %s %s", name, sorted(args))
        return call_result(await run_call(box, name, args), typed=name in typed)

    return sdk.server("loki", _version(), instructions, list_tools, call_tool)


def describe(root: str | None) -> str:
    """What the server tells the client about its tools."""
    where = f" inside {root}" if root else ""
    return (f"Tools to list, read, search, write, edit and run files{where}. "
            "Paths are relative to that root; a path outside it is refused.")


def log_to_stderr() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="loki mcp: %(levelname)s %(message)s")


def _version() -> str:
    try:
        return metadata.version("yggdrasil-loki")
    except metadata.PackageNotFoundError:
        return "0"


async def _stop_on_signals(box: Toolbox, scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("stopping on %s: %d call(s) cancelled", signal.Signals(signum).name,
                     box.cancel())
            scope.cancel()
            return


async def _serve(box: Toolbox, sdk: Sdk, instructions: str, max_message_bytes: int) -> None:
    server = build_server(box, instructions=instructions, sdk=sdk)
    async with stdio_streams(sdk, max_message_bytes=max_message_bytes) as (read_stream,
                                                                           write_stream), \
            anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signals, box, tg.cancel_scope)
        await server.run(read_stream, write_stream, server.create_initialization_options())
        tg.cancel_scope.cancel()  # the client closed stdin: stop watching for signals
    # nothing may outlive the server: serve()'s box.close() cancels what still runs (a
    # command's tree, a table worker's parse) and waits for it a bounded time


def serve(box: Toolbox, *, root: str | None = None,
          max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
    """Serve ``box`` over stdin/stdout until the client closes stdin or a signal stops it.

    A JSON-RPC line over ``max_message_bytes`` is answered with an error and dropped
    without being held in memory.
    """
    log_to_stderr()
    sdk = load_sdk()
    where = f" inside {root}" if root else ""
    log.info("serving %d tools%s (mcp %s)", len(box), where, sdk.version)
    try:
        anyio.run(_serve, box, sdk, describe(root), max_message_bytes)
    finally:
        box.close()  # calls in flight and background jobs end with the server, however it ends
    log.info("stopped")
