"""The model side, in one room: what every engine shares, and the built-in engines.

Shared (private modules, exported here): the neutral completion types (``Message``,
``ToolCall``, ``Completion``, the ``Engine`` protocol), how a reply becomes decisions
(native tool calls or the JSON-in-text protocol), the retry policy, and finding a local
Ollama server. ``yggdrasil.loki.engine`` is the public face: it re-exports these and
holds the registry.

The built-in engines, each in its own public module and imported only when used:

- ``openai``: any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM,
  llama.cpp server, LM Studio); ``ollama`` is the same engine on localhost:11434.
- ``anthropic``: Claude through the Messages API.
- ``scripted``: replays decisions or a recorded transcript, without a model.

They are registered by name in :data:`yggdrasil.loki.engine.ENGINES`, exactly like an
outside engine added with :func:`yggdrasil.loki.engine.register_engine`. Importing this
package imports no engine (and no vendor SDK); the engines import only this package's
shared names and ``yggdrasil.loki.errors``, never ``yggdrasil.loki.engine``, so the
registry can name them without a cycle.
"""

from __future__ import annotations

from ._completion import DEFAULT_TIMEOUT, Completion, Engine, Message, ToolCall
from ._decision import Decision, NotADecision, decisions_from, decode_arguments, parse_decision
from ._images import image_message, images_of, unseen_images
from ._ollama import ollama_models, ollama_url
from ._retry import RetryPolicy, parse_retry_after, retry_call, status_error
from ._urls import shown_url

__all__ = [
    "DEFAULT_TIMEOUT",
    "Completion",
    "Decision",
    "Engine",
    "Message",
    "NotADecision",
    "RetryPolicy",
    "ToolCall",
    "decisions_from",
    "decode_arguments",
    "image_message",
    "images_of",
    "ollama_models",
    "ollama_url",
    "parse_decision",
    "parse_retry_after",
    "retry_call",
    "shown_url",
    "status_error",
    "unseen_images",
]
