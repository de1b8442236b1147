"""Finding a local Ollama server: where it listens and which models it has pulled.

Engine choice probes it when nothing else is configured, and the ``ollama`` engine asks it
for a default model. Standard library only: no SDK is needed to ask.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Mapping

__all__ = ["ollama_models", "ollama_url"]


def ollama_url(env: Mapping[str, str] | None = None) -> str:
    """The Ollama server's root URL: ``OLLAMA_HOST`` or http://localhost:11434."""
    host = (env if env is not None else os.environ).get("OLLAMA_HOST") or "localhost:11434"
    if "://" not in host:
        host = f"http://{host}"
    return host.rstrip("/").replace("://0.0.0.0", "://127.0.0.1")


def ollama_models(url: str, timeout: float = 0.5) -> list[str] | None:
    """The models an Ollama server at ``url`` has pulled, or None when none answers."""
    try:
        with urllib.request.urlopen(f"{url}/api/tags", timeout=timeout) as response:
            data = json.load(response)
    except (OSError, ValueError):
        return None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return None
    return [str(m.get("name") or m.get("model")) for m in models if isinstance(m, dict)]
