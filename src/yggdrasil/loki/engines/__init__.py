"""The built-in engines, each in its own module and imported only when used.

- ``openai``: any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM,
  llama.cpp server, LM Studio); ``ollama`` is the same engine on localhost:11434.
- ``anthropic``: Claude through the Messages API.
- ``scripted``: replays decisions or a recorded transcript, without a model.

They are registered by name in :data:`yggdrasil.loki.engine.ENGINES`, exactly like an
outside engine added with :func:`yggdrasil.loki.engine.register_engine`.
"""
