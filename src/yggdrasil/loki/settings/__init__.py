"""Settings: the one object every surface is configured by, and the files it is read from.

Owns :class:`Settings` (grouped by concern: ``fence``, ``policy``, ``jobs``, ``editing``,
``code``, ``web``, ``checkpoints``, ``agent``, ``mcp``, ``mcp_servers``), :func:`load_settings` (defaults < the
user's ``~/.config/loki/config.toml`` < the project's ``loki.toml`` or ``[tool.loki]``
< ``LOKI_*`` variables < flags and keywords, with named profiles; an untrusted project
may only tighten) and :func:`trust_project`. Imports ``files`` and ``shell`` for their
defaults; ``tools``, ``agent``, the CLI, MCP and fleets import it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._keywords import KEYWORD_FIELDS, ToolboxKeywords, with_keywords
from ._layers import (
    PROJECT_FILE,
    Layer,
    combine,
    config_dir,
    env_layer,
    file_layers,
    project_tables,
    read_toml,
    table_hash,
    trusted,
    user_file,
)
from ._layers import trust as trust_project
from ._model import (
    AgentSettings,
    CheckpointSettings,
    CodeSettings,
    EditingSettings,
    FenceSettings,
    JobsSettings,
    McpServer,
    McpSettings,
    PolicySettings,
    Settings,
    SettingsError,
    WebSettings,
    field_names,
)

__all__ = [
    "KEYWORD_FIELDS",
    "PROJECT_FILE",
    "AgentSettings",
    "CheckpointSettings",
    "CodeSettings",
    "EditingSettings",
    "FenceSettings",
    "JobsSettings",
    "McpServer",
    "McpSettings",
    "PolicySettings",
    "Settings",
    "SettingsError",
    "ToolboxKeywords",
    "WebSettings",
    "config_dir",
    "field_names",
    "load_settings",
    "trust_project",
    "with_keywords",
]


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
        is_trusted = known.get(str(path)) == table_hash(table)
        layers += file_layers(path, table, "project", profile, is_trusted)
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


Settings.load = staticmethod(load_settings)  # type: ignore[attr-defined]
