"""The conversation a run sends to its engine, kept within a size budget.

Observations are the bulk of a long run. When the conversation outgrows its budget, the
oldest observations are replaced by a short marker (the messages themselves stay, so
every tool call keeps its result), which lets a 50-step run fit a model's context. The
size is counted in characters, a cheap and vendor-neutral stand-in for tokens (~4 each).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..engines import Message
from ._prompt import elided

_HEADER = re.compile(r"Output of step (\d+) \(([^)]*)\):\n")  # observation_header's shape


@dataclass
class _Observation:
    index: int  # position of the message that carries it
    step: int
    tool: str
    header: str  # kept in front of the marker when the output is elided


@dataclass
class Conversation:
    """System prompt plus messages; ``fit`` elides old observations to stay under ``budget``."""

    system: str
    budget: int
    keep_recent: int = 2  # the newest observations are never elided
    messages: list[Message] = field(default_factory=list)
    elided: int = 0
    _observations: list[_Observation] = field(default_factory=list)
    on_add: Callable[[Message], None] | None = None  # told of each message as it is added

    def add(self, message: Message) -> None:
        self.messages.append(message)
        if self.on_add is not None:
            self.on_add(message)

    def add_observation(self, message: Message, *, step: int, tool: str, header: str = "") -> None:
        self._observations.append(_Observation(len(self.messages), step, tool, header))
        self.add(message)

    def add_history(self, messages: Iterable[Message]) -> None:
        """Messages of earlier runs (a session): copied, their observations elidable."""
        for original in messages:
            message = dict(original)
            content = message.get("content")
            if message.get("role") == "tool":
                self.add_observation(message, step=0, tool=str(message.get("name", "")))
            elif (message.get("role") == "user" and isinstance(content, str)
                  and (found := _HEADER.match(content))):
                self.add_observation(message, step=int(found[1]), tool=found[2],
                                     header=found[0])
            else:
                self.add(message)

    def size(self) -> int:
        return len(self.system) + sum(_size(m) for m in self.messages)

    def fit(self, budget: int | None = None) -> int:
        """Elide the oldest observations until the size is within budget; how many were."""
        limit = self.budget if budget is None else budget
        count = 0
        candidates = self._observations[: max(0, len(self._observations) - self.keep_recent)]
        total = self.size()
        for obs in candidates:
            if total <= limit:
                break
            message = self.messages[obs.index]
            body = message["content"][len(obs.header):]
            if body.startswith("[elided"):
                continue
            before = _size(message)
            message["content"] = obs.header + elided(obs.step, obs.tool, len(body))
            message.pop("images", None)  # an elided observation's pictures go with it
            total -= before - _size(message)
            count += 1
        self.elided += count
        return count

    def shrink(self) -> bool:
        """After a context-length error: halve the budget and elide; False when nothing left.

        The newest observations are given up too, but only when nothing older is left.
        """
        self.budget = max(1, min(self.budget, self.size()) // 2)
        if self.fit() > 0:
            return True
        self.keep_recent = 0
        return self.fit() > 0


def _size(message: Message) -> int:
    """Characters, a picture counted as the text of as many tokens (width x height / 750,
    Anthropic's rule) at 4 characters a token."""
    calls = message.get("tool_calls")
    pictures = sum(int(i.get("width", 0)) * int(i.get("height", 0)) * 4 // 750
                   for i in message.get("images") or [] if isinstance(i, dict))
    return (len(message.get("content") or "") + (len(json.dumps(calls)) if calls else 0)
            + pictures)
