"""JSON Schema from a run function's signature, and argument binding against it.

The schema is built once, when a Tool is made; adapters (OpenAI, Anthropic, MCP) only
reshape it. Binding checks a model's decoded arguments against the same signature and
coerces the harmless slips models make ("10" for 10, "true" for True).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

from ..errors import ToolDefinitionError, ToolError

_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def _unwrap_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema fragment for one Python type hint (``{}`` when unknown)."""
    hint = _unwrap_optional(hint)
    origin = typing.get_origin(hint)
    if origin is Literal:
        values = list(typing.get_args(hint))
        return {"type": _JSON_TYPES.get(type(values[0]), "string"), "enum": values}
    if origin in (list, tuple, set, frozenset):
        args = typing.get_args(hint)
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if origin in (dict, Mapping):
        return {"type": "object"}
    if hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    return {}


def _parameters(run: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    try:
        sig = inspect.signature(run)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"cannot read the signature of {run!r}: {exc}") from exc
    return dict(sig.parameters)


def _hints(run: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(run)
    except Exception:  # unresolvable forward references: fall back to untyped params
        return {}


def build_schema(name: str, params: Mapping[str, str], run: Callable[..., Any]) -> dict[str, Any]:
    """Check ``params`` against ``run``'s signature and return the input JSON Schema.

    Raises ToolDefinitionError when a documented param is not accepted by ``run`` or a
    required argument of ``run`` is not documented.
    """
    sig = _parameters(run)
    hints = _hints(run)
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.values())
    named = {k: p for k, p in sig.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unknown = [p for p in params if p not in named and not takes_kwargs]
    if unknown:
        raise ToolDefinitionError(
            f"tool {name!r}: params {unknown} are not arguments of its run function "
            f"(it takes {list(named)})"
        )
    required = [k for k, p in named.items() if p.default is p.empty]
    undocumented = [k for k in required if k not in params]
    if undocumented:
        raise ToolDefinitionError(
            f"tool {name!r}: required arguments {undocumented} need a description in params"
        )
    properties: dict[str, Any] = {}
    for key, text in params.items():
        prop = type_schema(hints.get(key, Any))
        prop["description"] = text
        param = named.get(key)
        if param is not None and param.default is not param.empty and param.default is not None:
            prop["default"] = param.default
        properties[key] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": [k for k in required if k in params],
        "additionalProperties": takes_kwargs,
    }


def _coerce(key: str, value: Any, schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "integer" and isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "number" and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    if kind == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    expected = {"string": str, "integer": int, "number": int | float, "boolean": bool,
                "array": list, "object": dict}.get(kind or "")
    wrong_bool = isinstance(value, bool) and kind in ("integer", "number")
    if expected is not None and (not isinstance(value, expected) or wrong_bool):
        raise ToolError(f"argument {key!r} must be {_article(kind or '')}, got {value!r}")
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"argument {key!r} must be one of {schema['enum']}, got {value!r}")
    return value


def _article(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def bind_args(name: str, schema: Mapping[str, Any], args: Any) -> dict[str, Any]:
    """Validate a model's arguments; raise ToolError that says what the tool takes."""
    props: Mapping[str, Any] = schema["properties"]
    takes = ", ".join(props) or "no arguments"
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise ToolError(f"arguments for {name} must be a JSON object; it takes: {takes}")
    unknown = [k for k in args if k not in props]
    if unknown and not schema.get("additionalProperties"):
        raise ToolError(f"{name} has no argument {unknown[0]!r}; it takes: {takes}")
    missing = [k for k in schema["required"] if k not in args]
    if missing:
        raise ToolError(f"{name} is missing required argument {missing[0]!r}; it takes: {takes}")
    # null for an optional argument means "use the default", as models often send it
    return {k: _coerce(k, v, props.get(k, {})) for k, v in args.items()
            if v is not None or k in schema["required"]}


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph and the ``Args:`` section (``name: description``) of a docstring."""
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    params: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
        elif in_args and ":" in stripped:
            key, text = stripped.split(":", 1)
            params[key.split("(")[0].strip()] = text.strip()
        elif in_args and not stripped:
            in_args = False
    return summary, params
