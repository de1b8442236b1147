"""Claude through the Messages API and the official ``anthropic`` SDK.

The SDK is imported when an engine is made, and its own retries are off: the shared
policy in ``yggdrasil.loki.engines`` decides. Aborting at once: 401/403 (key), 400/404/422
(request, model name), and a prompt too long for the model. 529 (overloaded) is retried.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import (
    ContextLengthError,
    EngineConfigError,
    EngineError,
)
from . import (
    DEFAULT_TIMEOUT,
    Completion,
    Message,
    RetryPolicy,
    ToolCall,
    images_of,
    retry_call,
    status_error,
    unseen_images,
)
from ._sdk_errors import error_message, transport_error
from ._urls import shown_url

DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_MAX_TOKENS = 8192
_CONTEXT_HINTS = ("prompt is too long", "context window", "context length", "too many tokens")
_KEY_HINT = "set ANTHROPIC_API_KEY or pass api_key="


class AnthropicEngine:
    """Messages API at ``base_url`` (default: the SDK's, i.e. Anthropic or ANTHROPIC_BASE_URL)."""

    schema_flavor = "anthropic"  # JSON Schema as the toolbox builds it, limits included

    def __init__(
        self, model: str | None = None, *, base_url: str | None = None,
        api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None, native_tools: bool = True,
        max_tokens: int | None = None, temperature: float | None = None,
        name: str = "anthropic", images: bool = True,
    ) -> None:
        try:
            import anthropic
        except ImportError as exc:
            raise EngineConfigError(
                "the anthropic engine needs the anthropic SDK: "
                "pip install 'yggdrasil-loki[anthropic]'"
            ) from exc
        if not (api_key or os.environ.get("ANTHROPIC_API_KEY")
                or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
            raise EngineConfigError(f"the anthropic engine has no API key: {_KEY_HINT}")
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout,
                                           max_retries=0)
        self.name = name
        self.model = model or DEFAULT_MODEL
        self.native_tools = native_tools
        self.images = images  # False: a tool's pictures are described in text, not sent
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.options: dict[str, Any] = {"max_tokens": max_tokens or DEFAULT_MAX_TOKENS}
        if temperature is not None:
            self.options["temperature"] = temperature

    @property
    def base_url(self) -> str:
        """The endpoint as shown and stored: its password and tokens masked."""
        return shown_url(str(self._client.base_url))

    def complete(
        self, messages: Sequence[Message], *, system: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Completion:
        request: dict[str, Any] = {"model": self.model, "system": system,
                                   "messages": to_anthropic_messages(messages, images=self.images,
                                                                     engine=self.name),
                                   **self.options}
        if tools:
            request["tools"] = [dict(t) for t in tools]  # already {name, description, input_schema}
        response = retry_call(lambda: self._client.messages.create(**request),
                              self.retry, self._translate)
        return _completion(response, self.model)

    def _translate(self, exc: Exception) -> EngineError | None:
        import anthropic

        where = f"the {self.name} engine at {self.base_url} (model {self.model})"
        if (transport := transport_error(anthropic, exc, where, self.timeout)) is not None:
            return transport
        if not isinstance(exc, anthropic.APIStatusError):
            return None
        status, message = exc.status_code, error_message(exc)
        if status == 413 or (status == 400 and any(h in message.lower() for h in _CONTEXT_HINTS)):
            return ContextLengthError(f"{where} answered {status}: {message}")
        return status_error(status, message, where=where, headers=exc.response.headers,
                            key_hint=_KEY_HINT)


def _pictures(message: Message, text: str, images: bool, engine: str,
              ) -> tuple[str, list[dict[str, Any]]]:
    """The message's text, and its pictures as image blocks (or said in the text)."""
    found = images_of(message)
    if not found:
        return text, []
    if not images:
        return f"{text}\n{unseen_images(found, engine)}", []
    return text, [{"type": "image", "source": {"type": "base64", "media_type": i["mime"],
                                                "data": i["data"]}} for i in found]


def _blocks(message: Message, images: bool = True, engine: str = "anthropic",
            ) -> tuple[str, list[dict[str, Any]]]:
    role, content = message["role"], message.get("content") or ""
    content, pictures = _pictures(message, content, images, engine)
    if role == "tool":
        text = content or "(no output)"
        body: str | list[dict[str, Any]] = (
            [{"type": "text", "text": text}, *pictures] if pictures else text)
        return "user", [{"type": "tool_result", "tool_use_id": message["tool_call_id"],
                         "content": body, "is_error": bool(message.get("is_error"))}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    blocks += pictures
    if role == "assistant":
        blocks += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
                   for c in message.get("tool_calls") or []]
    return role, blocks or [{"type": "text", "text": "(empty)"}]


def to_anthropic_messages(messages: Sequence[Message], *, images: bool = True,
                          engine: str = "anthropic") -> list[dict[str, Any]]:
    """Neutral messages as Messages API turns: tool results ride in the next user turn,
    a tool's pictures as image blocks inside its tool_result."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _blocks(message, images, engine)
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)  # the API wants turns to alternate
        else:
            out.append({"role": role, "content": blocks})
    return out


def _completion(response: Any, model: str) -> Completion:
    texts, calls = [], []
    for block in getattr(response, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            args = block.input if isinstance(block.input, dict) else {}
            error = "" if isinstance(block.input, dict) else "the tool input must be a JSON object"
            calls.append(ToolCall(block.id, block.name, args, error))
    usage = getattr(response, "usage", None)
    return Completion(
        text="\n".join(texts), tool_calls=calls,
        usage={"input_tokens": getattr(usage, "input_tokens", 0) or 0,
               "output_tokens": getattr(usage, "output_tokens", 0) or 0},
        model=getattr(response, "model", "") or model,
        truncated=getattr(response, "stop_reason", None) == "max_tokens")
