"""The settings object: one value, grouped by concern, that every surface is configured by.

``Settings`` is data: ``filesystem_toolbox``, ``Loki``, the ``loki`` command, the MCP
server and ``Fleet`` all take one; their keywords and flags are ways to fill it. The
groups follow the concerns of the toolbox: the fence (where commands may reach), the
policy (what the agent may do: protected files, command rules, confirm, hooks), jobs,
editing, code navigation, the web, the agent's engine, and MCP servers whose tools join
the toolbox. Validation errors name the field (``fence.sandbox``) and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from ..files import DEFAULT_PROTECTED, OnSyntaxError
from ..shell import DEFAULT_HIDDEN, RuleAction, SandboxMode
from ..toolbox import McpServer

ProtocolChoice = Literal["auto", "native", "text"]  # loop.ProtocolName, which sits above


class SettingsError(ValueError):
    """A setting that cannot be used: the message names the field (and the file)."""


def explain(exc: ValidationError, where: str = "", name: Callable[[str], str] = str) -> str:
    """The first problem of a validation as one sentence: the field (as ``name`` shows
    it), what is allowed, what was given; prefixed by ``where`` (a file) when given."""
    first = exc.errors()[0]
    field = name(".".join(str(p) for p in first["loc"] if not isinstance(p, int)))
    got = first.get("input")
    if first["type"] == "literal_error":
        expected = first["ctx"]["expected"]  # "'a', 'b' or 'c'"
        text = f"{field} must be {'one of ' * (',' in expected)}{expected}, got {got!r}"
    else:
        text = f"{field}: {first['msg'][0].lower()}{first['msg'][1:]}, got {got!r}"
    return f"{where}: {text}" if where else text


class Group(BaseModel):
    """A group of settings: unknown keys are errors, values are checked when set."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              arbitrary_types_allowed=True)


class FenceSettings(Group):
    """Where commands (run, run_python, jobs) may reach."""

    sandbox: SandboxMode = Field("auto", description=(
        "fence commands with Landlock and namespaces: auto (what this machine has), "
        "require (refuse commands unless every layer is there), off (never)"))
    network: bool | tuple[str, ...] = Field(True, description=(
        "true: open; false: loopback only; a list of hosts ('pypi.org', '*.github.com'): "
        "only those, over HTTP(S) through loki's proxy"))
    allow_private_hosts: bool = Field(False, description=(
        "the web tools and the proxy may reach private, loopback and link-local addresses"))
    hosts: dict[str, str] = Field(default_factory=dict, description=(
        "host names mapped to addresses instead of DNS, for the proxy (tests, local servers)"))
    writable: tuple[str, ...] = Field((), description=(
        "folders commands may write besides the root and their scratch TMPDIR"))
    unix_sockets: tuple[str, ...] = Field((), description=(
        "UNIX sockets (or folders of them) commands may connect to beyond the root, their "
        "TMPDIR and the writable folders"))
    hidden: tuple[str, ...] = Field(DEFAULT_HIDDEN, description=(
        "paths commands cannot read (default: the well-known credential stores)"))
    git_writable: bool = Field(False, description=(
        "commands and tools may change .git/config and .git/hooks"))
    env: dict[str, str] = Field(default_factory=dict, description=(
        "variables added to the commands' (scrubbed) environment"))


class PolicySettings(Group):
    """What the agent may do, whatever the fence allows."""

    protect: tuple[str, ...] = Field(DEFAULT_PROTECTED, description=(
        "globs (gitignore syntax) of files no tool or command may read or change"))
    rules: tuple[tuple[RuleAction, str], ...] = Field((), description=(
        "command rules, first match wins: [['deny', 'git push'], ['ask', 'rm -rf']]"))
    rules_default: RuleAction = Field("allow", description="what commands no rule matches get")
    confirm: Callable[[str], Any] | None = Field(None, exclude=True, description=(
        "asked before overwriting or editing an existing file (Python only)"))
    before_call: Callable[..., Any] | None = Field(None, exclude=True, description=(
        "hook before every call; a string refuses it (Python only)"))
    after_call: Callable[..., Any] | None = Field(None, exclude=True, description=(
        "hook after every call; a string replaces the observation (Python only)"))


class JobsSettings(Group):
    """Background jobs (run/run_python with background=true)."""

    max_jobs: int = Field(8, ge=0, le=256, description="jobs running at once (0: none)")
    lifetime: float = Field(3600.0, gt=0, le=7 * 86400, description="seconds before a job is stopped")
    buffer: int = Field(32_768, ge=1024, le=64 << 20, description=(
        "bytes kept per stream of output not yet read (head and tail)"))


class EditingSettings(Group):
    """Writes, edits and patches."""

    on_syntax_error: OnSyntaxError = Field("warn", description=(
        "a change that breaks a file's syntax: written with a WARNING, or refused"))


class CodeSettings(Group):
    """Code navigation (outline, find_symbol, repo_map)."""

    cache: bool | None = Field(None, description=(
        "keep the code index on disk in the user's cache folder (None: LOKI_CODE_CACHE=1)"))


class CheckpointSettings(Group):
    """Checkpoints after every call that may change files, and rewind."""

    enabled: bool = Field(True, description=(
        "keep a checkpoint of the root's files after every call that may change them, in "
        "the state folder outside the root (what commands change too)"))
    max_file: int = Field(64 << 20, ge=0, le=1 << 40, description=(
        "bytes: a bigger file is listed in the checkpoints, its bytes not kept (a rewind "
        "says it cannot put it back)"))
    max_bytes: int = Field(2 << 30, ge=1 << 20, le=1 << 44, description=(
        "bytes the checkpoint store may take; the oldest runs are pruned beyond"))
    max_age_days: float = Field(14.0, gt=0, le=3650, description=(
        "days a run's checkpoints are kept"))
    rewind_tool: bool = Field(False, description=(
        "give the model a rewind tool (list the checkpoints, put the files back as after "
        "one of them)"))


class WebSettings(Group):
    """The web_* tools."""

    enabled: bool = Field(False, description="add the web_* tools")


class AgentSettings(Group):
    """The loop and its engine (``Loki``, ``loki do``, fleets)."""

    engine: str | None = Field(None, description=(
        "openai, anthropic, ollama, scripted, or a registered name (None: from the environment)"))
    model: str | None = Field(None, description="the model name the engine asks for")
    base_url: str | None = Field(None, description="the endpoint (an OpenAI-compatible URL...)")
    protocol: ProtocolChoice = Field("auto", description="native tool calling, text, or auto")
    max_steps: int = Field(12, ge=1, le=10_000, description="tool calls per task at most")


class McpSettings(Group):
    """``loki mcp``, the toolbox served over MCP (stdio or streamable HTTP)."""

    max_message_bytes: int = Field(16 << 20, ge=1, le=1 << 30, description=(
        "a JSON-RPC message (a stdin line, an HTTP body) longer than this is refused unread"))
    idle_timeout: float = Field(600.0, gt=0, le=7 * 86400, description=(
        "HTTP: a session with no request for this long ends, its toolbox closed"))
    max_sessions: int = Field(32, ge=1, le=4096, description=(
        "HTTP: open sessions (a toolbox each) before new ones are refused"))
    http_hosts: tuple[str, ...] = Field((), description=(
        "HTTP: host names clients reach the server by (others refused: DNS rebinding)"))
    http_origins: tuple[str, ...] = Field((), description="HTTP: browser origins allowed")


class Settings(Group):
    """Every setting of a toolbox and the agent around it, grouped by concern.

    Make one with keywords (``Settings(fence=FenceSettings(sandbox="require"))``), from files
    with :meth:`load`, or from another with :meth:`with_values`. A loaded value remembers
    where each field came from (:meth:`origin`) and what an untrusted project file asked
    for that was ignored (:attr:`warnings`).
    """

    read_only: bool = Field(False, description="only the read tools")
    fence: FenceSettings = Field(default_factory=FenceSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    jobs: JobsSettings = Field(default_factory=JobsSettings)
    editing: EditingSettings = Field(default_factory=EditingSettings)
    code: CodeSettings = Field(default_factory=CodeSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    checkpoints: CheckpointSettings = Field(default_factory=CheckpointSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    mcp_servers: dict[str, McpServer] = Field(default_factory=dict, description=(
        "MCP servers whose tools join the toolbox (outside the fence): "
        "{command, args, env, cwd} or {url, headers}, and a timeout"))

    _origins: dict[str, str] = PrivateAttr(default_factory=dict)
    _warnings: tuple[str, ...] = PrivateAttr(default=())

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _named_by_key(cls, servers: Any) -> Any:
        """A table's key is its server's name (``[mcp_servers.db]`` is the server db)."""
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
        """What loading ignored, each as one sentence (an untrusted project loosening)."""
        return self._warnings

    def with_values(self, values: dict[str, Any], origin: str = "keyword",
                    name: Callable[[str], str] = str) -> Settings:
        """A copy with the dotted fields in ``values`` set (``{"fence.sandbox": "off"}``);
        SettingsError says which field is wrong (as ``name`` shows a dotted field)."""
        data = self.model_dump(exclude_none=False)
        data["policy"].update({k: getattr(self.policy, k)
                               for k in ("confirm", "before_call", "after_call")})
        for dotted, value in values.items():
            put(data, dotted, value)
        try:
            made = type(self).model_validate(data)
        except ValidationError as exc:
            raise SettingsError(explain(exc, name=name)) from None
        made._origins = {**self._origins, **dict.fromkeys(values, origin)}
        made._warnings = self._warnings
        return made


def put(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in nested dicts, making the dicts on the way."""
    *parents, leaf = dotted.split(".")
    for key in parents:
        data = data.setdefault(key, {})
    data[leaf] = value


def field_names() -> list[str]:
    """Every dotted field a file, a variable or a flag can set (``mcp_servers`` as one)."""
    names = []
    for name, info in Settings.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, Group):
            names += [f"{name}.{sub}" for sub, f in kind.model_fields.items() if not f.exclude]
        else:
            names.append(name)
    return names
