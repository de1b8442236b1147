"""Loki: the reason -> act -> observe loop that joins an engine to a toolbox.

``Loki(engine=...).act(task, root=...)`` asks the engine for a decision, runs the tool it
names, feeds the observation back, and repeats until the engine says it is done or the
step budget runs out. The engine never sees the filesystem and the toolbox never sees the
engine: they meet in ``loop/``, and here, its public face, which builds both.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .engine import DEFAULT_TIMEOUT, Engine, RetryPolicy, choose_engine
from .loop import ActResult, ActStep, ProtocolName, Run
from .settings import Settings
from .tools import Toolbox, filesystem_toolbox

__all__ = ["ActResult", "ActStep", "Loki"]

DEFAULT_REPO_MAP = 4_000  # characters of repository map in the first message (~1,000 tokens)


class Loki:
    """An agent: one engine, and the settings of the loop that drives it.

    ``engine`` is a name (``"openai"``, ``"anthropic"``, ``"ollama"``, ``"scripted"`` or
    one added with ``register_engine``), an engine object, or None to choose from the
    environment (see ``yggdrasil.loki.engine.choose_engine``). ``protocol`` picks native
    tool calling or the JSON-in-text protocol (``"auto"``: native when the engine offers
    it, falling back to text when the endpoint rejects tools). ``context_chars`` is the
    conversation budget and ``observation_chars`` the cap on one observation.

    ``settings`` (a :class:`~yggdrasil.loki.settings.Settings`, e.g. ``load_settings(root)``)
    gives what the arguments leave out: ``settings.agent`` the engine, model, base URL,
    protocol and step budget, the rest the toolbox each ``act`` builds.
    """

    def __init__(
        self, engine: str | Engine | None = None, model: str | None = None,
        base_url: str | None = None, api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT, *, retry: RetryPolicy | None = None,
        protocol: ProtocolName | None = None, context_chars: int = 200_000,
        observation_chars: int = 20_000, settings: Settings | None = None,
        **engine_options: Any,
    ) -> None:
        self.settings = settings if settings is not None else Settings()
        agent = self.settings.agent
        protocol = protocol or agent.protocol
        if protocol not in ("auto", "native", "text"):
            raise ValueError(f"protocol must be 'auto', 'native' or 'text', got {protocol!r}")
        self.engine = choose_engine(engine or agent.engine, model=model or agent.model,
                                    base_url=base_url or agent.base_url, api_key=api_key,
                                    timeout=timeout, retry=retry, **engine_options)
        self.protocol: ProtocolName = protocol
        self.context_chars = context_chars
        self.observation_chars = observation_chars

    def act(
        self, task: str, root: str | os.PathLike[str] = ".", max_steps: int | None = None,
        read_only: bool = False, allow_web: bool = False,
        confirm: Callable[[str], bool] | None = None, toolbox: Toolbox | None = None,
        on_step: Callable[[ActStep], None] | None = None,
        transcript: str | os.PathLike[str] | None = None, *, repo_map: int = DEFAULT_REPO_MAP,
        settings: Settings | None = None,
    ) -> ActResult:
        """Work on ``task`` inside ``root`` for at most ``max_steps`` tool calls.

        Without ``toolbox``, ``filesystem_toolbox(root, settings=..., read_only=...,
        allow_web=..., confirm=...)`` is used and closed when the run ends (its background
        jobs stop), with ``settings`` (default: the agent's); a given toolbox is used as is
        and stays open. ``max_steps`` defaults to ``settings.agent.max_steps`` (12). ``on_step(step)`` is called
        as each step completes; ``transcript`` is a JSONL file written as the run goes,
        which ``engine="scripted"`` can replay. Engine failures that retrying cannot fix
        raise EngineError, with the partial ActResult as ``.result``.

        ``repo_map`` is the size in characters (about 4 per token) of the map of the
        root's most referenced definitions put into the first message, when the toolbox
        has a ``repo_map`` tool and the root has source files it can parse; 0 leaves it out.
        """
        settings = settings if settings is not None else self.settings
        max_steps = settings.agent.max_steps if max_steps is None else max_steps
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        if repo_map < 0:
            raise ValueError(f"repo_map is a size in characters (0: no map), got {repo_map}")
        if toolbox is not None:
            return self._act(task, root, max_steps, toolbox, on_step, transcript, repo_map)
        # a toolbox of our own ends with the run: its background jobs too
        with filesystem_toolbox(Path(root), settings=settings, read_only=read_only,
                                allow_web=allow_web, confirm=confirm) as own:
            result = self._act(task, root, max_steps, own, on_step, transcript, repo_map)
        result.files_changed = list(own.changed)  # with what the jobs did until they stopped
        return result

    def _act(self, task: str, root: str | os.PathLike[str], max_steps: int, toolbox: Toolbox,
             on_step: Callable[[ActStep], None] | None,
             transcript: str | os.PathLike[str] | None, repo_map: int) -> ActResult:
        result = ActResult(task=task, engine=str(getattr(self.engine, "name", "custom")),
                           model=str(getattr(self.engine, "model", "")),
                           root=str(Path(root).resolve()))
        run = Run(self.engine, result, toolbox, max_steps=max_steps, on_step=on_step,
                  protocol=self.protocol, context_chars=self.context_chars,
                  observation_chars=self.observation_chars, repo_map=repo_map)
        return run.go(transcript)
