"""The engine: its protocol, what an engine returns, and how one is chosen (public face).

An :class:`Engine` is a model behind an API. It takes the conversation (neutral
messages), the system prompt and, for native tool calling, the toolbox's neutral tool
schemas, and returns a :class:`Completion`: the reply text, any tool calls, token usage.
The loop (``Loki.act``) turns a completion into decisions (:func:`decisions_from`).

Neutral messages are plain dicts, one of::

    {"role": "user", "content": "..."}
    {"role": "assistant", "content": "...", "tool_calls": [{"id", "name", "args"}]}
    {"role": "tool", "tool_call_id": "...", "name": "<tool>", "content": "<observation>",
     "is_error": False}

A tool message's ``is_error`` is true when the call failed or was refused (an engine whose
API has a place for it, such as Anthropic's ``tool_result``, says so there).

Engines are found by name through :data:`ENGINES`, a name -> ``"module:factory"`` map
imported only when used (so vendor SDKs stay optional extras); :func:`register_engine`
adds outside ones the same way.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any

from .engines import (
    DEFAULT_TIMEOUT,
    Completion,
    Decision,
    Engine,
    Message,
    NotADecision,
    RetryPolicy,
    ToolCall,
    decisions_from,
    ollama_models,
    ollama_url,
    parse_decision,
)
from .errors import EngineConfigError

__all__ = [
    "DEFAULT_TIMEOUT",
    "ENGINES",
    "Completion",
    "Decision",
    "Engine",
    "Message",
    "NotADecision",
    "RetryPolicy",
    "ToolCall",
    "choose_engine",
    "create_engine",
    "decisions_from",
    "parse_decision",
    "register_engine",
]

EngineFactory = Callable[..., Engine]

ENGINES: dict[str, str | EngineFactory] = {
    "openai": "yggdrasil.loki.engines.openai:OpenAIEngine",
    "ollama": "yggdrasil.loki.engines.openai:ollama_engine",
    "anthropic": "yggdrasil.loki.engines.anthropic:AnthropicEngine",
    "scripted": "yggdrasil.loki.engines.scripted:ScriptedEngine",
}
"""Engine name -> factory, or ``"module:attr"`` imported on first use (register_engine adds)."""

HOW_TO_CONFIGURE = """no engine is configured. Choose one of:
  - Anthropic:  export ANTHROPIC_API_KEY=...   (pip install 'yggdrasil-loki[anthropic]')
  - OpenAI:     export OPENAI_API_KEY=...      (pip install 'yggdrasil-loki[openai]')
  - Ollama:     start `ollama serve` on localhost:11434 and `ollama pull <model>`
  - any OpenAI-compatible server: export LOKI_ENGINE=openai LOKI_BASE_URL=http://host:port/v1 LOKI_MODEL=<model>
  - on the command line: loki do TASK --engine openai --base-url http://host:port/v1 --model <model>
  - or pass it in code: Loki(engine="openai", model=..., base_url=..., api_key=...)
  - to try loki without a model: --engine scripted --model steps.jsonl (Loki(engine="scripted",
    model=...)) replays the decisions of a file, one JSON object a line (docs/agent.md)"""


def register_engine(name: str, factory: str | EngineFactory) -> None:
    """Make ``name`` usable as ``Loki(engine=name)``.

    ``factory`` is a callable, or ``"module:attr"`` imported on first use; it is called
    with keyword arguments ``model, base_url, api_key, timeout, retry`` plus any options.
    """
    ENGINES[name] = factory


def _factory(name: str) -> EngineFactory:
    target = ENGINES.get(name)
    if target is None:
        known = ", ".join(sorted(ENGINES))
        raise EngineConfigError(f"unknown engine {name!r}; known engines: {known}")
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    factory: EngineFactory = getattr(importlib.import_module(module), attr)
    return factory


def create_engine(
    name: str, *, model: str | None = None, base_url: str | None = None,
    api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT,
    retry: RetryPolicy | None = None, **options: Any,
) -> Engine:
    """The engine registered as ``name``, built with these settings."""
    return _factory(name)(model=model, base_url=base_url, api_key=api_key, timeout=timeout,
                          retry=retry or RetryPolicy(), **options)


def choose_engine(
    engine: str | Engine | None = None, *, model: str | None = None,
    base_url: str | None = None, api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT, retry: RetryPolicy | None = None,
    env: Mapping[str, str] | None = None, **options: Any,
) -> Engine:
    """The engine to use: an object as given, a name, else one chosen from the environment.

    Without ``engine``: ``LOKI_ENGINE`` (with ``LOKI_MODEL`` and ``LOKI_BASE_URL`` filling
    in what was not passed); else ``ANTHROPIC_API_KEY``, then ``OPENAI_API_KEY``; else an
    Ollama server answering on localhost:11434 (or ``OLLAMA_HOST``). With none of these,
    EngineConfigError says how to configure one.
    """
    if engine is not None and not isinstance(engine, str):
        if not callable(getattr(engine, "complete", None)):
            raise EngineConfigError(f"{engine!r} is not an engine: it has no complete() method")
        return engine
    env = os.environ if env is None else env
    name = engine
    if name is None:
        model = model or env.get("LOKI_MODEL") or None
        base_url = base_url or env.get("LOKI_BASE_URL") or None
        name = env.get("LOKI_ENGINE") or _detect(base_url, env)
    return create_engine(name, model=model, base_url=base_url, api_key=api_key,
                         timeout=timeout, retry=retry, **options)


def _detect(base_url: str | None, env: Mapping[str, str]) -> str:
    if base_url:
        return "openai"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if env.get("OPENAI_API_KEY"):
        return "openai"
    if ollama_models(ollama_url(env)) is not None:
        return "ollama"
    raise EngineConfigError(HOW_TO_CONFIGURE)
