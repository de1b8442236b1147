"""Loki: the reason -> act -> observe loop that joins an engine to a toolbox.

``Loki(engine=...).act(task, root=...)`` asks the engine for a decision, runs the tool it
names, feeds the observation back, and repeats until the engine says it is done or the
step budget runs out. The engine never sees the filesystem and the toolbox never sees the
engine: they meet in ``loop/``, and here, its public face, which builds both.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .engine import DEFAULT_TIMEOUT, Engine, RetryPolicy, choose_engine
from .files import DEFAULT_PROTECTED, Root, protect_globs
from .loop import (
    ActResult,
    ActStep,
    ProtocolName,
    Run,
    Session,
    carry_changes,
    gather_instructions,
    new_run_id,
)
from .search import protection
from .settings import Settings
from .tools import Toolbox, filesystem_toolbox

__all__ = ["ActResult", "ActStep", "Loki", "Session"]

DEFAULT_REPO_MAP = 4_000  # characters of repository map in the first message (~1,000 tokens)

EventSink = Callable[[dict[str, Any]], None]


class Loki:
    """An agent: one engine, and the settings of the loop that drives it.

    ``engine`` is a name (``"openai"``, ``"anthropic"``, ``"ollama"``, ``"scripted"`` or
    one added with ``register_engine``), an engine object, or None to choose from the
    environment (see ``yggdrasil.loki.engine.choose_engine``). ``protocol`` picks native
    tool calling or the JSON-in-text protocol (``"auto"``: native when the engine offers
    it, falling back to text when the endpoint rejects tools). ``context_chars`` is the
    conversation budget; one step's observation is cut at ``settings.outputs.step_tokens``
    model tokens (head, tail and the lines that look like errors kept, the whole text kept
    for read_file) and at ``observation_chars`` characters at most.

    ``instructions`` are put in the system prompt of every run (after the project's
    AGENTS.md files, which ``agents_md=False`` leaves out; see ``act``).

    ``settings`` (a :class:`~yggdrasil.loki.settings.Settings`, e.g. ``load_settings(root)``)
    gives what the arguments leave out: ``settings.agent`` the engine, model, base URL,
    protocol and step budget, the rest the toolbox each ``act`` or ``session`` builds.
    """

    def __init__(
        self, engine: str | Engine | None = None, model: str | None = None,
        base_url: str | None = None, api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT, *, retry: RetryPolicy | None = None,
        protocol: ProtocolName | None = None, context_chars: int = 200_000,
        observation_chars: int = 100_000, instructions: str = "", agents_md: bool = True,
        settings: Settings | None = None, **engine_options: Any,
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
        self.instructions = instructions
        self.agents_md = agents_md

    def session(self, root: str | os.PathLike[str] = ".", *, read_only: bool | None = None,
                allow_web: bool | None = None, confirm: Callable[[str], Any] | None = None,
                toolbox: Toolbox | None = None) -> Session:
        """A conversation for several ``act`` calls: each run sees the ones before it.

        Without ``toolbox`` the session opens ``filesystem_toolbox(root, ...)`` and keeps it
        across its runs (``changed`` and ``revert()`` span them all) until ``close()`` or
        the end of ``with loki.session(...) as session:``. A given toolbox was built with
        its own options: ``read_only``, ``allow_web`` or ``confirm`` beside it is a
        ValueError.
        """
        _no_options_beside(toolbox, read_only=read_only, allow_web=allow_web, confirm=confirm)
        if toolbox is None:
            own = filesystem_toolbox(Path(root), settings=self.settings, read_only=read_only,
                                     allow_web=allow_web, confirm=confirm)
            return Session(root=str(own.root.path if own.root else root), toolbox=own,
                           owns_toolbox=True)
        return Session(root=_root_of(toolbox, root), toolbox=toolbox)

    def act(
        self, task: str, root: str | os.PathLike[str] | None = None,
        max_steps: int | None = None,
        read_only: bool | None = None, allow_web: bool | None = None,
        confirm: Callable[[str], Any] | None = None, toolbox: Toolbox | None = None,
        on_step: Callable[[ActStep], None] | None = None,
        transcript: str | os.PathLike[str] | None = None, *, repo_map: int = DEFAULT_REPO_MAP,
        instructions: str = "", session: Session | None = None,
        on_event: EventSink | None = None, run_id: str | None = None,
        settings: Settings | None = None,
    ) -> ActResult:
        """Work on ``task`` inside ``root`` for at most ``max_steps`` tool calls.

        Without ``toolbox`` (or a session's), ``filesystem_toolbox(root, settings=...,
        read_only=..., allow_web=..., confirm=...)`` is used and closed when the run ends
        (its background jobs stop), with ``settings`` (default: the agent's); ``max_steps``
        defaults to ``settings.agent.max_steps`` (12). A given toolbox is used as is and
        stays open: ``read_only``, ``allow_web`` or ``confirm`` beside it (or a session's)
        is a ValueError, as they could not apply. ``root`` defaults to the
        toolbox's root, else the current folder; a ``root`` other than the toolbox's is
        a ValueError (the run would work in one folder and report another). ``on_step(step)``
        is called as each step completes; ``transcript`` is a JSONL file written as the run
        goes, which ``engine="scripted"`` can replay and ``Session.from_transcript`` resume.
        ``on_event(event)`` receives the run's events as they happen (the shapes are in
        ``loop/events.schema.json``). Engine failures that retrying cannot fix raise
        EngineError, with the partial ActResult as ``.result``.

        The system prompt carries the project's AGENTS.md files (from the repository's
        top down to the root, read through the toolbox's Root: a protected one is not
        read), then ``Loki(instructions=...)``, then ``instructions``. ``session``
        continues a conversation: the run starts from its messages and adds its own.

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
        toolbox = toolbox or (session.toolbox if session is not None else None)
        _no_options_beside(toolbox, read_only=read_only, allow_web=allow_web, confirm=confirm)
        root = root if root is not None else (session.root if session is not None else None)
        plan = _Plan(task, max_steps, on_step, transcript, repo_map, instructions, session,
                     on_event, run_id or new_run_id())
        if toolbox is not None:
            return self._act(plan, _root_of(toolbox, root), toolbox)
        # a toolbox of our own ends with the run: its background jobs too
        with filesystem_toolbox(Path(root or "."), settings=settings, read_only=read_only,
                                allow_web=allow_web, confirm=confirm) as own:
            result = self._act(plan, str(own.root.path if own.root else root), own)
        result.files_changed = list(own.changed)  # with what the jobs did until they stopped
        return result

    def _act(self, plan: _Plan, root: str, toolbox: Toolbox) -> ActResult:
        session = plan.session
        result = ActResult(task=plan.task, engine=str(getattr(self.engine, "name", "custom")),
                           model=str(getattr(self.engine, "model", "")),
                           root=str(Path(root).resolve()), run=plan.run,
                           session=session.id if session is not None else plan.run)
        if session is not None:
            carry_changes(session, toolbox)  # what runs of an earlier process changed
        where = toolbox.root or Root.at(root, protect=protection(protect_globs(DEFAULT_PROTECTED)))
        instructions = gather_instructions(
            where, ("instructions given to Loki", self.instructions),
            ("instructions given to act", plan.instructions), agents_md=self.agents_md)
        run = Run(self.engine, result, toolbox, max_steps=plan.max_steps, on_step=plan.on_step,
                  protocol=self.protocol, context_chars=self.context_chars,
                  observation_chars=self.observation_chars, repo_map=plan.repo_map,
                  instructions=instructions,
                  history=session.messages if session is not None else (),
                  on_event=plan.on_event)
        start: dict[str, Any] = {"runs_before": list(session.runs)} if session is not None else {}
        if toolbox.checkpointing is not None:
            result.checkpoints = toolbox.checkpointing.run
            start["checkpoints"] = result.checkpoints
        try:
            return run.go(plan.transcript, start)
        finally:
            if session is not None:
                session.messages = [dict(m) for m in run.conv.messages]
                session.runs.append(plan.run)


@dataclass
class _Plan:
    """What one ``act`` call asked for, carried to the run."""

    task: str
    max_steps: int
    on_step: Callable[[ActStep], None] | None
    transcript: str | os.PathLike[str] | None
    repo_map: int
    instructions: str
    session: Session | None
    on_event: EventSink | None
    run: str


def _no_options_beside(toolbox: Toolbox | None, **options: Any) -> None:
    """ValueError when toolbox options come with a toolbox, which has its own."""
    given = [name for name, value in options.items() if value is not None]
    if toolbox is not None and given:
        raise ValueError(f"{', '.join(given)} cannot apply to a toolbox that is given (it was "
                         "built with its own); pass them to filesystem_toolbox(...) when "
                         "making it, or give no toolbox and let the run make one")


def _root_of(toolbox: Toolbox, root: str | os.PathLike[str] | None) -> str:
    """The root of a run on ``toolbox``: its own; a different ``root`` is a ValueError."""
    own = toolbox.root.path if toolbox.root is not None else None
    if root is None:
        return str(own or Path(".").resolve())
    given = Path(os.path.realpath(os.fspath(root)))
    if own is not None and given != own:
        raise ValueError(f"root {os.fspath(root)!r} is not the toolbox's root ({own}): the run "
                         "would work in one folder and report the other; pass one of them")
    return str(given)
