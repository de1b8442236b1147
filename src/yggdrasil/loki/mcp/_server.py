"""``loki mcp``: the toolbox as a Model Context Protocol server over stdio.

Built on the official SDK's low-level ``Server`` (mcp >= 2) rather than ``MCPServer``:
the toolbox already owns each tool's JSON Schema, and the low-level server passes it to
clients unchanged instead of re-deriving one from a Python signature.

- Each tool is listed with ``Tool.input_schema`` as is, and annotations:
  ``readOnlyHint`` for tools that do not mutate, ``destructiveHint`` for those that do.
- ``ERROR:`` and ``REFUSED:`` observations come back as error results (``isError``).
- Confirmation: a server has no terminal to ask, so the toolbox gets ``confirm=None``; the
  MCP client, which sees ``destructiveHint``, is the one that asks its user. Serve with
  ``read_only`` to rule out changes altogether.
- stdout carries only the protocol: logs go to stderr, and the SDK points fd 1 at stderr
  while serving, so stray output from a tool's child process cannot corrupt the wire.
- Tool calls run one at a time in a worker thread: a long ``run`` does not stall the
  protocol, and two edits never race on the same file.
"""

from __future__ import annotations

import logging
import sys
from importlib import metadata
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from ..tools import Tool, Toolbox

__all__ = ["build_server", "call_result", "mcp_tool", "serve"]

log = logging.getLogger("yggdrasil.loki.mcp")


def mcp_tool(tool: Tool) -> types.Tool:
    """The MCP form of a tool: its own schema, and whether it only reads or changes files."""
    if tool.mutates:
        hints = types.ToolAnnotations(read_only_hint=False, destructive_hint=True)
    else:
        hints = types.ToolAnnotations(read_only_hint=True)
    return types.Tool(name=tool.name, description=tool.description,
                      input_schema=tool.input_schema, annotations=hints)


def call_result(observation: str) -> types.CallToolResult:
    """An observation as a tool result; errors and refusals are flagged ``isError``."""
    failed = observation.startswith(("ERROR:", "REFUSED:"))
    return types.CallToolResult(content=[types.TextContent(type="text", text=observation)],
                                is_error=failed)


def build_server(box: Toolbox, *, instructions: str | None = None) -> Server[Any]:
    """A low-level MCP server exposing ``box``: tools/list and tools/call."""
    listed = types.ListToolsResult(tools=[mcp_tool(tool) for tool in box])
    one_at_a_time = anyio.CapacityLimiter(1)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return listed

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        log.info("call %s %s", params.name, sorted(args))
        observation = await anyio.to_thread.run_sync(
            box.call, params.name, args, limiter=one_at_a_time)
        return call_result(observation)

    return Server("loki", version=_version(), instructions=instructions,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _version() -> str:
    try:
        return metadata.version("yggdrasil-loki")
    except metadata.PackageNotFoundError:
        return "0"


def serve(box: Toolbox, *, root: str | None = None) -> None:
    """Serve ``box`` over stdin/stdout until the client closes the connection."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="loki mcp: %(levelname)s %(message)s")
    where = f" inside {root}" if root else ""
    instructions = (f"Tools to list, read, search, write, edit and run files{where}. "
                    "Paths are relative to that root; a path outside it is refused.")
    server = build_server(box, instructions=instructions)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    log.info("serving %d tools%s", len(box), where)
    anyio.run(run)
