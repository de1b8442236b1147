"""Settings: the one object every surface is configured by, and the files it is read from.

Owns :class:`Settings` (grouped by concern: ``fence``, ``policy``, ``jobs``, ``editing``,
``code``, ``web``, ``agent``, ``mcp``, ``mcp_servers``), each field declared once with what
fills and judges it (``_spec.Setting``: how layers combine it, which way is tighter, its
keyword, flags and environment names); :func:`load_settings` (defaults < the user's
``~/.config/loki/config.toml`` < the project's ``loki.toml`` or ``[tool.loki]`` <
``LOKI_*`` variables < flags and keywords, with named profiles; an untrusted project may
only tighten, judged by effect), :func:`trust_project` and :func:`trust_changes`, and the
settings table of the docs (:func:`settings_table`). Imports ``files``, ``search`` and
``shell`` for their defaults and matchers; ``tools``, ``agent``, the CLI, MCP and fleets
import it.
"""

from __future__ import annotations

from ._docs import settings_table
from ._keywords import KEYWORD_FIELDS, ToolboxKeywords, keyword_fields, with_keywords
from ._layers import PROJECT_FILE, config_dir, env_names, project_tables, user_file
from ._load import Change, load_settings, trust_changes
from ._model import (
    AgentSettings,
    CheckpointSettings,
    CodeSettings,
    DiagnosticsSettings,
    EditingSettings,
    FenceSettings,
    Ignored,
    JobsSettings,
    LanguageServerSettings,
    McpServer,
    McpSettings,
    MediaSettings,
    OutputsSettings,
    PolicySettings,
    SettingField,
    Settings,
    SettingsError,
    WebSettings,
    field_names,
    setting_fields,
)
from ._spec import UNSET, Flag, Setting
from ._trust import TRUST_FILE, table_changes, table_hash
from ._trust import trust as trust_project

__all__ = [
    "KEYWORD_FIELDS",
    "PROJECT_FILE",
    "TRUST_FILE",
    "UNSET",
    "AgentSettings",
    "Change",
    "CheckpointSettings",
    "CodeSettings",
    "DiagnosticsSettings",
    "EditingSettings",
    "FenceSettings",
    "Flag",
    "Ignored",
    "JobsSettings",
    "LanguageServerSettings",
    "McpServer",
    "McpSettings",
    "MediaSettings",
    "OutputsSettings",
    "PolicySettings",
    "Setting",
    "SettingField",
    "Settings",
    "SettingsError",
    "ToolboxKeywords",
    "WebSettings",
    "config_dir",
    "env_names",
    "field_names",
    "keyword_fields",
    "load_settings",
    "project_tables",
    "setting_fields",
    "settings_table",
    "table_changes",
    "table_hash",
    "trust_changes",
    "trust_project",
    "user_file",
    "with_keywords",
]

Settings.load = staticmethod(load_settings)  # type: ignore[attr-defined]
