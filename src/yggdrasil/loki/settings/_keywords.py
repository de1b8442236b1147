"""The keywords ``filesystem_toolbox`` has always taken, as ways to fill :class:`Settings`.

Each keyword sets one field (``sandbox`` -> ``fence.sandbox``); a keyword that is given
replaces the field, whatever the settings said (``protect=()`` turns protection off,
``hidden=None`` means the default list).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from ..files import DEFAULT_PROTECTED, OnSyntaxError, protect_globs
from ..shell import DEFAULT_HIDDEN, RuleAction, SandboxMode
from ..toolbox import McpServer
from ._model import Settings

KEYWORD_FIELDS = {
    "read_only": "read_only", "allow_web": "web.enabled", "confirm": "policy.confirm",
    "allow_private_hosts": "fence.allow_private_hosts", "sandbox": "fence.sandbox",
    "network": "fence.network", "writable": "fence.writable", "env": "fence.env",
    "unix_sockets": "fence.unix_sockets",
    "hidden": "fence.hidden", "git_writable": "fence.git_writable", "hosts": "fence.hosts",
    "on_syntax_error": "editing.on_syntax_error", "code_cache": "code.cache",
    "max_jobs": "jobs.max_jobs", "job_lifetime": "jobs.lifetime", "job_buffer": "jobs.buffer",
    "protect": "policy.protect", "rules": "policy.rules", "rules_default": "policy.rules_default",
    "before_call": "policy.before_call", "after_call": "policy.after_call",
    "mcp_servers": "mcp_servers", "checkpoints": "checkpoints.enabled",
    "rewind_tool": "checkpoints.rewind_tool",
}


class ToolboxKeywords(TypedDict, total=False):
    """The keywords of ``filesystem_toolbox`` beyond the documented four."""

    allow_private_hosts: bool
    sandbox: SandboxMode
    network: bool | Sequence[str]
    writable: Sequence[str | Path]
    unix_sockets: Sequence[str | Path]
    env: Mapping[str, str] | None
    hidden: Sequence[str | Path] | None
    git_writable: bool
    on_syntax_error: OnSyntaxError
    code_cache: bool | None
    max_jobs: int
    job_lifetime: float
    job_buffer: int
    protect: Sequence[str] | str | None
    rules: Sequence[tuple[str, str]]
    rules_default: RuleAction
    before_call: Callable[..., Any] | None
    after_call: Callable[..., Any] | None
    hosts: Mapping[str, str] | None
    mcp_servers: Sequence[McpServer | Mapping[str, Any]]
    checkpoints: bool
    rewind_tool: bool


def with_keywords(settings: Settings | None, keywords: Mapping[str, Any]) -> Settings:
    """``settings`` (default: the defaults) with each given keyword's field replaced;
    TypeError for a keyword that is not one."""
    unknown = sorted(set(keywords) - set(KEYWORD_FIELDS))
    if unknown:
        raise TypeError(f"filesystem_toolbox() got unexpected keyword(s) {', '.join(unknown)}; "
                        f"it takes root, settings and {', '.join(KEYWORD_FIELDS)}")
    base = settings if settings is not None else Settings()
    if not keywords:
        return base
    shown = {field: keyword for keyword, field in KEYWORD_FIELDS.items()}
    return base.with_values({KEYWORD_FIELDS[k]: _field_value(k, v) for k, v in keywords.items()},
                            name=lambda field: shown.get(field, field))


def _field_value(keyword: str, value: Any) -> Any:
    if keyword == "protect":
        return DEFAULT_PROTECTED if value is None else protect_globs(value)
    if keyword == "hidden":
        return DEFAULT_HIDDEN if value is None else tuple(map(str, value))
    if keyword in ("writable", "unix_sockets"):
        return tuple(map(str, value))
    if keyword == "mcp_servers":  # a list of servers, each named: a table by name
        servers = [s if isinstance(s, McpServer) else McpServer(**s) for s in value]
        return {server.name: server for server in servers}
    if keyword in ("env", "hosts"):
        return dict(value or {})
    if keyword == "network" and not isinstance(value, bool):
        if isinstance(value, str):
            raise ValueError("network is True, False or a list of hosts, not a string")
        return tuple(value)
    return value
