"""Running one toolbox call for a framework: sync, async (cancellable), and its failure."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from ..results import ErrorResult, tool_result
from ..tools import Toolbox, ToolResult

__all__ = ["ToolFailedError", "arun", "parse_json_args"]


class ToolFailedError(Exception):
    """A tool answered ``ERROR:`` or ``REFUSED:``; raised where a framework wants a raise.

    ``str(exc)`` is the observation, so a framework that shows the exception's message to
    its model shows exactly what the toolbox said.
    """

    def __init__(self, observation: ToolResult) -> None:
        super().__init__(observation.text)
        self.observation = observation


async def arun(box: Toolbox, name: str, args: dict[str, Any]) -> ToolResult:
    """``box.invoke`` in a worker thread; cancelling the awaiting task cancels the call."""
    cancel = threading.Event()
    try:
        return await asyncio.to_thread(box.invoke, name, args, cancel=cancel)
    except asyncio.CancelledError:
        cancel.set()  # the thread stops the command; nobody waits for its answer
        raise


def parse_json_args(name: str, text: str) -> dict[str, Any] | ToolResult:
    """Arguments a framework hands over as a JSON string; an error result if bad."""
    try:
        args = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        return _bad(name, f"the arguments for {name} are not valid JSON: {exc}")
    if not isinstance(args, dict):
        return _bad(name, f"the arguments for {name} must be a JSON object")
    return args


def _bad(name: str, message: str) -> ToolResult:
    return tool_result(ErrorResult(category="argument", message=message), tool=name)
