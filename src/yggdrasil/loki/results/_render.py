"""The renderer: the one place a tool's answer becomes the parts a model is shown.

Each result kind registers how it reads as text (``@renders(Kind)``), in the module
that declares it, and may register the parts it is shown as (``@shows(Kind)``: text
plus an image, say). :func:`tool_result` is the one way anything a tool returns, or
raises, becomes a :class:`ToolResult`; it applies the guard every observation passes
(made printable and capped). A custom tool's plain string is the one text read for what it
means (its ``ERROR:``/``REFUSED:`` prefix, in ``ToolResult.of``, the custom-tool wrapper):
built-in tools say it as data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from ..errors import Refused, ToolError
from ._base import ErrorResult, ImagePart, Refusal, Result, TextPart, ToolResult, plain, verdict
from ._bounds import clip_text, json_text, printable

__all__ = [
    "error_result",
    "hook_refusal",
    "render_parts",
    "render_text",
    "renders",
    "retexted",
    "shows",
    "text_result",
    "tool_result",
]

R = TypeVar("R", bound=Result)
_TEXT: dict[type[Result], Callable[[Any], str]] = {}
_PARTS: dict[type[Result], Callable[[Any], list[TextPart | ImagePart]]] = {}


def renders(kind: type[R]) -> Callable[[Callable[[R], str]], Callable[[R], str]]:
    """Register ``fn(result) -> str``: how a result of ``kind`` reads as text."""
    def register(fn: Callable[[R], str]) -> Callable[[R], str]:
        _TEXT[kind] = fn
        return fn
    return register


def shows(kind: type[R]) -> Callable[[Callable[[R], list[TextPart | ImagePart]]],
                                      Callable[[R], list[TextPart | ImagePart]]]:
    """Register ``fn(result) -> parts`` for a kind shown as more than its text."""
    def register(fn: Callable[[R], list[TextPart | ImagePart]]
                 ) -> Callable[[R], list[TextPart | ImagePart]]:
        _PARTS[kind] = fn
        return fn
    return register


def _found(table: dict[type[Result], Any], result: Result) -> Any:
    for kind in type(result).__mro__:
        if kind in table:
            return table[kind]
    return None


def render_text(result: Result) -> str:
    """The text a model reads for ``result`` (before the guard)."""
    fn = _found(_TEXT, result)
    if fn is None:
        raise TypeError(f"no text renderer for results of kind {type(result).__name__}")
    return str(fn(result))


def render_parts(result: Result) -> list[TextPart | ImagePart]:
    """The parts ``result`` is shown as: its registered parts, else its text."""
    fn = _found(_PARTS, result)
    return list(fn(result)) if fn is not None else [TextPart(text=render_text(result))]


@renders(ErrorResult)
def _error_text(result: ErrorResult) -> str:
    return f"ERROR: {result.message}"


@renders(Refusal)
def _refusal_text(result: Refusal) -> str:
    return f"REFUSED: {result.message}"


def error_result(exc: ToolError) -> ErrorResult | Refusal:
    """A ToolError as data: a Refusal for ``Refused``, else an ErrorResult."""
    if isinstance(exc, Refused):
        return Refusal(message=str(exc), verb=exc.verb, path=exc.path, rule=exc.rule)
    return ErrorResult(category=exc.category, message=str(exc), hint=exc.hint, rule=exc.rule)


def _guarded(parts: Iterable[TextPart | ImagePart]) -> tuple[TextPart | ImagePart, ...]:
    """The guard every observation passes: printable (names of stray bytes shown
    escaped) and capped, errors and refusals too (they may quote a 2 MB argument)."""
    return tuple(TextPart(text=clip_text(printable(p.text))) if isinstance(p, TextPart) else p
                 for p in parts)


def tool_result(outcome: object, *, tool: str = "", changed: tuple[str, ...] = ()) -> ToolResult:
    """What a tool returned (a Result, a custom tool's pydantic model or string) or raised
    (a ToolError), as a ToolResult. Anything else is an ``output`` error that says what a
    tool may return."""
    if isinstance(outcome, ToolError):
        outcome = error_result(outcome)
    if isinstance(outcome, Result):
        return _made(_guarded(render_parts(outcome)), outcome, changed, tool,
                     is_error=isinstance(outcome, ErrorResult),
                     refused=isinstance(outcome, Refusal))
    if isinstance(outcome, BaseModel):  # a custom tool's own model: shown as its JSON
        text = json_text(plain(outcome.model_dump(mode="json")), indent=2)
        return _made(_guarded([TextPart(text=text)]), outcome, changed, tool)
    if isinstance(outcome, str):
        return text_result(outcome, tool=tool, changed=changed)
    return tool_result(ErrorResult(category="output", message=(
        f"{tool or 'the tool'} returned {type(outcome).__name__}; a tool returns a str or a "
        "pydantic model")), tool=tool, changed=changed)


def text_result(text: str, *, tool: str = "", changed: tuple[str, ...] = (),
                data: BaseModel | None = None) -> ToolResult:
    """A string from outside the built-in tools (a custom tool, a hook) as a ToolResult:
    its ``ERROR:``/``REFUSED:`` prefix says whether it is an error or a refusal."""
    return ToolResult.of(text, changed, tool=tool, data=data)


def _made(parts: tuple[TextPart | ImagePart, ...], data: BaseModel, changed: tuple[str, ...],
          tool: str, *, is_error: bool = False, refused: bool = False) -> ToolResult:
    text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
    return ToolResult(text, is_error, refused, changed, data=data, parts=parts, tool=tool)


def hook_refusal(text: str, *, tool: str = "") -> ToolResult:
    """What a ``before_call`` hook's string refuses a call with: ``REFUSED: <text>``,
    unless the hook wrote its own ``ERROR:``/``REFUSED:`` line."""
    if verdict(text):
        return text_result(text, tool=tool)
    return tool_result(Refusal(message=text, rule="before_call"), tool=tool)


def retexted(result: ToolResult, text: str) -> ToolResult:
    """``result`` shown as ``text`` instead (an after_call hook's replacement): the data and
    the changes stay; error and refusal follow the new text."""
    return text_result(text, tool=result.tool, changed=result.changed, data=result.data)
