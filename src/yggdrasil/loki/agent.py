"""Loki: the reason -> act -> observe loop that joins an engine to a toolbox.

``Loki(engine=...).act(task, root=...)`` asks the engine for a decision, runs the tool it
names, feeds the observation back, and repeats until the engine says it is done or the
step budget runs out. The engine never sees the filesystem and the toolbox never sees the
engine: this is the one place where the two meet (the loop itself is in ``_loop``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ._retry import RetryPolicy
from .engine import DEFAULT_TIMEOUT, Engine, choose_engine
from .tools import Toolbox, filesystem_toolbox

__all__ = ["ActResult", "ActStep", "Loki"]

ProtocolName = Literal["auto", "native", "text"]


@dataclass
class ActStep:
    """One step of a run: the tool the model called, with what, and what it got back.

    A reply that was not a decision is a step too: ``tool`` is ``""``, ``thought`` holds
    the reply, and ``observation`` the correction the model was sent.
    """

    n: int
    thought: str
    tool: str
    args: dict[str, Any]
    observation: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ActResult:
    """The outcome of ``Loki.act``.

    ``completed`` is True when the engine said it was done; ``stop_reason`` is ``"done"``,
    ``"max_steps"`` or ``"error"`` (the partial result then rides on the raised
    EngineError as ``.result``). ``usage`` sums ``input_tokens``, ``output_tokens`` and
    ``requests`` over the run; ``files_changed`` are root-relative, from the toolbox.
    """

    task: str
    engine: str
    model: str
    root: str
    steps: list[ActStep] = field(default_factory=list)
    answer: str = ""
    completed: bool = False
    files_changed: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)


class Loki:
    """An agent: one engine, and the settings of the loop that drives it.

    ``engine`` is a name (``"openai"``, ``"anthropic"``, ``"ollama"``, ``"scripted"`` or
    one added with ``register_engine``), an engine object, or None to choose from the
    environment (see ``yggdrasil.loki.engine.choose_engine``). ``protocol`` picks native
    tool calling or the JSON-in-text protocol (``"auto"``: native when the engine offers
    it, falling back to text when the endpoint rejects tools). ``context_chars`` is the
    conversation budget and ``observation_chars`` the cap on one observation.
    """

    def __init__(
        self, engine: str | Engine | None = None, model: str | None = None,
        base_url: str | None = None, api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT, *, retry: RetryPolicy | None = None,
        protocol: ProtocolName = "auto", context_chars: int = 200_000,
        observation_chars: int = 20_000, **engine_options: Any,
    ) -> None:
        if protocol not in ("auto", "native", "text"):
            raise ValueError(f"protocol must be 'auto', 'native' or 'text', got {protocol!r}")
        self.engine = choose_engine(engine, model=model, base_url=base_url, api_key=api_key,
                                    timeout=timeout, retry=retry, **engine_options)
        self.protocol: ProtocolName = protocol
        self.context_chars = context_chars
        self.observation_chars = observation_chars

    def act(
        self, task: str, root: str | os.PathLike[str] = ".", max_steps: int = 12,
        read_only: bool = False, allow_web: bool = False,
        confirm: Callable[[str], bool] | None = None, toolbox: Toolbox | None = None,
        on_step: Callable[[ActStep], None] | None = None,
        transcript: str | os.PathLike[str] | None = None,
    ) -> ActResult:
        """Work on ``task`` inside ``root`` for at most ``max_steps`` tool calls.

        Without ``toolbox``, ``filesystem_toolbox(root, read_only=..., allow_web=...,
        confirm=...)`` is used; a given toolbox is used as is. ``on_step(step)`` is called
        as each step completes; ``transcript`` is a JSONL file written as the run goes,
        which ``engine="scripted"`` can replay. Engine failures that retrying cannot fix
        raise EngineError, with the partial ActResult as ``.result``.
        """
        from ._loop import Run

        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        if toolbox is None:
            toolbox = filesystem_toolbox(Path(root), read_only=read_only, allow_web=allow_web,
                                         confirm=confirm)
        result = ActResult(task=task, engine=str(getattr(self.engine, "name", "custom")),
                           model=str(getattr(self.engine, "model", "")),
                           root=str(Path(root).resolve()))
        run = Run(self, result, toolbox, max_steps=max_steps, on_step=on_step)
        return run.go(transcript)
