"""JSON Schema from a run function's signature, and argument binding against it.

The schema is built once, when a Tool is made; adapters (OpenAI, Anthropic, MCP) only
reshape it. Binding checks a model's decoded arguments against the same signature and
coerces the harmless slips models make ("10" for 10, "true" for True).

Limits are declared once, on the run function's hints, with ``annotated_types``
(``rows: Annotated[int, Interval(ge=0, le=1000)] = 10``): pydantic makes them
``minimum``/``maximum``/``minLength``... in the schema, so a model sees them, and
``bind_args`` enforces them from that same schema, so what is shown is what is checked.
A ``Literal`` hint is an ``enum``; a string enum forgives case, spaces and a plural. An
argument whose items have a shape (edit_file's ``edits``) names it with a TypedDict.
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Union

from pydantic import BaseModel, TypeAdapter

from ..errors import ToolDefinitionError, ToolError
from ..results import ErrorResult, Refusal


def _unwrap(hint: Any) -> tuple[Any, list[Any]]:
    """The hint without ``Optional``/``Annotated`` wrappers, and the Annotated metadata."""
    metadata: list[Any] = []
    while True:
        origin = typing.get_origin(hint)
        if origin is Annotated:
            metadata += hint.__metadata__
            hint = typing.get_args(hint)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            if len(args) != 1:
                return hint, metadata
            hint = args[0]
        else:
            return hint, metadata


def type_schema(hint: Any) -> dict[str, Any]:
    """The JSON Schema of one argument's type hint, as pydantic makes it (``{}`` when it
    cannot): limits declared with ``annotated_types`` become ``minimum``/``maxLength``...,
    a ``Literal`` an ``enum``, a TypedDict or model an object; ``Optional`` is dropped
    (null means the default), references are inlined and titles left out, so that the
    vendor flavors reshape plain schemas."""
    inner, metadata = _unwrap(hint)
    shaped = Annotated[(inner, *metadata)] if metadata else inner
    try:
        made = TypeAdapter(shaped).json_schema()
    except Exception:  # a type pydantic has no schema for: described by words only
        return {}
    inlined: dict[str, Any] = _inline(made, made.get("$defs", {}))
    return inlined


def _inline(node: Any, defs: Mapping[str, Any], depth: int = 0) -> Any:
    """``node`` with each local ``$ref`` replaced by its definition and titles dropped."""
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 16:
        return _inline(defs.get(ref.removeprefix("#/$defs/"), {}), defs, depth + 1)
    return {key: _inline(value, defs, depth) for key, value in node.items()
            if key not in ("$defs", "title")}


def _parameters(run: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    try:
        sig = inspect.signature(run)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"cannot read the signature of {run!r}: {exc}") from exc
    return dict(sig.parameters)


def _hints(run: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(run, include_extras=True)  # keep Annotated limits
    except Exception:  # unresolvable forward references: fall back to untyped params
        return {}


def output_schema(run: Callable[..., Any]) -> dict[str, Any] | None:
    """The JSON Schema of what ``run`` returns when its return hint is a pydantic model (or
    a union of them): a built-in tool's result kind, or a custom tool's own model; None
    for a tool that returns text."""
    hint = _hints(run).get("return")
    union = typing.get_origin(hint) in (Union, types.UnionType)
    # an error or refusal is answered with isError, never checked against the schema
    kinds = [k for k in (typing.get_args(hint) if union else (hint,))
             if k not in (ErrorResult, Refusal)]
    if not kinds or not all(isinstance(k, type) and issubclass(k, BaseModel) for k in kinds):
        return None
    shape = kinds[0] if len(kinds) == 1 else Union[tuple(kinds)]  # noqa: UP007
    schema: dict[str, Any] = TypeAdapter(shape).json_schema(mode="serialization")
    return schema if schema.get("type") == "object" else {"type": "object", **schema}


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
    value = _type_slip(value, kind)  # then checked like any value: enum, limits
    expected = {"string": str, "integer": int, "number": int | float, "boolean": bool,
                "array": list, "object": dict}.get(kind or "")
    wrong_bool = isinstance(value, bool) and kind in ("integer", "number")
    if expected is not None and (not isinstance(value, expected) or wrong_bool):
        raise ToolError(f"argument {key!r} must be {_article(kind or '')}, got {value!r}",
                        category="argument")
    if "enum" in schema and isinstance(value, str) and value not in schema["enum"]:
        value = _enum_slip(value, schema["enum"])
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"argument {key!r} must be one of {schema['enum']}, got {value!r}",
                        category="argument")
    if _out_of_limits(value, schema):
        about = f" ({schema['description']})" if schema.get("description") else ""
        raise ToolError(f"argument {key!r} must be {limits_text(schema)}, got {value!r}{about}",
                        category="argument")
    return value


def _type_slip(value: Any, kind: Any) -> Any:
    """``value`` as ``kind`` when a model sent a harmless slip ("10" for 10, "true")."""
    if kind == "integer" and isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "number" and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    if kind == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _enum_slip(value: str, allowed: list[Any]) -> str:
    """The member of a string enum ``value`` means despite a slip: another case, spaces
    around it, a plural ("Methods", "classes", "properties"); else ``value`` unchanged."""
    word = value.strip().lower()
    by_lower = {v.lower(): v for v in allowed if isinstance(v, str)}
    guesses = [word] + [word.removesuffix(plural) + singular
                        for plural, singular in (("s", ""), ("es", ""), ("ies", "y"))
                        if word.endswith(plural)]
    return next((by_lower[g] for g in guesses if g in by_lower), value)


def _out_of_limits(value: Any, schema: Mapping[str, Any]) -> bool:
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):  # NaN compares false with every bound; inf is no amount
            return True
        return (("minimum" in schema and value < schema["minimum"])
                or ("maximum" in schema and value > schema["maximum"])
                or ("exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"])
                or ("exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]))
    if isinstance(value, str | list):
        unit = "Items" if isinstance(value, list) else "Length"
        return (len(value) < schema.get(f"min{unit}", 0)
                or len(value) > schema.get(f"max{unit}", len(value)))
    return False


def limits_text(schema: Mapping[str, Any]) -> str:
    """The limits of a schema in words: ``between 0 and 1000``, ``more than 0 and at most 3600``."""
    low = (f"at least {schema['minimum']}" if "minimum" in schema else
           f"more than {schema['exclusiveMinimum']}" if "exclusiveMinimum" in schema else "")
    high = (f"at most {schema['maximum']}" if "maximum" in schema else
            f"less than {schema['exclusiveMaximum']}" if "exclusiveMaximum" in schema else "")
    if "minimum" in schema and "maximum" in schema:
        return f"between {schema['minimum']} and {schema['maximum']}"
    sizes = [f"{word} {schema[f'{edge}{unit}']} {noun}"
             for unit, noun in (("Length", "characters"), ("Items", "items"))
             for edge, word in (("min", "at least"), ("max", "at most"))
             if f"{edge}{unit}" in schema]
    return " and ".join(part for part in (low, high, *sizes) if part)


def _article(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def bind_args(name: str, schema: Mapping[str, Any], args: Any) -> dict[str, Any]:
    """Validate a model's arguments; raise ToolError that says what the tool takes."""
    props: Mapping[str, Any] = schema["properties"]
    takes = ", ".join(props) or "no arguments"
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise ToolError(f"arguments for {name} must be a JSON object; it takes: {takes}",
                        category="argument")
    unknown = [k for k in args if k not in props]
    if unknown and not schema.get("additionalProperties"):
        raise ToolError(f"{name} has no argument {unknown[0]!r}; it takes: {takes}",
                        category="argument")
    missing = [k for k in schema["required"] if k not in args]
    if missing:
        raise ToolError(f"{name} is missing required argument {missing[0]!r}; it takes: "
                        f"{takes}", category="argument")
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
