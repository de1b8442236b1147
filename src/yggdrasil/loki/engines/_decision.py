"""From a model's reply to the decisions the loop acts on.

Two protocols reach the same :class:`Decision`. Native tool calling hands over tool
calls already split into name and arguments. The JSON-in-text protocol works with any
model: the reply holds one object, ``{"thought": ..., "tool": ..., "args": {...}}`` or
``{"thought": ..., "done": true, "answer": ...}``, and parsing tolerates code fences,
prose around the object and the key names models commonly drift to.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ._completion import Completion

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_TOOL_KEYS = ("tool", "tool_name", "action", "name", "function")
_ARGS_KEYS = ("args", "arguments", "input", "parameters", "action_input")
_MAX_BRACES = 200  # start positions tried per reply: bounds the work on a brace-heavy reply


@dataclass
class Decision:
    """What the model decided this turn: call ``tool`` with ``args``, or be ``done``.

    ``call_id`` is set for a native tool call (its result goes back as a tool result);
    ``error`` says why the arguments could not be used, and becomes the observation.
    """

    thought: str = ""
    tool: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    answer: str = ""
    call_id: str | None = None
    error: str = ""


class NotADecision(ValueError):
    """The reply holds no usable decision; the message names the problem for the model."""


def decisions_from(completion: Completion) -> list[Decision]:
    """The decisions of one reply: its native tool calls, else the object in its text.

    Raises NotADecision when there are no tool calls and the text holds no decision.
    """
    if completion.tool_calls:
        text = completion.text.strip()
        return [Decision(thought=text if i == 0 else "", tool=call.name, args=call.args,
                         call_id=call.id, error=call.error)
                for i, call in enumerate(completion.tool_calls)]
    try:
        return [parse_decision(completion.text)]
    except NotADecision as exc:
        if completion.truncated:
            raise NotADecision("the reply was cut off at the output limit; keep it short") from exc
        raise


def parse_decision(text: str) -> Decision:
    """The decision in a text reply; raises NotADecision saying what is wrong."""
    if not text.strip():
        raise NotADecision("the reply was empty")
    found: dict[str, Any] | None = None
    for candidate in [*_FENCE.findall(text), text]:
        for obj in _json_objects(candidate):
            if _looks_like_decision(obj):
                return _decision(obj)
            found = found or obj
    if found is not None:
        raise NotADecision('the JSON object has neither a "tool" nor "done": true')
    raise NotADecision("no JSON object was found in it")


def _json_objects(text: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    start = text.find("{")
    tries = 0
    while start != -1 and tries < _MAX_BRACES:
        tries += 1
        try:
            obj, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # deep nesting is as undecodable as bad JSON
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            objects.append(obj)
        start = text.find("{", end)
    return objects


def _looks_like_decision(obj: dict[str, Any]) -> bool:
    if _truthy(obj.get("done")) or "answer" in obj or "final_answer" in obj:
        return True
    return any(isinstance(obj.get(k), str) and obj[k].strip() for k in _TOOL_KEYS)


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _decision(obj: dict[str, Any]) -> Decision:
    thought = _text(obj.get("thought", obj.get("reasoning", "")))
    tool = next((obj[k].strip() for k in _TOOL_KEYS if isinstance(obj.get(k), str)
                 and obj[k].strip()), "")
    if _truthy(obj.get("done")) or not tool:
        answer = obj.get("answer", obj.get("final_answer", thought))
        return Decision(thought=thought, done=True, answer=_text(answer))
    raw: Any = next((obj[k] for k in _ARGS_KEYS if k in obj), {})
    args, error = _args(tool, raw)
    return Decision(thought=thought, tool=tool, args=args, error=error)


def _args(tool: str, raw: Any) -> tuple[dict[str, Any], str]:
    if raw is None:
        return {}, ""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            return {}, f"the args for {tool} are not valid JSON; send a JSON object"
    if not isinstance(raw, dict):
        return {}, f"the args for {tool} must be a JSON object, got {json.dumps(raw)[:80]}"
    return raw, ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def decode_arguments(tool: str, raw: str | dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """A native tool call's arguments (a JSON string for OpenAI) as a dict, or an error."""
    return _args(tool, raw)
