"""One run of ``Loki.act``: ask the engine, act on its decision, feed the observation back.

Every model reply that acts costs a step: each tool call, and each reply that was not a
decision (it is answered with a correction). Tool failures are observations; only engine
failures that retrying cannot fix end a run early, as an EngineError.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..engines import (
    Completion,
    Decision,
    Engine,
    Message,
    NotADecision,
    decisions_from,
    image_message,
    shown_url,
)
from ..errors import ContextLengthError, EngineError, ToolsUnsupportedError
from ..results import ErrorResult, RepoMap, clip_text, tool_result
from ..toolbox import Toolbox
from ._conversation import Conversation
from ._instructions import Instructions
from ._prompt import correction, observation_header, system_prompt, task_message
from ._result import ActResult, ActStep, ProtocolName
from ._transcript import EVENT_KINDS, TRANSCRIPT_KINDS, Clock, Stream, Transcript

__all__ = ["Run"]

log = logging.getLogger("yggdrasil.loki.agent")

MAX_THOUGHT = 4_000  # characters of a non-decision reply kept in its step


def _tries_json(text: str) -> bool:
    """A reply that attempts a JSON decision and fails is corrected, not taken as the answer."""
    return text.startswith(("{", "```json")) or '"tool"' in text or '"done"' in text


class Run:
    """The state of one ``act`` call."""

    def __init__(
        self, engine: Engine, result: ActResult, toolbox: Toolbox, *, max_steps: int,
        on_step: Callable[[ActStep], None] | None, protocol: ProtocolName = "auto",
        context_chars: int = 200_000, observation_chars: int = 100_000, repo_map: int = 0,
        instructions: Instructions | None = None, history: Sequence[Message] = (),
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.engine = engine
        self.instructions = instructions or Instructions()
        self.clock = Clock()
        self.stream = Stream(result.run, self.clock)
        self.on_event = on_event
        self.result = result
        self.box = toolbox
        self.max_steps = max_steps
        self.on_step = on_step
        self.observation_chars = observation_chars
        self.auto = protocol == "auto"
        self.native = (bool(getattr(self.engine, "native_tools", False)) if self.auto
                       else protocol == "native")
        # an engine may name the schema flavor its API wants (engines/openai: strict);
        # the tools and the engine are the run's own, so their schemas are made once
        flavor: Any = getattr(self.engine, "schema_flavor", "neutral")
        self.schemas = self.box.schemas(flavor)
        self.conv = Conversation(self._system(), budget=context_chars)
        self.conv.add_history(history)
        self.prior = len(self.conv.messages)
        self.conv.add({"role": "user",
                       "content": task_message(result.task, self._repo_map(repo_map))})
        result.usage = {"input_tokens": 0, "output_tokens": 0, "requests": 0}

    def go(self, transcript: str | os.PathLike[str] | None,
           start: dict[str, Any] | None = None) -> ActResult:
        """Run to the end; ``start``: more fields for the transcript's start record."""
        log = Transcript(transcript)
        self.stream.subscribe(log.write, TRANSCRIPT_KINDS)
        if self.on_event is not None:
            self.stream.subscribe(self.on_event, EVENT_KINDS)
        if self.on_step is not None:
            on_step = self.on_step
            self.stream.subscribe(lambda record: on_step(ActStep.of(record)), frozenset({"step"}))
        try:
            self._start(start or {})
            self._loop()
        except EngineError as exc:
            self._finish("", completed=False, reason="error", error=shown_url(str(exc)))
            exc.result = self.result
            raise
        except KeyboardInterrupt:  # Ctrl-C, or loki do's SIGTERM: the records still end
            self._finish("", completed=False, reason="interrupted")
            raise
        finally:
            log.close()
        return self.result

    def _start(self, extra: dict[str, Any]) -> None:
        result, box = self.result, self.box
        base_url = shown_url(str(getattr(self.engine, "base_url", "") or ""))
        self.stream.emit("start", task=result.task, engine=result.engine, model=result.model,
                       base_url=base_url, root=result.root,
                       session=result.session, max_steps=self.max_steps,
                       native_tools=self.native, system=self.conv.system, tools=self.schemas,
                       status=box.status, instructions=self.instructions.sources,
                       instruction_notes=self.instructions.notes, **extra)
        for i, message in enumerate(self.conv.messages):
            self.stream.emit("message", message=message, prior=i < self.prior)
        self.conv.on_add = lambda message: self.stream.emit("message", message=message)
        self.stream.emit("run_started", task=result.task, engine=result.engine,
                         model=result.model, base_url=base_url or None, root=result.root,
                         session=result.session, protocol="native" if self.native else "text",
                         max_steps=self.max_steps, fence=box.status, tools=box.names(),
                         instructions=self.instructions.sources,
                         prior_messages=self.prior)

    def _repo_map(self, budget: int) -> str:
        """The toolbox's repo map for the first message; '' when off, absent or failing."""
        if budget <= 0 or "repo_map" not in self.box:
            return ""
        found = self.box.invoke("repo_map", {"budget": budget})
        mapped = found.data
        if not found.ok or not isinstance(mapped, RepoMap) or not mapped.found:
            log.info("no repository map in the first message: %s",
                     found.text.split("\n", 1)[0])
            return ""
        return found.text

    def _system(self) -> str:
        return system_prompt(self.box, native=self.native, max_steps=self.max_steps,
                             instructions=self.instructions.text())

    def _loop(self) -> None:
        while len(self.result.steps) < self.max_steps:
            completion = self._ask()
            try:
                decisions = self._decisions(completion)
            except NotADecision as exc:
                self._correct(completion, str(exc))
                continue
            self._remember(completion)
            for decision in decisions:
                if decision.done:
                    self._finish(decision.answer, completed=True, reason="done")
                    return
                if len(self.result.steps) >= self.max_steps:
                    break  # the rest of this turn's calls go unanswered: the run ends here
                self._act(decision)
        self._finish("", completed=False, reason="max_steps")

    def _ask(self) -> Completion:
        """One completion; each retry here makes progress (protocol switch, elision)."""
        while True:
            self.conv.system = self._system()  # the toolbox status may name running jobs
            self.conv.fit()
            tools = self.schemas if self.native else None
            self.stream.emit("request", n=self.result.usage["requests"] + 1,
                             messages=len(self.conv.messages), chars=self.conv.size(),
                             tools=len(tools or ()))
            began = time.monotonic()
            try:
                completion = self.engine.complete(self.conv.messages, system=self.conv.system,
                                                  tools=tools)
            except ToolsUnsupportedError as exc:
                if not (self.auto and self.native):
                    raise
                log.warning("%s; switching to the JSON-in-text protocol", exc)
                self.native = False
                continue  # the next round's system prompt is the text protocol's
            except ContextLengthError:
                if not self.conv.shrink():
                    raise
                continue
            self._count(completion)
            self.stream.emit("turn", **completion.to_dict())
            self.stream.emit("usage", seconds=round(time.monotonic() - began, 6),
                             input_tokens=int(completion.usage.get("input_tokens", 0) or 0),
                             output_tokens=int(completion.usage.get("output_tokens", 0) or 0),
                             total=dict(self.result.usage))
            return completion

    def _count(self, completion: Completion) -> None:
        usage = self.result.usage
        usage["requests"] += 1
        for key in ("input_tokens", "output_tokens"):
            usage[key] += int(completion.usage.get(key, 0) or 0)

    def _decisions(self, completion: Completion) -> list[Decision]:
        try:
            return decisions_from(completion)
        except NotADecision:
            text = completion.text.strip()
            if self.native and text and not completion.truncated and not _tries_json(text):
                return [Decision(done=True, answer=text)]  # native: plain text is the answer
            raise

    def _remember(self, completion: Completion) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": completion.text}
        if completion.tool_calls:
            message["tool_calls"] = [{"id": c.id, "name": c.name, "args": c.args}
                                     for c in completion.tool_calls]
        self.conv.add(message)

    def _act(self, decision: Decision) -> None:
        n = len(self.result.steps) + 1
        self.stream.emit("tool_call", step=n, tool=decision.tool, args=decision.args,
                         call_id=decision.call_id, thought=decision.thought)
        began = time.monotonic()
        seen = (self.box.invoke(decision.tool, decision.args) if not decision.error
                else tool_result(ErrorResult(category="argument", message=decision.error),
                                 tool=decision.tool))
        # the step's cap in tokens: a longer answer keeps its head, tail and error lines,
        # the whole kept for read_file (the toolbox's spill folder)
        observation = self.box.outputs.cut(seen.text, self.box.outputs.step, "observation")
        observation = clip_text(observation, self.observation_chars)
        data = seen.structured()
        self.stream.emit("observation", step=n, tool=decision.tool,
                         seconds=round(time.monotonic() - began, 6), changed=list(seen.changed),
                         is_error=seen.is_error, refused=seen.refused, text=observation,
                         data=data, checkpoint=seen.checkpoint)
        pictures = ({"images": [image_message(p) for p in seen.images]} if seen.images
                    else {})  # shown by engines that take images, described by the others
        if decision.call_id is not None:
            self.conv.add_observation({"role": "tool", "tool_call_id": decision.call_id,
                                       "name": decision.tool, "content": observation,
                                       "is_error": not seen.ok, **pictures},
                                      step=n, tool=decision.tool)
        else:
            header = observation_header(n, decision.tool)
            self.conv.add_observation({"role": "user", "content": header + observation,
                                       **pictures}, step=n, tool=decision.tool, header=header)
        self._record(ActStep(n, decision.thought, decision.tool, decision.args, observation,
                             is_error=seen.is_error, refused=seen.refused,
                             changed=list(seen.changed), data=data,
                             checkpoint=seen.checkpoint))

    def _correct(self, completion: Completion, problem: str) -> None:
        message = correction(problem, native=self.native)
        self.conv.add({"role": "assistant", "content": completion.text or "(empty reply)"})
        self.conv.add({"role": "user", "content": message})
        n = len(self.result.steps) + 1
        self.stream.emit("correction", step=n, problem=problem, message=message)
        self._record(ActStep(n, clip_text(completion.text, MAX_THOUGHT), "", {}, message))

    def _record(self, step: ActStep) -> None:
        self.result.steps.append(step)
        self.stream.emit("step", **step.to_dict())

    def _finish(self, answer: str, *, completed: bool, reason: str, **extra: Any) -> None:
        result = self.result
        result.answer, result.completed, result.stop_reason = answer, completed, reason
        result.files_changed = list(self.box.changed)
        result.seconds = self.clock.elapsed()
        result.diff = self.box.diff()
        self.stream.emit("end", answer=answer, completed=completed, stop_reason=reason,
                       files_changed=result.files_changed, changes=self.box.changes,
                       usage=result.usage, seconds=result.seconds, diff=result.diff, **extra)
        self.stream.emit("finished", stop_reason=reason, completed=completed, answer=answer,
                         seconds=result.seconds, files_changed=result.files_changed,
                         usage=dict(result.usage), **extra)
