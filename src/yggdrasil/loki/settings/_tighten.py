"""Whether a value an untrusted project asks for only tightens what the user set.

Each field has a direction: a stricter sandbox, less network, fewer writable folders,
more hidden paths and protected globs, a stricter rule default, fewer or shorter jobs, a
syntax gate that refuses. A field with no safe direction (the engine's URL, MCP servers
that run outside the fence, variables for commands) may only stay as it is.
"""

from __future__ import annotations

from typing import Any

_RANK = {
    "fence.sandbox": {"off": 0, "auto": 1, "require": 2},
    "policy.rules_default": {"allow": 0, "ask": 1, "deny": 2},
    "editing.on_syntax_error": {"warn": 0, "reject": 1},
}
_ON_IS_LOOSER = frozenset({"fence.allow_private_hosts", "fence.git_writable", "web.enabled",
                           "code.cache", "checkpoints.rewind_tool"})
_OFF_IS_LOOSER = frozenset({"checkpoints.enabled"})  # a project may not stop them
_MORE_IS_STRICTER = frozenset({"fence.hidden", "policy.protect"})
_LESS_IS_STRICTER = frozenset({"jobs.max_jobs", "jobs.lifetime", "jobs.buffer",
                               "agent.max_steps", "mcp.max_message_bytes", "mcp.idle_timeout",
                               "mcp.max_sessions"})
_NEUTRAL = frozenset({"agent.protocol"})


def tightens(field: str, old: Any, new: Any) -> bool:
    """True when ``new`` is as strict as ``old`` or stricter for ``field``."""
    if new == old or field in _NEUTRAL:
        return True
    if field in _RANK:
        return _RANK[field][new] >= _RANK[field][old]
    if field == "read_only":
        return bool(new)
    if field in _ON_IS_LOOSER:
        return not new
    if field in _OFF_IS_LOOSER:
        return bool(new)
    if field in _MORE_IS_STRICTER:
        return set(new) >= set(old)
    if field in _LESS_IS_STRICTER:
        return bool(new <= old)
    if field == "fence.network":
        return _network_tightens(old, new)
    return False  # no safe direction: only the user (or a trusted project) changes it


def _network_tightens(old: bool | tuple[str, ...], new: bool | tuple[str, ...]) -> bool:
    """Open > a host list > none; a host list tightens another only as a subset of it."""
    if new is False:
        return True
    if old is True:
        return not isinstance(new, bool)
    if isinstance(old, tuple) and isinstance(new, tuple):
        return set(new) <= set(old)
    return False


def untrusted_rules(rules: Any) -> tuple[list[Any], list[str]]:
    """An untrusted project's rules: its deny and ask rules kept, its allow rules dropped
    (as text for the warning)."""
    if not isinstance(rules, (list, tuple)):
        return list(rules) if rules else [], []
    kept, dropped = [], []
    for rule in rules:
        if isinstance(rule, (list, tuple)) and rule and rule[0] == "allow":
            dropped.append(" ".join(map(str, rule[1:])))
        else:
            kept.append(rule)
    return kept, dropped
