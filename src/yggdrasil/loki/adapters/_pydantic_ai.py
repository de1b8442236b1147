"""The toolbox as pydantic-ai tools (``pip install pydantic-ai-slim``)."""

from __future__ import annotations

from typing import Any

from ..tools import Tool, Toolbox
from ._invoke import arun

__all__ = ["pydantic_ai"]

RETRIES = 5  # ERROR observations a tool may answer in a row before pydantic-ai gives up


def pydantic_ai(box: Toolbox, *, retries: int = RETRIES) -> list[Any]:
    """One ``pydantic_ai.Tool`` per tool, built from its JSON Schema.

    ``ERROR:`` raises ``ModelRetry`` (the model is asked to correct the call, up to
    ``retries`` times in a row); ``REFUSED:`` raises ``ToolFailed`` where pydantic-ai has
    it (a declined change is not something to retry). pydantic-ai runs a turn's tool
    calls in parallel; tools that change files are ``sequential``, so they run alone and
    in the model's order.
    """
    from pydantic_ai import Tool as PydanticTool

    tools = []
    for tool in box:
        made = PydanticTool.from_schema(_function(box, tool), name=tool.name,
                                        description=tool.description,
                                        json_schema=dict(tool.input_schema),
                                        sequential=tool.mutates)
        made.max_retries = retries
        tools.append(made)
    return tools


def _function(box: Toolbox, tool: Tool) -> Any:
    async def run(**args: Any) -> str:
        from pydantic_ai import ModelRetry, exceptions

        observation = await arun(box, tool.name, args)
        if observation.refused and hasattr(exceptions, "ToolFailed"):
            raise exceptions.ToolFailed(observation.text)
        if not observation.ok:
            raise ModelRetry(observation.text)
        return observation.text

    return run
