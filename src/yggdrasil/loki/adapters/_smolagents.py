"""The toolbox as smolagents tools (``pip install smolagents``)."""

from __future__ import annotations

import inspect
from typing import Any, Optional

from ..tools import Tool, Toolbox
from ._invoke import ToolFailedError

__all__ = ["smolagents"]

_PYTHON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float,
                                 "boolean": bool, "array": list, "object": dict}


def smolagents(box: Toolbox) -> list[Any]:
    """One ``smolagents.Tool`` per tool.

    smolagents checks that ``forward`` takes exactly the arguments of ``inputs`` (a
    ``**kwargs`` forward is rejected) and treats an optional argument as required unless
    it is ``nullable``: each tool gets a ``forward`` with an explicit signature, optional
    arguments nullable and defaulting to None (the toolbox then uses its own default).
    An ``ERROR:``/``REFUSED:`` observation raises ``ToolFailedError``: the agent reports
    it to the model as a failed call, with the observation as the message.
    """
    from smolagents import Tool as SmolTool

    return [_tool_class(SmolTool, box, tool)() for tool in box]


def _tool_class(base: type, box: Toolbox, tool: Tool) -> type:
    schema = tool.input_schema
    required = set(schema["required"])
    inputs: dict[str, dict[str, Any]] = {}
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {"return": str}
    for key, prop in schema["properties"].items():
        kind = prop.get("type")
        entry: dict[str, Any] = {"type": kind if kind in _PYTHON_TYPES else "any",
                                 "description": prop.get("description") or key}
        hint = _PYTHON_TYPES.get(kind, Any)
        if key in required:
            params.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY))
        else:
            entry["nullable"] = True
            hint = Optional[hint]  # noqa: UP045 - smolagents reads Optional as nullable
            params.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=None))
        inputs[key] = entry
        hints[key] = hint

    def forward(self: Any, **args: Any) -> str:
        observation = box.invoke(tool.name, {k: v for k, v in args.items() if v is not None})
        if not observation.ok:
            raise ToolFailedError(observation)
        return observation.text

    forward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    forward.__annotations__ = hints
    forward.__name__ = "forward"
    return type(f"Loki_{tool.name}", (base,), {
        "name": tool.name, "description": tool.description, "inputs": inputs,
        "output_type": "string", "forward": forward, "__module__": __name__})
