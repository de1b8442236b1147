"""Loading the settings for a root, and what trusting its project files would change."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ._layers import (
    PROJECT_FILE,
    Layer,
    combine,
    env_layer,
    file_layers,
    project_tables,
    read_toml,
    user_file,
)
from ._model import Settings, SettingsError, field_names, value_at
from ._trust import changed_since, table_hash, trusted

ProjectTrust = Literal["recorded", "trusted", "untrusted", "left out"]


def load_settings(root: str | os.PathLike[str] = ".", *, profile: str | None = None,
                  overrides: Mapping[str, Any] | None = None,
                  env: Mapping[str, str] | None = None,
                  origin: str = "command line") -> Settings:
    """The effective settings for a toolbox rooted at ``root``.

    Layers, each over the one before: the defaults; the user's file (``$LOKI_CONFIG`` or
    ``config.toml`` in ``$XDG_CONFIG_HOME/loki``, ``~/.config/loki``); the project's
    ``[tool.loki]`` in ``pyproject.toml`` and ``loki.toml`` in ``root`` (trusted or only
    tightening); ``LOKI_<GROUP>__<FIELD>`` variables; then ``overrides`` (dotted fields,
    e.g. from flags). ``profile`` (or ``LOKI_PROFILE``) applies each file's
    ``[profiles.<name>]`` table after its base table. SettingsError names the file and
    the field that is wrong.
    """
    return _load(root, profile=profile, overrides=overrides, env=env, origin=origin)


def _load(root: str | os.PathLike[str], *, profile: str | None = None,
          overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
          origin: str = "command line", projects: ProjectTrust = "recorded") -> Settings:
    env = os.environ if env is None else env
    profile = profile or env.get("LOKI_PROFILE") or None
    layers: list[Layer] = []
    found_profile = False
    own = user_file(env)
    if own.is_file():
        table = read_toml(own)
        found_profile |= _has_profile(table, profile)
        layers += file_layers(own, table, "user", profile, True)
    known = trusted(env)
    for path, table in project_tables(Path(root).resolve()):
        found_profile |= _has_profile(table, profile)
        record = known.get(str(path))
        is_trusted = record is not None and record.hash == table_hash(table)
        lapsed = changed_since(record, table) if record is not None and not is_trusted else ""
        if projects != "left out":
            layers += file_layers(path, table, "project", profile,
                                  is_trusted if projects == "recorded" else projects == "trusted",
                                  lapsed)
    if profile and not found_profile:
        raise SettingsError(f"no profile {profile!r} in the settings files (a [profiles.{profile}] "
                            f"table in {own} or the project's {PROJECT_FILE})")
    layers.append(env_layer(env))
    if overrides:
        layers.append(Layer(origin, dict(overrides)))
    return combine(layers)


def _has_profile(table: Mapping[str, Any], profile: str | None) -> bool:
    profiles = table.get("profiles")
    return bool(profile) and isinstance(profiles, dict) and profile in profiles


@dataclass(frozen=True)
class Change:
    """What trusting a project's settings does to one field: its value with only the
    user's settings (``before``) and with the project's (``after``), and whether that
    loosens it (what the project may not do untrusted)."""

    field: str
    before: Any
    after: Any
    loosens: bool
    profile: str | None = None


def trust_changes(root: str | os.PathLike[str], env: Mapping[str, str] | None = None
                  ) -> list[Change]:
    """Each field the project's settings tables of ``root`` change against the user's
    (the defaults, the user's file, the environment), with the base tables and under each
    profile the project's tables name."""
    env = os.environ if env is None else env
    tables = list(project_tables(Path(root).resolve()))
    profiles: list[str | None] = [None]
    for _, table in tables:
        named = table.get("profiles")
        if isinstance(named, dict):
            profiles += [p for p in named if p not in profiles]
    changes: list[Change] = []
    for profile in profiles:
        bare = {**env, "LOKI_PROFILE": ""}  # the profile is the one asked, not the shell's
        base = _mine(root, profile, bare)
        theirs = _load(root, profile=profile, env=bare, projects="trusted")
        guarded = _load(root, profile=profile, env=bare, projects="untrusted")
        loosened = {i.field for i in guarded.ignored}
        for name in field_names():
            before, after = _shown(base, name), _shown(theirs, name)
            if before != after:
                changes.append(Change(name, before, after, name in loosened, profile))
    return _without_repeats(changes)


def _mine(root: str | os.PathLike[str], profile: str | None,
          env: Mapping[str, str]) -> Settings:
    """The user's settings (under ``profile`` when the user's file names it)."""
    own = user_file(env)
    named = profile is not None and own.is_file() and _has_profile(read_toml(own), profile)
    return _load(root, profile=profile if named else None, env=env, projects="left out")


def _shown(settings: Settings, name: str) -> Any:
    value = value_at(settings, name)
    if isinstance(value, dict):
        return {k: v.describe() if hasattr(v, "describe") else v for k, v in value.items()}
    return value


def _without_repeats(changes: list[Change]) -> list[Change]:
    """A profile's change that the base tables already make is said once."""
    base = {(c.field, repr(c.after)) for c in changes if c.profile is None}
    return [c for c in changes if c.profile is None or (c.field, repr(c.after)) not in base]
