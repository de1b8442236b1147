"""The toolbox as Google Agent Development Kit tools (``pip install google-adk``)."""

from __future__ import annotations

from typing import Any

from ..tools import Tool, Toolbox
from ._invoke import arun

__all__ = ["google_adk"]


def google_adk(box: Toolbox) -> list[Any]:
    """One ``google.adk.tools.BaseTool`` per tool, declared with the Gemini-flavored schema.

    ADK's own tools answer a dict; a failure is ``{"error": <observation>}`` (the form
    ADK uses for a tool error it reports to the model) and a success
    ``{"result": <observation>}``.
    """
    from google.adk.tools import BaseTool
    from google.genai import types

    gemini = {entry["name"]: entry["input_schema"] for entry in box.schemas("gemini")}

    class LokiTool(BaseTool):
        def __init__(self, tool: Tool) -> None:
            super().__init__(name=tool.name, description=tool.description)
            self.loki_tool = tool

        def _get_declaration(self) -> Any:
            return types.FunctionDeclaration(
                name=self.name, description=self.description,
                parameters_json_schema=gemini[self.name])

        async def run_async(self, *, args: dict[str, Any], tool_context: Any) -> Any:
            observation = await arun(box, self.name, dict(args or {}))
            return {"result" if observation.ok else "error": observation.text}

    return [LokiTool(tool) for tool in box]
