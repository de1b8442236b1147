"""The machinery behind ``yggdrasil.loki.tools`` (internal).

Owns ``Tool`` (a function plus its name, description, params and the JSON Schema derived
once from its signature), ``Toolbox`` (the tools of a run, ``call`` that turns every
failure into an observation, ``run`` that also says what it means and what it changed,
thread safety and ``cancel``, its lifetime (``close``, the parts it owns across calls
such as background jobs), ``changed``/``changes``/``revert`` from the journal), the
schema derived from type hints with its limits and vendor flavors, and the catalog of
built-in tools, where each hand's functions get the words a model reads, and the tools
of other MCP servers (``Toolbox.add_mcp``, ``McpServer``: a client over the ``mcp`` SDK).
Imports the hands (``files``, ``search``, ``shell``, ``tables``, ``web``), ``sandbox``
(the per-call cancel scope) and ``errors``.
"""

from __future__ import annotations

from ..results import ToolResult
from ._box import AfterCall, Attached, BeforeCall, Toolbox
from ._catalog import job_tools, read_tools, web_tools, write_tools
from ._catalog_edits import edit_tools, rewind_tool
from ._flavors import FLAVORS, Flavor
from ._mcp import McpServer
from ._schema import bind_args, build_schema, limits_text, parse_docstring
from ._tool import Tool
from ._wiring import diagnostician, hooks, outputs_of

Observation = ToolResult  # the name of a call's result before results were typed

__all__ = [
    "FLAVORS",
    "AfterCall",
    "Attached",
    "BeforeCall",
    "Flavor",
    "McpServer",
    "Observation",
    "Tool",
    "ToolResult",
    "Toolbox",
    "bind_args",
    "build_schema",
    "diagnostician",
    "edit_tools",
    "hooks",
    "job_tools",
    "limits_text",
    "outputs_of",
    "parse_docstring",
    "read_tools",
    "rewind_tool",
    "web_tools",
    "write_tools",
]
