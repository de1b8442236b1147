"""The toolbox as a Model Context Protocol server: ``loki mcp`` serves it; ``serve``
(stdio), ``serve_http`` and ``http_app`` (streamable HTTP) are the Python entries.

Owns the MCP form of each tool (its own JSON Schema, a title, read-only/destructive/
idempotent/open-world hints), error results for ``ERROR:``/``REFUSED:`` observations,
cancellation (a cancelled request, a signal, the client closing stdin stop the running
call), its own stdio transport (``_stdio``), the streamable HTTP server with a toolbox per
session (``_http``: ``serve_http``, or ``http_app`` to mount in an ASGI server), the
message size limit (``_limits``) and the adapter over both generations of the
official ``mcp`` SDK, 1.x and 2.x (``_sdk``, extra ``mcp``; imported when serving).
Imports ``tools`` only.
"""

from __future__ import annotations

from ._http import HttpApp, allowed_hosts, allowed_origins, http_app, new_token, serve_http
from ._limits import MAX_MESSAGE_BYTES
from ._sdk import Sdk, load_sdk
from ._server import build_server, call_result, mcp_tool, run_call, serve

__all__ = ["MAX_MESSAGE_BYTES", "HttpApp", "Sdk", "allowed_hosts", "allowed_origins",
           "build_server", "call_result", "http_app", "load_sdk", "mcp_tool", "new_token",
           "run_call", "serve", "serve_http"]
