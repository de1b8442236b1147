"""The toolbox as OpenAI Agents SDK tools (``pip install openai-agents``)."""

from __future__ import annotations

from typing import Any

from ..tools import Tool, Toolbox
from ._invoke import arun, parse_json_args

__all__ = ["openai_agents"]


def openai_agents(box: Toolbox) -> list[Any]:
    """One ``agents.FunctionTool`` per tool, with the toolbox's strict schema.

    The model reads the observation as the tool's output, ``ERROR:``/``REFUSED:`` ones
    too: the SDK turns a raised exception into a generic "An error occurred" message,
    which would hide what the toolbox says is allowed instead.
    """
    from agents import FunctionTool

    strict = {entry["name"]: entry for entry in box.schemas("openai-strict")}
    return [FunctionTool(name=tool.name, description=tool.description,
                         params_json_schema=strict[tool.name]["input_schema"],
                         on_invoke_tool=_invoker(box, tool),
                         strict_json_schema=strict[tool.name]["strict"])
            for tool in box]


def _invoker(box: Toolbox, tool: Tool) -> Any:
    async def on_invoke_tool(ctx: Any, input: str) -> str:
        args = parse_json_args(tool.name, input)
        if not isinstance(args, dict):
            return args.text
        return (await arun(box, tool.name, args)).text

    return on_invoke_tool
