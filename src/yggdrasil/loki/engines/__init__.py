"""The built-in engines, each in its own module and imported only when used.

- ``openai``: any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM,
  llama.cpp server, LM Studio); ``ollama`` is the same engine on localhost:11434.
- ``anthropic``: Claude through the Messages API.
- ``scripted``: replays decisions or a recorded transcript, without a model.

They are registered by name in :data:`yggdrasil.loki.engine.ENGINES`, exactly like an
outside engine added with :func:`yggdrasil.loki.engine.register_engine`.
Each imports only ``yggdrasil.loki.brain`` (the shared types, decision parsing, retry
policy) and ``yggdrasil.loki.errors``, never ``yggdrasil.loki.engine``, so the registry
can name them without a cycle. ``_sdk_errors`` is private to this package.
"""
