"""The toolbox as a Model Context Protocol server (internal; ``loki mcp`` serves it).

Owns the MCP form of each tool (its own JSON Schema, a title, read-only/destructive/
idempotent/open-world hints), error results for ``ERROR:``/``REFUSED:`` observations,
cancellation (a cancelled request, a signal, the client closing stdin stop the running
call), its own stdio transport (``_stdio``) and the adapter over both generations of the
official ``mcp`` SDK, 1.x and 2.x (``_sdk``, extra ``mcp``; imported when serving).
Imports ``tools`` only.
"""

from __future__ import annotations

from ._sdk import Sdk, load_sdk
from ._server import build_server, call_result, mcp_tool, run_call, serve

__all__ = ["Sdk", "build_server", "call_result", "load_sdk", "mcp_tool", "run_call", "serve"]
