"""What an engine is and what it returns: neutral messages in, a :class:`Completion` out.

Neutral messages are plain dicts, one of::

    {"role": "user", "content": "..."}
    {"role": "assistant", "content": "...", "tool_calls": [{"id", "name", "args"}]}
    {"role": "tool", "tool_call_id": "...", "name": "<tool>", "content": "<observation>"}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["DEFAULT_TIMEOUT", "Completion", "Engine", "Message", "ToolCall"]

Message = dict[str, Any]
"""A neutral message: a plain dict with a ``role`` of ``user``, ``assistant`` or ``tool``."""
DEFAULT_TIMEOUT = 300.0  # seconds for one request; long enough for a slow local model
"""Seconds an engine waits for one request by default."""


@dataclass
class ToolCall:
    """One native tool call; ``error`` says why its arguments could not be decoded."""

    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    error: str = ""


@dataclass
class Completion:
    """One reply of an engine. ``truncated`` is set when it hit the output limit."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    model: str = ""
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Completion:
        calls = [ToolCall(str(c.get("id", f"call_{i}")), str(c["name"]), dict(c.get("args") or {}),
                          str(c.get("error", "")))
                 for i, c in enumerate(data.get("tool_calls") or [])]
        return cls(text=str(data.get("text") or ""), tool_calls=calls,
                   usage=dict(data.get("usage") or {}), model=str(data.get("model") or ""),
                   truncated=bool(data.get("truncated", False)))


@runtime_checkable
class Engine(Protocol):
    """A model behind an API: messages + system (+ tool schemas) in, a completion out.

    ``native_tools`` says whether the engine is asked with tool schemas (native tool
    calling) or with the JSON-in-text protocol described in the system prompt.
    An engine may also name the ``schema_flavor`` of ``Toolbox.schemas`` its API wants
    (``"openai-strict"``, ``"anthropic"``...); without it the loop sends ``"neutral"``.
    """

    name: str
    model: str
    native_tools: bool

    def complete(
        self, messages: Sequence[Message], *, system: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Completion:
        """One reply to the conversation so far; ``tools`` are the toolbox's schemas (in the
        engine's ``schema_flavor``) when the engine calls tools natively, else None."""
        ...
