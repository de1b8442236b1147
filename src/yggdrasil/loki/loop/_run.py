"""One run of ``Loki.act``: ask the engine, act on its decision, feed the observation back.

Every model reply that acts costs a step: each tool call, and each reply that was not a
decision (it is answered with a correction). Tool failures are observations; only engine
failures that retrying cannot fix end a run early, as an EngineError.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from ..brain import Completion, Decision, Engine, NotADecision, decisions_from
from ..errors import ContextLengthError, EngineError, ToolsUnsupportedError
from ..files import clip_text
from ..toolbox import Toolbox
from ._conversation import Conversation
from ._prompt import correction, observation_header, system_prompt, task_message
from ._result import ActResult, ActStep, ProtocolName
from ._transcript import Transcript

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
        context_chars: int = 200_000, observation_chars: int = 20_000, repo_map: int = 0,
    ) -> None:
        self.engine = engine
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
        self.conv.add({"role": "user",
                       "content": task_message(result.task, self._repo_map(repo_map))})
        result.usage = {"input_tokens": 0, "output_tokens": 0, "requests": 0}
        self.log = Transcript(None)

    def go(self, transcript: str | os.PathLike[str] | None) -> ActResult:
        self.log = Transcript(transcript)
        try:
            self.log.write("start", task=self.result.task, engine=self.result.engine,
                           model=self.result.model, root=self.result.root,
                           max_steps=self.max_steps, native_tools=self.native)
            self._loop()
        except EngineError as exc:
            self._finish("", completed=False, reason="error", error=str(exc))
            exc.result = self.result
            raise
        finally:
            self.log.close()
        return self.result

    def _repo_map(self, budget: int) -> str:
        """The toolbox's repo map for the first message; '' when off, absent or failing."""
        if budget <= 0 or "repo_map" not in self.box:
            return ""
        found = self.box.run("repo_map", {"budget": budget})
        if not found.ok or found.text.startswith("no definitions"):
            log.info("no repository map in the first message: %s",
                     found.text.split("\n", 1)[0])
            return ""
        return found.text

    def _system(self) -> str:
        return system_prompt(self.box, native=self.native, max_steps=self.max_steps)

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
            self.log.write("turn", **completion.to_dict())
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
        raw = (f"ERROR: {decision.error}" if decision.error
               else self.box.call(decision.tool, decision.args))
        observation = clip_text(raw, self.observation_chars)
        if decision.call_id is not None:
            self.conv.add_observation({"role": "tool", "tool_call_id": decision.call_id,
                                       "name": decision.tool, "content": observation},
                                      step=n, tool=decision.tool)
        else:
            header = observation_header(n, decision.tool)
            self.conv.add_observation({"role": "user", "content": header + observation},
                                      step=n, tool=decision.tool, header=header)
        self._record(ActStep(n, decision.thought, decision.tool, decision.args, observation))

    def _correct(self, completion: Completion, problem: str) -> None:
        message = correction(problem, native=self.native)
        self.conv.add({"role": "assistant", "content": completion.text or "(empty reply)"})
        self.conv.add({"role": "user", "content": message})
        n = len(self.result.steps) + 1
        self._record(ActStep(n, clip_text(completion.text, MAX_THOUGHT), "", {}, message))

    def _record(self, step: ActStep) -> None:
        self.result.steps.append(step)
        self.log.write("step", **step.to_dict())
        if self.on_step is not None:
            self.on_step(step)

    def _finish(self, answer: str, *, completed: bool, reason: str, **extra: Any) -> None:
        result = self.result
        result.answer, result.completed, result.stop_reason = answer, completed, reason
        result.files_changed = list(self.box.changed)
        self.log.write("end", answer=answer, completed=completed, stop_reason=reason,
                       files_changed=result.files_changed, usage=result.usage, **extra)
