"""The toolbox as LangChain tools (``pip install langchain-core``; LangGraph uses them too)."""

from __future__ import annotations

from typing import Any

from ..tools import Tool, Toolbox, ToolResult
from ._invoke import arun

__all__ = ["langchain"]


def langchain(box: Toolbox) -> list[Any]:
    """One ``StructuredTool`` per tool, its JSON Schema as ``args_schema``.

    An ``ERROR:``/``REFUSED:`` observation raises ``ToolException``, which the tool
    handles (``handle_tool_error=True``): the ``ToolMessage`` carries the observation
    with ``status="error"``, where a plain string would count as a success.
    """
    from langchain_core.tools import StructuredTool

    return [StructuredTool.from_function(
        func=_sync(box, tool), coroutine=_async(box, tool), name=tool.name,
        description=tool.description, args_schema=dict(tool.input_schema),
        infer_schema=False, handle_tool_error=True, response_format="content")
        for tool in box]


def _answer(observation: ToolResult) -> str:
    from langchain_core.tools import ToolException

    if not observation.ok:
        raise ToolException(observation.text)
    return observation.text


def _sync(box: Toolbox, tool: Tool) -> Any:
    def run(**args: Any) -> str:
        return _answer(box.invoke(tool.name, args))

    return run


def _async(box: Toolbox, tool: Tool) -> Any:
    async def arun_tool(**args: Any) -> str:
        return _answer(await arun(box, tool.name, args))

    return arun_tool
