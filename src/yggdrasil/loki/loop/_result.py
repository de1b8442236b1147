"""What a run produces: its steps and its outcome, each with a JSON form."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from ..results import json_text

__all__ = ["ActResult", "ActStep", "ProtocolName"]

ProtocolName = Literal["auto", "native", "text"]


@dataclass
class ActStep:
    """One step of a run: the tool the model called, with what, and what it got back.

    A reply that was not a decision is a step too: ``tool`` is ``""``, ``thought`` holds
    the reply, and ``observation`` the correction the model was sent.

    ``is_error``/``refused``: the call failed, or was refused; ``changed``: the files it
    changed; ``data``: the call's typed result as JSON values (a command's ``exit_code``,
    ``stdout``..., an edit's diff; see ``Toolbox.invoke``), None for a correction or a
    custom tool's text. ``checkpoint``: the number of the toolbox's checkpoint right
    after the call (``Toolbox.rewind(checkpoint)`` brings the files back to it), None
    when it keeps none.
    """

    n: int
    thought: str
    tool: str
    args: dict[str, Any]
    observation: str
    is_error: bool = False
    refused: bool = False
    changed: list[str] = field(default_factory=list)
    data: dict[str, Any] | None = None
    checkpoint: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, record: dict[str, Any]) -> ActStep:
        """The step a ``step`` record (a transcript line) holds; other keys are ignored."""
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})


@dataclass
class ActResult:
    """The outcome of ``Loki.act``.

    ``completed`` is True when the engine said it was done; ``stop_reason`` is ``"done"``,
    ``"max_steps"``, ``"interrupted"`` (in the transcript and events of a run stopped by
    Ctrl-C) or ``"error"`` (the partial result then rides on the raised
    EngineError as ``.result``). ``usage`` sums ``input_tokens``, ``output_tokens`` and
    ``requests`` over the run; ``files_changed`` are root-relative, from the toolbox.
    ``seconds`` is how long the run took; ``diff`` the unified diff of its changes against
    the files as they were before it (from the toolbox's journal; a file it cannot show,
    such as one a command changed before a copy was kept, gets a ``# <path>: why`` line).
    ``run`` is the run's id (its transcript's name under ``loki do``), ``session`` the
    id of the conversation it continued or began. ``checkpoints`` names the run's
    checkpoints in the store (``loki rewind <checkpoints> STEP``; under ``loki do`` it is
    ``run``), '' when the toolbox keeps none.
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
    seconds: float = 0.0
    diff: str = ""
    run: str = ""
    session: str = ""
    checkpoints: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = None) -> str:
        return json_text(self.to_dict(), indent=indent)
