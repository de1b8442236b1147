"""A Tool: one named capability, a plain function plus the metadata a model needs."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ToolDefinitionError
from ._schema import build_schema, output_schema, parse_docstring

__all__ = ["Tool"]


@dataclass
class Tool:
    """One named capability the agent can invoke by emitting a JSON call.

    ``run`` takes the decoded args as keyword arguments and returns the observation: a
    string, or a pydantic model (a built-in tool's typed result; a custom tool's own
    model, shown to the model as its JSON); ``params`` maps each argument name to a
    one-line description for the prompt. The JSON Schemas are derived once from ``run``'s
    type hints: ``input_schema`` from its arguments and defaults, ``output_schema`` from
    its return hint when that is a model (None for text).

    Hints for clients that ask (MCP annotations, adapters): ``title`` (default: from the
    name), ``idempotent`` (calling it again with the same arguments changes nothing
    more; default: true for tools that do not mutate), ``open_world`` (it reaches
    outside the root, e.g. the web) and ``read_only`` (the call itself changes nothing;
    default: true for tools that do not mutate). ``mutates`` says how the toolbox runs a
    tool (one at a time, with change tracking); ``read_only`` is what clients and the model
    are told: reading a background job's output runs under the lock, since it settles
    what the job changed, yet changes nothing itself.
    """

    name: str
    description: str
    params: dict[str, str]
    run: Callable[..., Any]
    mutates: bool = False
    title: str = ""
    idempotent: bool | None = None
    open_world: bool = False
    read_only: bool | None = None
    input_schema: dict[str, Any] = field(init=False, repr=False, compare=False)
    output_schema: dict[str, Any] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ToolDefinitionError(f"tool name {self.name!r} must be a Python identifier")
        if not callable(self.run):
            raise ToolDefinitionError(f"tool {self.name!r}: run must be callable")
        self.input_schema = build_schema(self.name, self.params, self.run)
        self.output_schema = output_schema(self.run)
        self.title = self.title or self.name.replace("_", " ").capitalize()
        if self.idempotent is None:
            self.idempotent = not self.mutates
        if self.read_only is None:
            self.read_only = not self.mutates

    @classmethod
    def from_function(
        cls, fn: Callable[..., Any], *, name: str | None = None,
        description: str | None = None, params: dict[str, str] | None = None,
        mutates: bool = False,
    ) -> Tool:
        """A Tool from a plain function: name, description and params from its docstring.

        Params are read from an ``Args:`` section (``name: description`` lines); every
        argument without one gets its name as description.
        """
        doc = inspect.getdoc(fn) or ""
        summary, documented = parse_docstring(doc)
        if params is None:
            names = [k for k, p in inspect.signature(fn).parameters.items()
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            params = {k: documented.get(k, k) for k in names}
        return cls(name or fn.__name__, description or summary or fn.__name__, params, fn, mutates)

    def signature(self) -> str:
        """``name(arg, opt=default)``, as the catalog shows it."""
        props = self.input_schema["properties"]
        required = set(self.input_schema["required"])
        args = [k if k in required else f"{k}={json.dumps(props[k].get('default'))}"
                for k in self.params]
        return f"{self.name}({', '.join(args)})"

    def spec(self) -> str:
        """The tool's entry in the catalog: signature, description, one line per argument."""
        mark = "" if self.read_only else "  [changes files]"
        lines = [f"{self.signature()}{mark}"]
        lines += [f"  {line}" if line else "" for line in self.description.splitlines()]
        lines += [f"  - {k}: {v}" for k, v in self.params.items()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "params": dict(self.params),
                "mutates": self.mutates, "title": self.title, "idempotent": self.idempotent,
                "open_world": self.open_world, "read_only": self.read_only,
                "input_schema": self.input_schema, "output_schema": self.output_schema}
