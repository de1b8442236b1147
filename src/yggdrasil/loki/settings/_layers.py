"""Settings from layers: defaults < user file < project file < environment < command line.

Each layer is a flat mapping of dotted fields (``fence.sandbox``) to values, read from a
TOML table (``[fence] sandbox = "require"``; ``[profiles.ci.fence]`` for a profile), from
``LOKI_<GROUP>__<FIELD>`` variables, or given by flags and keywords. How a layer's value
combines with the one below (replace, append, prepend, merge) is the field's declaration
(``Setting.combine``).

A project's file (``loki.toml`` in the root, or ``[tool.loki]`` in its ``pyproject.toml``)
is written by whoever wrote the repository, so unless the user trusts it (``loki trust``,
``_trust``) it may only tighten: each field's direction (``Setting.tighter``, ``_tighten``)
judges what it asks for, and what would loosen is dropped with a warning.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..files import SETTINGS_FILE
from ..results import did_you_mean
from ._model import (
    Group,
    Ignored,
    Settings,
    SettingsError,
    explain,
    field_names,
    put,
    setting_fields,
    unknown_setting,
    value_at,
)
from ._tighten import Direction

PROJECT_FILE = SETTINGS_FILE  # the one file no tool or command of the agent may change


@dataclass(frozen=True)
class Layer:
    """One source of settings: its dotted values, where they came from, and whether it may
    loosen what the layers below set."""

    label: str
    values: dict[str, Any]
    trusted: bool = True
    lapsed: str = ""  # an untrusted file the user trusted once: what changed since


def config_dir(env: Mapping[str, str]) -> Path:
    """The user's configuration folder: ``$XDG_CONFIG_HOME/loki`` or ``~/.config/loki``."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "loki"


def user_file(env: Mapping[str, str]) -> Path:
    """The user's file: ``$LOKI_CONFIG``, or ``config.toml`` in :func:`config_dir`."""
    return Path(env["LOKI_CONFIG"]) if env.get("LOKI_CONFIG") else config_dir(env) / "config.toml"


def project_tables(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The project's settings tables: ``loki.toml`` and ``[tool.loki]`` of
    ``pyproject.toml`` in ``root`` (both, when both exist; loki.toml is read last)."""
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        table = read_toml(pyproject).get("tool", {}).get("loki")
        if isinstance(table, dict):
            yield pyproject, table
    own = root / PROJECT_FILE
    if own.is_file():
        yield own, read_toml(own)


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's table; SettingsError names the file and what is wrong."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it: {exc.strerror}") from None


def file_layers(path: Path, table: dict[str, Any], kind: str, profile: str | None,
                is_trusted: bool, lapsed: str = "") -> list[Layer]:
    """A file's base table, then its ``[profiles.<profile>]`` table, as layers."""
    table = dict(table)
    profiles = table.pop("profiles", {})
    if not isinstance(profiles, dict):
        raise SettingsError(f"{path}: 'profiles' must be a table of tables ([profiles.ci])")
    layers = [Layer(f"{kind}: {path}", flatten(table, path), is_trusted, lapsed)]
    if profile and isinstance(profiles.get(profile), dict):
        layers.append(Layer(f"{kind}: {path} (profile {profile})",
                            flatten(profiles[profile], path), is_trusted, lapsed))
    return layers


def flatten(table: Mapping[str, Any], where: Path | str) -> dict[str, Any]:
    """``{"fence": {"sandbox": "off"}}`` -> ``{"fence.sandbox": "off"}``; an unknown key
    is a SettingsError that names the closest and lists the known ones."""
    known = field_names()
    flat: dict[str, Any] = {}
    for key, value in table.items():
        group = Settings.model_fields.get(key)
        kind = group.annotation if group else None
        if isinstance(kind, type) and issubclass(kind, Group) and isinstance(value, dict):
            for sub, inner in value.items():
                flat[f"{key}.{sub}"] = inner
        else:
            flat[key] = value
    for name in flat:
        if name not in known:
            raise SettingsError(f"{where}: {unknown_setting(name, known)}")
    return flat


@cache
def env_names() -> dict[str, str]:
    """Each variable that sets a field: ``LOKI_<GROUP>__<FIELD>`` (``LOKI_READ_ONLY``),
    and the older names a field's declaration keeps (``LOKI_ENGINE``)."""
    names = {}
    for dotted in field_names():
        names["LOKI_" + dotted.upper().replace(".", "__")] = dotted
        names.update(dict.fromkeys(setting_fields()[dotted].setting.env, dotted))
    return names


def env_layer(env: Mapping[str, str]) -> Layer:
    """The ``LOKI_*`` variables that set fields (:func:`env_names`); a ``LOKI_A__B`` that
    names no field is a SettingsError with the closest name (other ``LOKI_*`` variables,
    such as ``LOKI_PROFILE``, are not settings)."""
    names = env_names()
    values = {}
    for var, text in env.items():
        if not var.startswith("LOKI_"):
            continue
        dotted = names.get(var)
        if dotted is None and "__" in var:
            hint = did_you_mean(var, names)
            raise SettingsError(f"environment: {var} is not a setting{hint}{' ' if hint else '; '}"
                                f"the variables are: {', '.join(names)}")
        if dotted and text != "":
            values[dotted] = _env_value(text)
    return Layer("environment", values)


def _env_value(text: str) -> Any:
    """JSON when it reads as JSON (lists, tables, numbers, true/false), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def combine(layers: list[Layer], base: Settings | None = None) -> Settings:
    """The settings the layers make, each applied over the ones below it.

    An untrusted layer's value is judged by the field's direction (``_tighten``): the
    part it may not take at all is dropped (``admit``), then a value that would loosen
    what the layers below set is ignored; each with a warning (:attr:`Settings.ignored`).
    """
    fields = setting_fields()
    current = base or Settings()
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    ignored: list[Ignored] = []
    untrusted_rules = 0
    for layer in layers:
        source = layer.label.split(": ", 1)[-1]
        if layer.trusted:  # taken whole: one validation for the layer
            candidate = values
            for dotted, asked in layer.values.items():
                candidate = _merged(candidate, dotted, asked, fields[dotted].setting.combine,
                                    source, None)
                if dotted == "policy.rules":  # its rules go first: the untrusted asks stay last
                    untrusted_rules = _tail(untrusted_rules, asked, True,
                                            fields[dotted].setting.combine)
            if layer.values:
                values, current = candidate, _validate(candidate, source)
                origins.update(dict.fromkeys(layer.values, layer.label))
            continue
        for dotted, asked in layer.values.items():
            spec = fields[dotted].setting
            value, dropped = spec.tighter.admit(asked)
            if dropped:
                ignored.append(Ignored(dotted, tuple(dropped), source, spec.tighter.dropped_why,
                                       spec.tighter.dropped_as, layer.lapsed))
            candidate = _merged(values, dotted, value, spec.combine, source, spec.tighter)
            made = _validate(candidate, source)
            if not spec.tighter.tightens(value_at(current, dotted), value_at(made, dotted)):
                ignored.append(Ignored(dotted, value, source, lapsed=layer.lapsed))
                continue
            if dotted == "policy.rules":  # the ask rules an untrusted layer puts last
                untrusted_rules = _tail(untrusted_rules, value, False, spec.combine)
            values, current = candidate, made
            origins[dotted] = layer.label
    current._origins = origins
    current._ignored = tuple(ignored)
    current._warnings = tuple(map(str, ignored))
    current._untrusted_rules = untrusted_rules
    return current.settled()


def _tail(count: int, rules: Any, trusted: bool, combine: str) -> int:
    """How many untrusted ask rules end the rules after a layer: a trusted layer that
    replaces the list ends them; one that puts its rules first keeps them last."""
    if trusted:
        return count if combine == "prepend" else 0
    return count + sum(1 for r in rules if isinstance(r, (list, tuple)) and r and r[0] != "deny")


def _merged(values: dict[str, Any], dotted: str, value: Any, combine: str, source: str,
            untrusted: Direction | None) -> dict[str, Any]:
    """The dotted values with ``value`` combined into ``dotted`` as the field says (an
    untrusted layer's list placed where its direction says)."""
    merged = dict(values)
    old = values.get(dotted)
    if combine in ("append", "prepend"):
        new, below = _as_list(value, dotted, source), list(old or ())
        placed = untrusted.place(below, new) if untrusted is not None else None
        if placed is None:
            placed = [*below, *new] if combine == "append" else [*new, *below]
        merged[dotted] = placed
    elif combine == "merge" and isinstance(old, dict) and isinstance(value, dict):
        merged[dotted] = {**old, **value}
    else:
        merged[dotted] = value
    return merged


def _as_list(value: Any, dotted: str, source: str) -> list[Any]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise SettingsError(f"{source}: {dotted} must be a list, got {value!r}")
    return list(value)


def _validate(values: dict[str, Any], source: str) -> Settings:
    fields = setting_fields()
    data: dict[str, Any] = {}
    for dotted, value in values.items():
        if fields[dotted].setting.combine == "append":  # the layers add to the defaults
            value = [*fields[dotted].default, *value]
        put(data, dotted, value)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(explain(exc, source)) from None
