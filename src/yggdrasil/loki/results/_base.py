"""The shape every tool call's answer takes: content parts, typed data, and what it means.

A built-in tool returns a :class:`Result` (a pydantic model of its own kind: a command's
exit code and streams, a read's window, an edit's diff...). The toolbox turns that into a
:class:`ToolResult`: the content parts a model is shown (text now; images and documents
where a tool has them), the typed data itself, and the flags programs branch on
(``is_error``, ``refused``) plus the files the call changed. The parts are rendered from
the data once, in this package (``_render``); every surface (the model's text, MCP's
structured content, the CLI, events, transcripts, fleet records) reads one of the two.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from ..outputs import Outputs
from ._bounds import printable

PLAIN = Outputs()  # the caps of an observation where no toolbox gives its own: nothing kept

__all__ = [
    "ErrorResult",
    "ImagePart",
    "Part",
    "Refusal",
    "Result",
    "TextPart",
    "ToolResult",
    "plain",
    "verdict",
]


class TextPart(BaseModel):
    """Text the model reads."""

    model_config = ConfigDict(frozen=True)

    type: Literal["text"] = "text"
    text: str


class ImagePart(BaseModel):
    """A picture the model can see: its bytes, MIME type and pixel size."""

    model_config = ConfigDict(frozen=True)

    type: Literal["image"] = "image"
    mime: str
    data: bytes = Field(repr=False)
    width: int = 0
    height: int = 0

    @field_serializer("data", when_used="json")
    def _base64(self, data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")


Part = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class Result(BaseModel):
    """Base of the typed results of the built-in tools; ``kind`` names the model.

    Results are data: the words a model reads are rendered from them by ``render``
    (this package), never stored in them, and no code reads those words back.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str


class ErrorResult(Result):
    """The call failed (nothing, or only part of it, happened): ``ERROR: <message>``.

    ``category`` says which kind of failure: ``argument`` (the arguments do not fit the
    tool), ``path`` (outside the root, missing, not a file), ``unknown_tool``, ``denied``
    (a command rule; ``rule`` names it), ``cancelled``, ``hook`` (a before/after hook
    raised), ``crash`` (the tool raised something unexpected), ``server`` (another MCP
    server's tool failed), ``output`` (a tool returned something that is not a result),
    or ``tool`` (any other refusal of the tool to do what was asked).
    """

    kind: Literal["error"] = "error"
    category: str = "tool"
    message: str
    hint: str = ""
    rule: str | None = None


class Refusal(Result):
    """A confirmation was declined, or a hook refused the call; nothing changed:
    ``REFUSED: <message>``. ``verb`` and ``path`` say what was asked (``overwrite``,
    ``notes.txt``); ``rule`` what refused it (a command rule, ``before_call``)."""

    kind: Literal["refused"] = "refused"
    message: str
    verb: str = ""
    path: str = ""
    rule: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """One tool call's answer, for programs and for every surface that shows it.

    ``text``: what a model that reads text is shown, what ``Toolbox.call`` returns;
    ``parts``: everything it is shown (``TextPart``, ``ImagePart``), in order; ``data``:
    the typed result (a ``Result`` of the built-in tool's kind, the pydantic model a custom
    tool returned, or None when a custom tool returned a string). ``is_error``: the call
    failed; ``refused``: a confirmation was declined or a hook refused it (nothing
    changed); ``changed``: root-relative paths this call (not the run) created, modified
    or deleted, in the order they were heard of. ``tool``: the tool's name as called.
    ``checkpoint``: the number of the checkpoint taken right after the call (None: the
    call changes nothing, or the toolbox keeps no checkpoints).
    Two results are equal when what they say is (text, flags, changes), whatever their
    data.
    """

    text: str
    is_error: bool = False
    refused: bool = False
    changed: tuple[str, ...] = ()
    data: BaseModel | None = field(default=None, compare=False)
    parts: tuple[TextPart | ImagePart, ...] = field(default=(), compare=False)
    tool: str = field(default="", compare=False)
    # diagnostics of an earlier edit that finished after its observation, shown after this one
    late: tuple[BaseModel, ...] = field(default=(), compare=False)
    checkpoint: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.parts:
            object.__setattr__(self, "parts", (TextPart(text=self.text),))

    @classmethod
    def of(cls, text: str, changed: tuple[str, ...] = (), *, tool: str = "",
           data: BaseModel | None = None, outputs: Outputs | None = None) -> ToolResult:
        """A string from outside the built-in tools (a custom tool, a hook) as a result:
        made printable and capped, and its ``ERROR:``/``REFUSED:`` prefix says whether it
        is an error or a refusal. The one place an observation's text is read."""
        shown = (outputs or PLAIN).cut(printable(text))
        said = verdict(shown)
        return cls(shown, said == "ERROR", said == "REFUSED", changed, data=data, tool=tool)

    def with_late(self, late: Sequence[Any]) -> ToolResult:
        """This result with ``late`` (``LateDiagnostics``) shown after its text."""
        if not late:
            return self
        extra = "\n".join(item.text() for item in late)
        parts = list(self.parts)
        last = max((i for i, p in enumerate(parts) if isinstance(p, TextPart)), default=None)
        if last is None:
            parts.append(TextPart(text=extra))
        else:
            parts[last] = TextPart(text=f"{parts[last].text}\n{extra}")  # type: ignore[union-attr]
        text = f"{self.text}\n{extra}" if self.text else extra
        return replace(self, text=text, parts=tuple(parts), late=(*self.late, *late))

    @property
    def ok(self) -> bool:
        return not (self.is_error or self.refused)

    @property
    def images(self) -> list[ImagePart]:
        return [p for p in self.parts if isinstance(p, ImagePart)]

    def structured(self) -> dict[str, Any] | None:
        """The typed data as JSON-ready values (None for a custom tool's string)."""
        if self.data is None:
            return None
        return plain(self.data.model_dump(mode="json"))

    def __str__(self) -> str:
        return self.text


def verdict(text: str) -> Literal["ERROR", "REFUSED", ""]:
    """What a string from outside the built-in tools says it is by its first word (a
    custom tool's answer, a hook's, another MCP server's): the custom-tool wrapper's one
    reading of text."""
    for word in ("ERROR", "REFUSED"):
        if text.startswith(f"{word}:"):
            return word
    return ""


def plain(value: Any) -> Any:
    """``value`` with every string made printable (a file name of stray bytes, a lone
    surrogate from a model), so that any JSON writer takes it."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(str(k)): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [plain(v) for v in value]
    return value
