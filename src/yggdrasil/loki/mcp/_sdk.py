"""The two generations of the official ``mcp`` SDK, behind one small face.

``yggdrasil-loki[mcp]`` accepts ``mcp>=1.24,<3`` so that it installs beside any MCP
client library (several still require ``mcp<2``). The low-level server differs between
them: 1.x registers handlers with decorators and its types live in ``mcp.types`` with
camelCase fields; 2.x takes ``on_*`` callbacks and its types live in ``mcp_types`` with
snake_case fields. Everything else here is built from the wire (camelCase) form, which
both validate, so only this module knows which SDK is installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

__all__ = ["Sdk", "load_sdk"]

ListTools = Callable[[], Awaitable[list[dict[str, Any]]]]
CallTool = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Sdk:
    """The installed SDK: its major version and the pieces the server uses."""

    major: int
    version: str
    types: Any  # mcp.types (1.x) or mcp_types (2.x)

    def tool(self, wire: dict[str, Any]) -> Any:
        return self.types.Tool.model_validate(wire)

    def result(self, wire: dict[str, Any]) -> Any:
        return self.types.CallToolResult.model_validate(wire)

    def server(self, name: str, version: str, instructions: str, list_tools: ListTools,
               call_tool: CallTool) -> Any:
        """A low-level ``Server`` answering tools/list and tools/call."""
        from mcp.server.lowlevel import Server as _Server

        Server: Any = _Server  # typed for one generation only; both are used here
        if self.major >= 2:
            async def on_list_tools(ctx: Any, params: Any) -> Any:
                return self.types.ListToolsResult.model_validate({"tools": await list_tools()})

            async def on_call_tool(ctx: Any, params: Any) -> Any:
                return self.result(await call_tool(params.name, dict(params.arguments or {})))

            return Server(name, version=version, instructions=instructions,
                          on_list_tools=on_list_tools, on_call_tool=on_call_tool)

        server: Any = Server(name, version=version, instructions=instructions)  # 1.x API

        @server.list_tools()
        async def list_handler() -> Any:
            return [self.tool(wire) for wire in await list_tools()]

        # validate_input=False: the toolbox binds arguments itself, forgiving "10" for 10
        @server.call_tool(validate_input=False)
        async def call_handler(name: str, arguments: dict[str, Any] | None) -> Any:
            return self.result(await call_tool(name, dict(arguments or {})))

        return server

    def parse(self, line: str | bytes) -> Any:
        """One JSON-RPC line from the client as a ``SessionMessage`` (raises when invalid)."""
        from mcp.shared.message import SessionMessage

        if self.major >= 2:
            message = self.types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        else:
            message = self.types.JSONRPCMessage.model_validate_json(line)
        return SessionMessage(message)

    def dump(self, session_message: Any) -> str:
        """A ``SessionMessage`` as one JSON line, as the SDK's own stdio transport writes it."""
        if self.major >= 2:
            return str(session_message.message.model_dump_json(by_alias=True, exclude_unset=True))
        return str(session_message.message.model_dump_json(by_alias=True, exclude_none=True))


def load_sdk() -> Sdk:
    """The installed ``mcp`` SDK; ImportError when it is missing or too old."""
    try:
        version = metadata.version("mcp")
    except metadata.PackageNotFoundError as exc:
        raise ImportError("the mcp package is not installed") from exc
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) < (1, 24):
        raise ImportError(f"mcp {version} is too old; loki needs mcp>=1.24")
    types = importlib.import_module("mcp_types" if major >= 2 else "mcp.types")
    return Sdk(major, version, types)
