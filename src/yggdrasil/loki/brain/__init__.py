"""What every engine shares, below the engines and the loop (internal).

Owns the neutral completion types (``Message``, ``ToolCall``, ``Completion``, the
``Engine`` protocol), how a reply becomes decisions (native tool calls or the
JSON-in-text protocol), the retry policy, and finding a local Ollama server. Imports
only ``yggdrasil.loki.errors``; ``yggdrasil.loki.engine`` re-exports the public names.
"""

from __future__ import annotations

from ._completion import DEFAULT_TIMEOUT, Completion, Engine, Message, ToolCall
from ._decision import Decision, NotADecision, decisions_from, decode_arguments, parse_decision
from ._ollama import ollama_models, ollama_url
from ._retry import RetryPolicy, parse_retry_after, retry_call, status_error

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
    "ollama_models",
    "ollama_url",
    "parse_decision",
    "parse_retry_after",
    "retry_call",
    "status_error",
]
