"""The toolbox as the tools of other agent frameworks.

Each function takes a :class:`~yggdrasil.loki.tools.Toolbox` and returns a list of that
framework's own tool objects, with the toolbox's names, descriptions and JSON Schemas.
The framework is imported only when its function is called: it stays the user's
dependency, never ours. ``ERROR:`` and ``REFUSED:`` observations go through the
framework's error channel, so the framework (and its model) sees a failed call:

- ``openai_agents``: ``agents.FunctionTool`` (strict schemas); the observation is the
  tool output, errors included (the SDK's own error path would hide the message).
- ``langchain``: ``StructuredTool``; errors raise ``ToolException`` (handled, so the
  ``ToolMessage`` has ``status="error"`` and the observation as content).
- ``smolagents``: ``smolagents.Tool`` subclasses with an explicit ``forward`` signature,
  optional arguments ``nullable``; errors raise, which the agent feeds back to the model.
- ``pydantic_ai``: ``pydantic_ai.Tool``; errors raise ``ModelRetry``, refusals
  ``ToolFailed``; mutating tools are ``sequential``.
- ``google_adk``: ``google.adk.tools.BaseTool`` subclasses with Gemini-flavored schemas;
  results are ``{"result": ...}`` or ``{"error": ...}`` as ADK's own tools answer.

Calls go through ``Toolbox.invoke``, which is thread-safe, so frameworks that run tool calls
in parallel (pydantic-ai, LangGraph) get exact change reports; cancelling an async call
cancels the tool (a command with its whole process tree). Imports ``tools`` only.
"""

from __future__ import annotations

from ._google_adk import google_adk
from ._invoke import ToolFailedError
from ._langchain import langchain
from ._openai_agents import openai_agents
from ._pydantic_ai import pydantic_ai
from ._smolagents import smolagents

__all__ = ["ToolFailedError", "google_adk", "langchain", "openai_agents", "pydantic_ai",
           "smolagents"]
