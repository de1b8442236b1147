"""One tool's input schema, reshaped for a vendor's rules (``Toolbox.schemas(flavor)``).

The neutral schema (``Tool.input_schema``) is JSON Schema with ``default`` values for
optional arguments and the limits ``bind_args`` checks. Vendors accept different
subsets of it:

- ``anthropic``: JSON Schema as is.
- ``openai-strict``: OpenAI's strict mode (and validators such as Azure's that reject
  ``default``): every property listed in ``required``, optional ones nullable (a null
  means "use the default", which ``bind_args`` honours), no ``default`` (it moves into
  the description), ``additionalProperties: false``. ``strict`` says whether strict mode
  can take the result: not for a tool that accepts any keyword, or a free-form object.
- ``gemini``: the OpenAPI subset of Gemini function declarations: one ``type`` per
  schema plus ``nullable``, no ``additionalProperties``, enums of strings only,
  exclusive bounds as inclusive ones; a tool without arguments gets no parameters.

Whatever the flavor, ``Toolbox.call`` binds the arguments against the neutral schema:
a model following a reshaped schema is always understood.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["FLAVORS", "Flavor", "reshape"]

Flavor = Literal["neutral", "openai-strict", "anthropic", "gemini"]
FLAVORS: tuple[Flavor, ...] = ("neutral", "openai-strict", "anthropic", "gemini")

_MISSING = object()
# Keywords a Gemini Schema (OpenAPI 3.0 subset) understands; others are dropped.
_GEMINI_KEYS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum",
    "maximum",
})


def reshape(schema: Mapping[str, Any], flavor: Flavor) -> dict[str, Any]:
    """``{"input_schema": ...}`` for ``flavor`` (plus ``"strict"`` for openai-strict)."""
    if flavor == "openai-strict":
        return _openai_strict(schema)
    if flavor == "gemini":
        params = schema["properties"]
        return {"input_schema": _gemini(schema) if params else None}
    return {"input_schema": copy.deepcopy(dict(schema))}


# -- OpenAI strict mode ---------------------------------------------------------------


def _openai_strict(schema: Mapping[str, Any]) -> dict[str, Any]:
    shaped, strict = _strict_object(schema)
    return {"input_schema": shaped, "strict": strict}


def _strict_object(schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """An object schema in strict form (nested declared objects too), and whether strict
    mode can take it."""
    required = set(schema.get("required", ()))
    strict = not schema.get("additionalProperties")
    properties: dict[str, Any] = {}
    for key, original in schema["properties"].items():
        prop = copy.deepcopy(dict(original))
        default = prop.pop("default", _MISSING)
        prop, ready = _strict_property(prop)
        strict = strict and ready
        if key not in required:
            prop = _nullable(prop)
            if default is not _MISSING and "default" not in prop.get("description", ""):
                prop["description"] = (prop.get("description", "") +
                                       f" (default {json.dumps(default)})").strip()
        properties[key] = prop
    shaped = {**({"type": "object"}), **{k: v for k, v in schema.items()
                                         if k not in ("properties", "required", "type")},
              "properties": properties, "required": list(properties),
              "additionalProperties": bool(schema.get("additionalProperties"))}
    return shaped, strict


def _strict_property(prop: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A property in strict form, and whether OpenAI's strict mode can take it: typed, and
    an object only with its keys declared (such an object is reshaped in turn)."""
    kind = prop.get("type")
    if kind is None and "enum" not in prop:
        return prop, False
    if kind == "object":
        if "properties" not in prop:
            return prop, False  # free-form: strict mode wants every key of an object listed
        return _strict_object(prop)
    if kind == "array":
        if "items" not in prop:
            return prop, False
        items, ready = _strict_property(copy.deepcopy(dict(prop["items"])))
        return {**prop, "items": items}, ready
    return prop, True


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    kind = prop.get("type")
    if isinstance(kind, str):
        prop["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        prop["type"] = [*kind, "null"]
    if "enum" in prop and None not in prop["enum"]:
        prop["enum"] = [*prop["enum"], None]
    return prop


# -- Gemini ----------------------------------------------------------------------------


def _gemini(schema: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    notes: list[str] = []  # what the subset cannot say goes into the description
    kind = schema.get("type")
    if isinstance(kind, list):  # ["integer", "null"] -> integer, nullable
        rest = [k for k in kind if k != "null"]
        out["type"] = rest[0] if rest else "string"
        if "null" in kind:
            out["nullable"] = True
    elif kind is not None:
        out["type"] = kind
    for key, value in schema.items():
        if key == "properties":
            out[key] = {name: _gemini(prop) for name, prop in value.items()}
        elif key == "items":
            out[key] = _gemini(value)
        elif key == "enum" and not all(isinstance(v, str) for v in value):
            notes.append("one of " + ", ".join(json.dumps(v) for v in value))
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            notes.append(f"{'more' if key == 'exclusiveMinimum' else 'less'} than {value}")
            if out.get("type") == "integer":
                out.update({"minimum": math.floor(value) + 1} if key == "exclusiveMinimum"
                           else {"maximum": math.ceil(value) - 1})
        elif key in _GEMINI_KEYS and key != "type":
            out[key] = copy.deepcopy(value)
    if notes:
        out["description"] = (out.get("description", "") + f" ({'; '.join(notes)})").strip()
    return out
