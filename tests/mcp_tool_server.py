"""A small MCP server for the client tests, on the official SDK's high-level server (FastMCP
in 1.x, MCPServer in 2.x): `python mcp_tool_server.py stdio` or `... http PORT`."""

from __future__ import annotations

import os
import sys

try:
    from mcp.server.mcpserver import MCPServer as Server  # mcp 2.x

    V1 = False
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef]  # mcp 1.x

    V1 = True

server = Server("notes")
NOTES: list[str] = []


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def remember(note: str) -> str:
    """Keep a note; the answer counts them."""
    NOTES.append(note)
    return f"{len(NOTES)} note(s)"


@server.tool()
def drop_all() -> str:
    """Forget every note."""
    NOTES.clear()
    return "dropped"


@server.tool()
def fail(why: str) -> str:
    """Raise an error with this message."""
    raise ValueError(why)


@server.tool()
def die() -> str:
    """End the server's process at once."""
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    elif V1:  # the address is a setting of the server
        server.settings.host, server.settings.port = "127.0.0.1", int(sys.argv[2])
        server.run("streamable-http")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
