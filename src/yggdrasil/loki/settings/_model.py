"""The settings object: one value, grouped by concern, that every surface is configured by.

``Settings`` is data: ``filesystem_toolbox``, ``Loki``, the ``loki`` command, the MCP
server and ``Fleet`` all take one; their keywords and flags are ways to fill it. Its
groups and their fields are declared in ``_groups``; :func:`setting_fields` lists every
field with its declaration, for the layers, the flags, the keywords and the docs.
Validation errors name the field (``fence.sandbox``) and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any

from pydantic import Field, PrivateAttr, ValidationError, field_validator
from pydantic.fields import FieldInfo

from ..results import did_you_mean
from ..toolbox import McpServer
from ._groups import (
    AgentSettings,
    CheckpointSettings,
    CodeSettings,
    DiagnosticsSettings,
    EditingSettings,
    FenceSettings,
    Group,
    JobsSettings,
    LanguageServerSettings,
    McpSettings,
    MediaSettings,
    OutputsSettings,
    PolicySettings,
    SettingsError,
    WebSettings,
    explain,
    mcp_server,
)
from ._spec import Flag, Setting
from ._tighten import ON_IS_STRICTER, Rules

__all__ = ["AgentSettings", "CheckpointSettings", "CodeSettings", "DiagnosticsSettings",
           "EditingSettings", "FenceSettings", "Group", "Ignored", "JobsSettings",
           "LanguageServerSettings", "McpSettings", "MediaSettings", "OutputsSettings", "PolicySettings",
           "SettingField", "Settings", "SettingsError", "WebSettings", "explain", "field_names", "put",
           "setting_fields", "unknown_setting", "value_at"]


class Settings(Group):
    """Every setting of a toolbox and the agent around it, grouped by concern.

    Make one with keywords (``Settings(fence=FenceSettings(sandbox="require"))``), from files
    with :meth:`load`, or from another with :meth:`with_values`. A loaded value remembers
    where each field came from (:meth:`origin`) and what an untrusted project file asked
    for that was ignored (:attr:`warnings`).
    """

    read_only: Annotated[bool, Setting(
        tighter=ON_IS_STRICTER, keyword="read_only", flags=(Flag(
            "--read-only",
            help="only the read tools: no write_file, edit_file, run_python or run"),)),
    ] = Field(False, description="only the read tools (list_dir, read_file, find, grep, "
                                 "outline, find_symbol, repo_map, read_table, query_table, "
                                 "diagnostics)")
    fence: FenceSettings = Field(default_factory=FenceSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    jobs: JobsSettings = Field(default_factory=JobsSettings)
    editing: EditingSettings = Field(default_factory=EditingSettings)
    code: CodeSettings = Field(default_factory=CodeSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    checkpoints: CheckpointSettings = Field(default_factory=CheckpointSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    diagnostics: DiagnosticsSettings = Field(default_factory=DiagnosticsSettings)
    outputs: OutputsSettings = Field(default_factory=OutputsSettings)
    media: MediaSettings = Field(default_factory=MediaSettings)
    mcp_servers: Annotated[dict[str, McpServer], Setting(
        combine="merge", keyword="mcp_servers", flags=(Flag(
            "--mcp", metavar="NAME=SERVER", item=mcp_server,
            help="add the tools of an MCP server, named NAME__TOOL: NAME='COMMAND ARGS' "
                 "(stdio) or NAME=http://HOST/PATH (streamable HTTP); repeatable. They run "
                 "outside the fence; --rule decides their calls by tool name (--rule "
                 "deny:NAME__TOOL)"),)),
    ] = Field(default_factory=dict, description=(
        "MCP servers whose tools join the toolbox, outside the fence, named "
        "<server>__<tool>: {command, args, env, cwd} or {url, headers}, and a timeout "
        "(a keyword takes a list of McpServer or mappings)"))

    _origins: dict[str, str] = PrivateAttr(default_factory=dict)
    _warnings: tuple[str, ...] = PrivateAttr(default=())
    _ignored: tuple[Ignored, ...] = PrivateAttr(default=())
    _untrusted_rules: int = PrivateAttr(default=0)  # the ask rules at the end of policy.rules

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _named_by_key(cls, servers: Any) -> Any:
        """A table's key is its server's name (``[mcp_servers.db]`` is the server db); a
        list of servers (a keyword, repeated flags) is a table by their names."""
        if isinstance(servers, (list, tuple)):
            made = [s if isinstance(s, McpServer) else McpServer(**s) for s in servers]
            return {server.name: server for server in made}
        if not isinstance(servers, dict):
            return servers
        return {key: {"name": key, **value} if isinstance(value, dict) else value
                for key, value in servers.items()}

    def origin(self, field: str) -> str:
        """Where the dotted ``field`` (``fence.sandbox``) got its value: ``default``, a
        file (and profile), an environment variable, the command line or a keyword."""
        return self._origins.get(field, "default")

    @property
    def warnings(self) -> tuple[str, ...]:
        """What loading ignored or noticed, each as one sentence: an untrusted project's
        loosening (see :attr:`ignored`), a trusted project file changed since."""
        return self._warnings

    @property
    def ignored(self) -> tuple[Ignored, ...]:
        """What untrusted project files asked for and did not get, field by field."""
        return self._ignored

    def with_values(self, values: dict[str, Any], origin: str = "keyword",
                    name: Callable[[str], str] = str) -> Settings:
        """A copy with the dotted fields in ``values`` set (``{"fence.sandbox": "off"}``);
        SettingsError says which field is wrong (as ``name`` shows a dotted field), and
        names the closest for one that is not a setting."""
        known = setting_fields()
        for dotted in values:
            if dotted not in known:
                raise SettingsError(unknown_setting(dotted, known, name))
        data = self.model_dump(exclude_none=False)
        for dotted, spec in known.items():
            if spec.python_only:  # not dumped: taken over as they are
                put(data, dotted, value_at(self, dotted))
        for dotted, value in values.items():
            put(data, dotted, value)
        try:
            made = type(self).model_validate(data)
        except ValidationError as exc:
            raise SettingsError(explain(exc, name=name)) from None
        made._origins = {**self._origins, **dict.fromkeys(values, origin)}
        made._warnings, made._ignored = self._warnings, self._ignored
        made._untrusted_rules = 0 if "policy.rules" in values else self._untrusted_rules
        return made.settled()

    def settled(self) -> Settings:
        """These settings without the untrusted ask rules that a default of deny makes
        looser than no rule (see ``_tighten.Rules``), each dropped one a warning."""
        rules, dropped = Rules.settle(self.policy.rules, self._untrusted_rules,
                                      self.policy.rules_default)
        if not dropped:
            return self
        made = self.model_copy(update={"policy": self.policy.model_copy(
            update={"rules": rules})})
        made._origins, made._untrusted_rules = dict(self._origins), 0
        lost = Ignored("policy.rules", tuple(dropped), "a project file",
                       "an untrusted project's ask rule may not soften rules_default = 'deny' "
                       "(what no other rule matches)", "ask rules")
        made._ignored = (*self._ignored, lost)
        made._warnings = (*self._warnings, str(lost))
        return made


@dataclass(frozen=True)
class Ignored:
    """What an untrusted project file asked for and did not get: the dotted ``field``, the
    ``value`` (or the part of it) dropped, the file it came from, and why."""

    field: str
    value: Any
    source: str
    why: str = "an untrusted project may only tighten the settings"
    what: str = ""  # the part dropped, as the warning names it ("allow rules")
    lapsed: str = ""  # what changed in the file since the user trusted it

    def __str__(self) -> str:
        shown = f"{self.what} {list(self.value)!r}" if self.what else repr(self.value)
        since = f", which {self.lapsed}" if self.lapsed else ""
        return (f"ignored {self.field} = {shown} from {self.source}{since}: {self.why} "
                "(`loki trust` to trust it as it is now)")


@dataclass(frozen=True)
class SettingField:
    """One field of Settings as the layers, flags and docs see it."""

    dotted: str  # "fence.sandbox"
    info: FieldInfo
    setting: Setting

    @property
    def group(self) -> str:
        return self.dotted.rpartition(".")[0]

    @property
    def python_only(self) -> bool:
        """A function (confirm, hooks): set by a keyword, never by a file or a flag."""
        return bool(self.info.exclude)

    @property
    def default(self) -> Any:
        return self.info.get_default(call_default_factory=True)

    @property
    def help(self) -> str:
        return self.info.description or ""


@cache
def setting_fields() -> dict[str, SettingField]:
    """Every field of Settings by its dotted name, in declaration order."""
    found: dict[str, SettingField] = {}
    for name, info in Settings.model_fields.items():
        kind = info.annotation
        members = (((f"{name}.{sub}", f) for sub, f in kind.model_fields.items())
                   if isinstance(kind, type) and issubclass(kind, Group) else [(name, info)])
        for dotted, member in members:
            marks = [m for m in member.metadata if isinstance(m, Setting)]
            found[dotted] = SettingField(dotted, member, marks[0] if marks else Setting())
    return found


def unknown_setting(dotted: str, known: Collection[str],
                    name: Callable[[str], str] = str) -> str:
    """The sentence for a key that is not a setting: the closest one, and the list."""
    shown = [name(k) for k in known]
    hint = did_you_mean(name(dotted), shown)
    return (f"unknown setting {name(dotted)!r}{hint}{' ' if hint else '; '}the settings are: "
            f"{', '.join(shown)}")


def value_at(settings: Any, dotted: str) -> Any:
    """``settings.fence.sandbox`` for ``"fence.sandbox"``."""
    value = settings
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def put(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in nested dicts, making the dicts on the way."""
    *parents, leaf = dotted.split(".")
    for key in parents:
        data = data.setdefault(key, {})
    data[leaf] = value


def field_names() -> list[str]:
    """Every dotted field a file, a variable or a flag can set (``mcp_servers`` as one)."""
    return list(_settable())


@cache
def _settable() -> tuple[str, ...]:
    return tuple(d for d, spec in setting_fields().items() if not spec.python_only)
