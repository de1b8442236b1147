"""Any OpenAI-compatible chat-completions endpoint, through the official ``openai`` SDK.

OpenAI itself, and the local servers people run: Ollama (``localhost:11434/v1``), vLLM,
the llama.cpp server, LM Studio. The SDK is imported when an engine is made, never when
this module is, and its own retries are off: the shared policy in ``yggdrasil.loki.engines``
decides.
Aborting at once: 401/403 (key), 400/404/422 (request, model name), context length, and
a 429 that means the quota is spent rather than a rate limit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from ..errors import (
    ContextLengthError,
    EngineConfigError,
    EngineError,
    EngineRequestError,
    ToolsUnsupportedError,
)
from . import (
    DEFAULT_TIMEOUT,
    Completion,
    Message,
    RetryPolicy,
    ToolCall,
    decode_arguments,
    images_of,
    ollama_models,
    ollama_url,
    retry_call,
    status_error,
    unseen_images,
)
from ._sdk_errors import error_message, transport_error
from ._urls import shown_url

DEFAULT_MODEL = "gpt-4.1"
_CONTEXT_HINTS = ("context length", "context_length", "maximum context", "context window",
                  "too many tokens", "prompt is too long")
_KEY_HINT = "set OPENAI_API_KEY or pass api_key="


class OpenAIEngine:
    """Chat completions at ``base_url`` (default: the SDK's, i.e. OpenAI or OPENAI_BASE_URL).

    Tools go to OpenAI itself and to Azure in strict form (``schema_flavor``
    ``"openai-strict"``): every argument required and optional ones nullable, no
    ``default``, which their strict mode and validators want. Every other OpenAI-compatible
    server (Ollama, vLLM, llama.cpp, LM Studio...) gets the plain schema: some reject a
    type list such as ``["string", "null"]``, and a small model told that every optional
    argument is required fills them all in. ``schema_flavor=`` chooses either way.
    """

    def __init__(
        self, model: str | None = None, *, base_url: str | None = None,
        api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None, native_tools: bool = True,
        max_tokens: int | None = None, temperature: float | None = None, name: str = "openai",
        schema_flavor: str | None = None, images: bool = True,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise EngineConfigError(
                "the openai engine needs the openai SDK: pip install 'yggdrasil-loki[openai]'"
            ) from exc
        if api_key is None and base_url and not os.environ.get("OPENAI_API_KEY"):
            api_key = "not-needed"  # local servers ignore the key, the SDK insists on one
        try:
            self._client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout,
                                         max_retries=0)
        except openai.OpenAIError as exc:
            raise EngineConfigError(f"the openai engine has no API key: {_KEY_HINT}, "
                                    "or base_url= for a local server") from exc
        self.name = name
        self.schema_flavor = schema_flavor or strict_for(str(self._client.base_url))
        self.model = model or DEFAULT_MODEL
        self.native_tools = native_tools
        self.images = images  # False: a tool's pictures are described in text, not sent
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.options = {k: v for k, v in (("max_tokens", max_tokens),
                                          ("temperature", temperature)) if v is not None}

    @property
    def base_url(self) -> str:
        """The endpoint as shown and stored: its password and tokens masked."""
        return shown_url(str(self._client.base_url))

    def complete(
        self, messages: Sequence[Message], *, system: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Completion:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, *to_openai_messages(
                messages, images=self.images, engine=self.name)],
            **self.options,
        }
        if tools:
            request["tools"] = [to_openai_tool(t) for t in tools]
        response = retry_call(lambda: self._client.chat.completions.create(**request),
                              self.retry, self._translate)
        return _completion(response, self.model)

    def _translate(self, exc: Exception) -> EngineError | None:
        import openai

        where = f"the {self.name} engine at {self.base_url} (model {self.model})"
        if (transport := transport_error(openai, exc, where, self.timeout)) is not None:
            return transport
        if not isinstance(exc, openai.APIStatusError):
            return None
        status, message, code = exc.status_code, error_message(exc), getattr(exc, "code", None)
        if status == 429 and code == "insufficient_quota":
            return EngineRequestError(f"{where} answered 429: {message} (the quota is spent)")
        if status in (400, 413) and (code == "context_length_exceeded"
                                     or any(h in message.lower() for h in _CONTEXT_HINTS)):
            return ContextLengthError(f"{where} answered {status}: {message}")
        if status == 400 and _rejects_tools(message):
            return ToolsUnsupportedError(f"{where} answered 400: {message}")
        return status_error(status, message, where=where, headers=exc.response.headers,
                            key_hint=_KEY_HINT)


def _rejects_tools(message: str) -> bool:
    text = message.lower()
    return "tool" in text and ("not support" in text or "unsupported" in text
                               or "enable-auto-tool-choice" in text)


def to_openai_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A ``Toolbox.schemas()`` entry as a chat-completions tool (``strict`` when it says so)."""
    function = {"name": schema["name"], "description": schema["description"],
                "parameters": schema["input_schema"]}
    if "strict" in schema:
        function["strict"] = schema["strict"]
    return {"type": "function", "function": function}


def to_openai_messages(messages: Sequence[Message], *, images: bool = True,
                       engine: str = "openai") -> list[dict[str, Any]]:
    """Neutral messages as chat-completions messages. A tool message takes only text, so
    the pictures of a run of tool results follow them in one user message (tool messages
    must follow their assistant message unbroken)."""
    out: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []  # the pictures of the tool results just sent
    for message in messages:
        role = message["role"]
        if role != "tool" and held:
            out.append(_picture_turn(held))
            held = []
        found = images_of(message)
        text = message.get("content") or ""
        if found and not images:
            text, found = f"{text}\n{unseen_images(found, engine)}", []
        if role == "tool":
            out.append({"role": "tool", "tool_call_id": message["tool_call_id"],
                        "content": text})
            held += [{**i, "call": message["tool_call_id"], "name": message.get("name", "")}
                     for i in found]
        elif role == "assistant" and message.get("tool_calls"):
            calls = [{"id": c["id"], "type": "function",
                      "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
                     for c in message["tool_calls"]]
            out.append({"role": "assistant", "content": message.get("content") or None,
                        "tool_calls": calls})
        elif found:  # a user message with pictures (the text protocol's observations)
            out.append({"role": role, "content": [{"type": "text", "text": text},
                                                  *map(_image_url, found)]})
        else:
            out.append({"role": role, "content": text})
    if held:
        out.append(_picture_turn(held))
    return out


def _image_url(image: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "image_url",
            "image_url": {"url": f"data:{image['mime']};base64,{image['data']}"}}


def _picture_turn(held: list[dict[str, Any]]) -> dict[str, Any]:
    """The user message that carries the pictures of the tool results before it."""
    parts: list[dict[str, Any]] = []
    for image in held:
        parts.append({"type": "text", "text": f"The image {image['name']} returned "
                      f"(call {image['call']}), {image['width']}x{image['height']} px:"})
        parts.append(_image_url(image))
    return {"role": "user", "content": parts}


def _completion(response: Any, model: str) -> Completion:
    choices = getattr(response, "choices", None) or []
    if not choices:
        return Completion(model=model)
    message = choices[0].message
    calls = []
    for i, call in enumerate(message.tool_calls or []):
        function = getattr(call, "function", None)
        name = getattr(function, "name", "") or ""
        args, error = decode_arguments(name, getattr(function, "arguments", None))
        calls.append(ToolCall(call.id or f"call_{i}", name, args, error))
    usage = getattr(response, "usage", None)
    return Completion(
        text=message.content or "", tool_calls=calls,
        usage={"input_tokens": getattr(usage, "prompt_tokens", 0) or 0,
               "output_tokens": getattr(usage, "completion_tokens", 0) or 0},
        model=getattr(response, "model", "") or model,
        truncated=choices[0].finish_reason == "length")


def strict_for(base_url: str) -> str:
    """The schema flavor for an endpoint: strict for OpenAI and Azure, plain elsewhere."""
    host = (urlsplit(base_url).hostname or "").lower()
    vendor = host == "openai.com" or host.endswith((".openai.com", ".azure.com"))
    return "openai-strict" if vendor else "neutral"


def ollama_engine(
    model: str | None = None, *, base_url: str | None = None, api_key: str | None = None,
    **settings: Any,
) -> OpenAIEngine:
    """An OpenAI engine on a local Ollama; without a model, the first one it has pulled."""
    server = base_url.rstrip("/").removesuffix("/v1") if base_url else ollama_url()
    if model is None:
        models = ollama_models(server)
        if models is None:
            raise EngineConfigError(f"no Ollama server answers at {server}: start `ollama serve`"
                                    " or set OLLAMA_HOST / base_url=")
        if not models:
            raise EngineConfigError(f"the Ollama server at {server} has no models: "
                                    "`ollama pull qwen2.5-coder` (or pass model=)")
        model = models[0]
    return OpenAIEngine(model, base_url=f"{server}/v1", api_key=api_key or "ollama",
                        name="ollama", **settings)
