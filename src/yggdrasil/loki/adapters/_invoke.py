"""Running one toolbox call for a framework: sync, async (cancellable), and its failure."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from ..tools import Observation, Toolbox

__all__ = ["ToolFailedError", "arun", "parse_json_args"]


class ToolFailedError(Exception):
    """A tool answered ``ERROR:`` or ``REFUSED:``; raised where a framework wants a raise.

    ``str(exc)`` is the observation, so a framework that shows the exception's message to
    its model shows exactly what the toolbox said.
    """

    def __init__(self, observation: Observation) -> None:
        super().__init__(observation.text)
        self.observation = observation


async def arun(box: Toolbox, name: str, args: dict[str, Any]) -> Observation:
    """``box.run`` in a worker thread; cancelling the awaiting task cancels the call."""
    cancel = threading.Event()
    try:
        return await asyncio.to_thread(box.run, name, args, cancel=cancel)
    except asyncio.CancelledError:
        cancel.set()  # the thread stops the command; nobody waits for its answer
        raise


def parse_json_args(name: str, text: str) -> dict[str, Any] | Observation:
    """Arguments a framework hands over as a JSON string; an error observation if bad."""
    try:
        args = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        return Observation.of(f"ERROR: the arguments for {name} are not valid JSON: {exc}")
    if not isinstance(args, dict):
        return Observation.of(f"ERROR: the arguments for {name} must be a JSON object")
    return args
