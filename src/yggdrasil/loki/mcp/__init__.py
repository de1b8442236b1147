"""The toolbox as a Model Context Protocol server (internal; ``loki mcp`` serves it).

Owns the MCP form of each tool (its own JSON Schema, read-only/destructive hints), error
results for ``ERROR:``/``REFUSED:`` observations, and serving over stdio with the
official ``mcp`` SDK (extra ``mcp``), which is imported with this package. Imports
``tools`` only.
"""

from __future__ import annotations

from ._server import build_server, call_result, mcp_tool, serve

__all__ = ["build_server", "call_result", "mcp_tool", "serve"]
