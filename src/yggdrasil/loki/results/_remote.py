"""What a tool of another MCP server answered: its text and its structured content."""

from __future__ import annotations

from typing import Any, Literal

from ._base import ErrorResult, Result, verdict
from ._render import renders

__all__ = ["RemoteResult", "remote_error"]


class RemoteResult(Result):
    """Another MCP server's tool result: its text content (other content said by kind),
    and its ``structuredContent`` when it sent one."""

    kind: Literal["remote"] = "remote"
    server: str
    tool: str
    text: str
    structured: dict[str, Any] | None = None


@renders(RemoteResult)
def _remote_text(result: RemoteResult) -> str:
    return result.text


def remote_error(server: str, text: str) -> ErrorResult:
    """Another server's error result as ours: its text once, after our ``ERROR:`` (a
    server that is itself a loki says ``ERROR:`` already)."""
    message = text[len("ERROR:"):].lstrip() if verdict(text) == "ERROR" else text
    return ErrorResult(category="server", message=message, rule=None,
                       hint=f"the MCP server {server!r} answered with an error")
