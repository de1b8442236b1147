"""The settings flags, made from the fields' declarations (``settings.Flag``).

Each field of ``Settings`` names its flags; this module turns them into argparse options
(:func:`add_settings_flags`) and what was given back into dotted values
(:func:`given_settings`). A field's type makes the flag's shape: a yes/no is a switch,
a choice takes one of its values, a number takes one, a list or a table is repeatable.
Every toolbox command takes the flags of the toolbox's groups; ``loki do`` adds the
``agent`` group's, ``loki mcp`` the ``mcp`` group's.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Collection, Iterator
from typing import Any

from ..settings import UNSET, Flag, SettingField, setting_fields
from ._common import CliError

__all__ = ["AGENT", "MCP", "TOOLBOX", "add_settings_flags", "given_flags", "given_settings",
           "restore_flags"]

AGENT, MCP = frozenset({"agent"}), frozenset({"mcp"})
TOOLBOX = frozenset({"", "fence", "policy", "jobs", "editing", "code", "web", "diagnostics",
                     "outputs", "checkpoints"})  # "": top level


def flags_of(groups: Collection[str], exclude: Collection[str] = ()
             ) -> Iterator[tuple[SettingField, Flag]]:
    """The flags of the fields in ``groups`` (but the ``exclude`` fields), in order."""
    for dotted, field in setting_fields().items():
        if field.group in groups and dotted not in exclude:
            for flag in field.setting.flags:
                yield field, flag


def add_settings_flags(group: Any, groups: Collection[str] = TOOLBOX,
                       exclude: Collection[str] = ()) -> None:
    """The flags of the fields in ``groups``, into an argparse group."""
    for field, flag in flags_of(groups, exclude):
        group.add_argument(flag.name, **_shape(field, flag))


def _shape(field: SettingField, flag: Flag) -> dict[str, Any]:
    """argparse's keywords for ``flag``: given or not, its value is None when not given."""
    kind = _base(field.info.annotation)
    help_text = flag.help or field.help
    if flag.negatable:
        return {"action": argparse.BooleanOptionalAction, "default": None, "help": help_text}
    if flag.const is not UNSET or kind is bool:
        const = True if flag.const is UNSET else flag.const
        return {"action": "store_const", "const": const, "default": None, "help": help_text}
    shape: dict[str, Any] = {"default": None, "metavar": flag.metavar, "help": help_text}
    if repeatable(field):
        shape["action"] = "append"
        if not flag.help:
            shape["help"] += " (repeatable)"
    elif typing.get_origin(kind) is typing.Literal:
        shape["choices"] = typing.get_args(kind)
    elif kind in (int, float):
        shape["type"] = kind
    return shape


def _base(kind: Any) -> Any:
    """The annotation without its None (``str | None`` -> ``str``)."""
    args = [a for a in _members(kind) if a is not type(None)]
    return args[0] if len(args) == 1 else kind


def _members(kind: Any) -> tuple[Any, ...]:
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        return typing.get_args(kind)
    return (kind,)


def repeatable(field: SettingField) -> bool:
    """A list or a table (or a yes/no that may be a list, as the network)."""
    return any(typing.get_origin(m) in (tuple, dict) for m in _members(field.info.annotation))


def _is_table(field: SettingField) -> bool:
    return any(typing.get_origin(m) is dict for m in _members(field.info.annotation))


def given_settings(args: argparse.Namespace, groups: Collection[str] = TOOLBOX
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The dotted values the flags given in ``args`` set: those that go over the files
    (``overrides``), and those that replace what the files made (a resetting flag such
    as ``--no-protect``, with the field's other flags after it). CliError for flags that
    contradict each other or an item that cannot be read."""
    overrides: dict[str, Any] = {}
    replaced: dict[str, Any] = {}
    for dotted, field in setting_fields().items():
        if field.group not in groups or not field.setting.flags:
            continue
        given = [(f, getattr(args, _dest(f))) for f in field.setting.flags
                 if getattr(args, _dest(f), None) is not None]
        resets = [f for f, _ in given if f.resets]
        others = [(f, v) for f, v in given if not f.resets]
        if len(others) > 1:
            names = " and ".join(f.name for f, _ in others)
            raise CliError(f"{names} contradict each other; give one")
        value = _value(field, *others[0]) if others else None
        if resets:
            replaced[dotted] = (*resets[0].const, *(value or ()))
        elif others:
            overrides[dotted] = value
    return overrides, replaced


def _dest(flag: Flag) -> str:
    return flag.name.lstrip("-").replace("-", "_")


def _value(field: SettingField, flag: Flag, given: Any) -> Any:
    """What a flag given on the command line sets: each item of a repeated flag read by
    the flag's ``item`` (a table's items are (name, value) pairs)."""
    if not isinstance(given, list):
        return given
    items = []
    for text in given:
        try:
            items.append(flag.item(text) if flag.item is not None else text)
        except ValueError as exc:
            said = str(exc)
            raise CliError(said if said.startswith(flag.name)
                           else f"{flag.name} {text!r}: {said}") from None
    return dict(items) if _is_table(field) else items


def given_flags(args: argparse.Namespace, groups: Collection[str] = TOOLBOX
                ) -> dict[str, dict[str, Any]]:
    """The flags given in ``args`` as they were given, by field: ``{"mcp_servers":
    {"--mcp": ["fs=server --stdio"]}}`` (JSON: what a run records for ``--continue``)."""
    given: dict[str, dict[str, Any]] = {}
    for field, flag in flags_of(groups):
        value = getattr(args, _dest(flag), None)
        if value is not None:
            given.setdefault(field.dotted, {})[flag.name] = (
                list(value) if isinstance(value, tuple) else value)
    return given


def restore_flags(args: argparse.Namespace, recorded: dict[str, Any],
                  groups: Collection[str] = TOOLBOX) -> tuple[list[str], list[str]]:
    """Put the ``recorded`` flags (:func:`given_flags` of an earlier run) into ``args``
    for every field no flag given now sets; (the flags restored, the recorded flags that
    a flag given now overrides). A recorded field or flag this version does not know is
    skipped."""
    now = given_flags(args, groups)
    known = {field.dotted: {f.name: f for f in field.setting.flags}
             for field, _ in flags_of(groups)}
    restored: list[str] = []
    overridden: list[str] = []
    for dotted, flags in recorded.items():
        if dotted not in known or not isinstance(flags, dict):
            continue
        if dotted in now:
            overridden.extend(name for name in flags if name in known[dotted])
            continue
        for name, value in flags.items():
            if name in known[dotted]:
                setattr(args, _dest(known[dotted][name]), value)
                restored.append(shown_flag(name, value))
    return restored, overridden


def shown_flag(name: str, value: Any) -> str:
    """``--mcp notes --mcp web``, ``--sandbox off``, ``--read-only``: a given flag as a line
    may show it (of ``NAME=VALUE`` items only the name: ``--env`` values may be secrets)."""
    if isinstance(value, list):
        return " ".join(f"{name} {str(item).partition('=')[0]}" for item in value) or name
    return f"{name} {value}" if isinstance(value, str | int | float) and not isinstance(
        value, bool) else name
