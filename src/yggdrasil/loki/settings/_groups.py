"""The groups of settings, each field declared once: its type, default and help
(pydantic's ``Field``) and what fills and judges it (``_spec.Setting``, in ``Annotated``).

The groups follow the concerns of the toolbox: the fence (where commands may reach), the
policy (what the agent may do: protected files, command rules, confirm, hooks), jobs,
editing, code navigation, the web, the agent's engine, and ``loki mcp`` itself. A new
setting is a field here, the code that enforces it, and tests: the layers, the flags, the
keywords, the variables and the docs' table read the declaration.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from ..files import DEFAULT_PROTECTED, OnSyntaxError, protect_globs
from ..shell import DEFAULT_HIDDEN, RuleAction, SandboxMode
from ..toolbox import McpServer
from ._spec import Flag, Setting
from ._tighten import (
    FEWER,
    FREE,
    MORE,
    OFF_IS_STRICTER,
    ON_IS_STRICTER,
    Hosts,
    MoreGlobs,
    Ranked,
    Rules,
)

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


def _paths(value: Any) -> Any:
    """Folders and files as text: a ``Path`` is taken as its path."""
    if isinstance(value, (list, tuple)):
        return tuple(os.fspath(v) if isinstance(v, os.PathLike) else v for v in value)
    return value


def _table(value: Any) -> Any:
    """A table: None is empty, a list of ``(name, value)`` pairs (repeated flags) is one."""
    if value is None:
        return {}
    if isinstance(value, (list, tuple)):
        return dict(value)
    return value


def _network(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError("network is true, false or a list of hosts, not a string")
    return tuple(value) if isinstance(value, list) else value


Paths = Annotated[tuple[str, ...], BeforeValidator(_paths)]
Table = Annotated[dict[str, str], BeforeValidator(_table)]


def pair(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (a repeated flag's item) -> ("NAME", "VALUE")."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ValueError("write NAME=VALUE")
    return name, value


def rule(text: str) -> tuple[str, str]:
    """``deny:git push`` (a ``--rule`` flag) -> ("deny", "git push")."""
    action, sep, words = text.partition(":")
    if not sep or action not in ("allow", "ask", "deny"):
        raise ValueError("write ACTION:COMMAND with ACTION allow, ask or deny, e.g. --rule "
                         "deny:'git push'")
    return action, words


def mcp_server(text: str) -> tuple[str, McpServer]:
    """``NAME=COMMAND ARGS`` or ``NAME=URL`` (an ``--mcp`` flag) -> (NAME, the server)."""
    server = McpServer.parse(text)
    return server.name, server


class FenceSettings(Group):
    """Where commands (run, run_python, jobs) may reach."""

    sandbox: Annotated[SandboxMode, Setting(
        tighter=Ranked(("off", "auto", "require")), keyword="sandbox",
        flags=(Flag("--sandbox"),))] = Field("auto", description=(
            "fence commands with Landlock and namespaces: auto (what this machine has), "
            "require (refuse commands unless every layer is there), off (never)"))
    network: Annotated[bool | tuple[str, ...], BeforeValidator(_network), Setting(
        tighter=Hosts(), keyword="network", flags=(
            Flag("--no-network", const=False, help=(
                "no network for commands: a network namespace of their own with only "
                "loopback (without namespaces, Landlock ABI 4+ blocks TCP only)")),
            Flag("--allow-host", metavar="HOST", help=(
                "commands may reach only the hosts given (repeatable; 'pypi.org', "
                "'*.github.com', 'host:8080') over HTTP(S), through loki's proxy")))),
    ] = Field(True, description=(
        "true: open; false: loopback only; a list of hosts ('pypi.org', '*.github.com'): "
        "only those, over HTTP(S) through loki's proxy"))
    allow_private_hosts: Annotated[bool, Setting(
        tighter=OFF_IS_STRICTER, keyword="allow_private_hosts",
        flags=(Flag("--allow-private-hosts"),))] = Field(False, description=(
            "the web tools and the proxy may reach private, loopback and link-local "
            "addresses (cloud metadata addresses stay refused)"))
    hosts: Annotated[Table, Setting(
        combine="merge", keyword="hosts", flags=(Flag(
            "--host", metavar="NAME=ADDRESS", item=pair,
            help="resolve NAME to ADDRESS for the proxy instead of DNS (repeatable)"),)),
    ] = Field(default_factory=dict, description=(
        "host names mapped to addresses instead of DNS, for the proxy (tests, local servers)"))
    writable: Annotated[Paths, Setting(
        combine="append", keyword="writable", flags=(Flag(
            "--writable", metavar="DIR", item=os.path.expanduser,
            help="commands may also write DIR (repeatable; it must exist), e.g. ~/.cache/pip"),)),
    ] = Field((), description=(
        "folders commands may write besides the root and their scratch TMPDIR (each must "
        "exist)"))
    unix_sockets: Annotated[Paths, Setting(
        combine="append", keyword="unix_sockets", flags=(Flag(
            "--unix-socket", metavar="PATH", item=os.path.expanduser,
            help="commands may also connect to this UNIX socket, or the sockets in this "
                 "folder (repeatable); other sockets outside the root and their TMPDIR are "
                 "unreachable"),)),
    ] = Field((), description=(
        "UNIX sockets (or folders of them) commands may connect to beyond the root, their "
        "TMPDIR, their private /tmp and the writable folders"))
    hidden: Annotated[Paths, BeforeValidator(lambda v: DEFAULT_HIDDEN if v is None else v),
                      Setting(combine="append", tighter=MORE, keyword="hidden", flags=(Flag(
                          "--hidden", metavar="PATH",
                          help="commands may not read PATH either (repeatable; ~/.ssh, "
                               "~/.aws... always)"),)),
                      ] = Field(DEFAULT_HIDDEN, description=(
                          "paths commands cannot read (default: the well-known credential "
                          "stores such as ~/.ssh and ~/.aws; None: those; () hides nothing)"))
    git_writable: Annotated[bool, Setting(
        tighter=OFF_IS_STRICTER, keyword="git_writable", flags=(Flag("--git-writable"),)),
    ] = Field(False, description="commands and tools may change .git/config and .git/hooks")
    env: Annotated[Table, Setting(
        combine="merge", keyword="env", flags=(Flag(
            "--env", metavar="NAME=VALUE", item=pair,
            help="add a variable to the commands' environment (repeatable)"),)),
    ] = Field(default_factory=dict, description=(
        "variables added to the commands' environment (which has no secret-looking "
        "variables of the agent's)"))


class PolicySettings(Group):
    """What the agent may do, whatever the fence allows."""

    protect: Annotated[tuple[str, ...], BeforeValidator(
        lambda v: protect_globs(v) if v is None or isinstance(v, str) else v), Setting(
        combine="append", tighter=MoreGlobs(), keyword="protect", flags=(
            Flag("--protect", metavar="GLOB", help=(
                "also protect files matching GLOB (gitignore syntax, repeatable): no tool or "
                "command reads them; .env, keys, credentials are protected by default")),
            Flag("--no-protect", const=(), resets=True, help=(
                "drop the default protected files (.env, *.pem, ...); --protect globs "
                "still apply")))),
    ] = Field(DEFAULT_PROTECTED, description=(
        "globs (gitignore syntax, root-relative) of files no tool reads, lists, searches, "
        "edits, moves or deletes and commands see as unreadable (default: DEFAULT_PROTECTED; "
        "() turns protection off)"))
    rules: Annotated[tuple[tuple[RuleAction, str], ...], Setting(
        combine="prepend", tighter=Rules(), keyword="rules", flags=(Flag(
            "--rule", metavar="ACTION:COMMAND", item=rule,
            help="allow, ask about or deny commands by their leading words, e.g. --rule "
                 "deny:'git push' --rule ask:'rm -rf' (repeatable, first match wins)"),)),
    ] = Field((), description=(
        "command rules, first match wins: [['deny', 'git push'], ['ask', 'rm -rf']]; "
        "MCP tools are matched by name"))
    rules_default: Annotated[RuleAction, Setting(
        tighter=Ranked(("allow", "ask", "deny")), keyword="rules_default", flags=(Flag(
            "--rule-default", help="what commands no --rule matches get (default: allow)"),)),
    ] = Field("allow", description="what commands no rule matches get")
    confirm: Annotated[Callable[[str], Any] | None, Setting(keyword="confirm")] = Field(
        None, exclude=True, description=(
            "asked before overwriting or editing an existing file outside the temp folder, "
            "and for what an ask rule matches; True/False or 'yes', 'no', 'always' (Python "
            "only)"))
    before_call: Annotated[Callable[..., Any] | None, Setting(keyword="before_call")] = Field(
        None, exclude=True, description=(
            "hook before every call, before_call(tool, args); a string refuses it (Python "
            "only)"))
    after_call: Annotated[Callable[..., Any] | None, Setting(keyword="after_call")] = Field(
        None, exclude=True, description=(
            "hook after every call, after_call(tool, args, observation); a string replaces "
            "the observation (Python only)"))


class JobsSettings(Group):
    """Background jobs (run/run_python with background=true)."""

    max_jobs: Annotated[int, Setting(tighter=FEWER, keyword="max_jobs", flags=(
        Flag("--max-jobs", metavar="N"),))] = Field(
            8, ge=0, le=256, description="jobs running at once (0: none)")
    lifetime: Annotated[float, Setting(tighter=FEWER, keyword="job_lifetime", flags=(
        Flag("--job-lifetime", metavar="SECONDS"),))] = Field(
            3600.0, gt=0, le=7 * 86400, description="seconds before a job is stopped")
    buffer: Annotated[int, Setting(tighter=FEWER, keyword="job_buffer")] = Field(
        32_768, ge=1024, le=64 << 20, description=(
            "bytes kept per stream of output not yet read (head and tail)"))


class EditingSettings(Group):
    """Writes, edits and patches."""

    on_syntax_error: Annotated[OnSyntaxError, Setting(
        tighter=Ranked(("warn", "reject")), keyword="on_syntax_error",
        flags=(Flag("--on-syntax-error"),))] = Field("warn", description=(
            "a change that breaks a file's syntax: written with a WARNING (warn), or refused, "
            "the file untouched (reject)"))


class LanguageServerSettings(Group):
    """One language server of the diagnostics: how to start it and what it checks."""

    command: tuple[str, ...] = Field((), description=(
        "the program (an absolute path, or a name on PATH; never one inside the root) and "
        "its arguments; empty: no server of this name"))
    languages: dict[str, str] = Field(default_factory=dict, description=(
        "file suffix -> LSP language id, e.g. {'.py': 'python'}"))
    init: dict[str, Any] = Field(default_factory=dict, description=(
        "initializationOptions sent when it starts"))
    settings: dict[str, Any] = Field(default_factory=dict, description=(
        "answers to its workspace/configuration requests, by section ('python.analysis')"))


class DiagnosticsSettings(Group):
    """What the checkers say after each edit, and the diagnostics(paths) tool. A server is
    a program the toolbox runs: no project file may name one or turn the defaults on."""

    enabled: Annotated[bool, Setting(tighter=OFF_IS_STRICTER, flags=(
        Flag("--diagnostics", negatable=True, help=(
            "check each file an edit changes and show the diagnostics it introduced "
            "(--no-diagnostics: never)")),))] = Field(True, description=(
                "check each file an edit changes and show the diagnostics the edit introduced"))
    ruff: Annotated[bool, Setting(tighter=OFF_IS_STRICTER)] = Field(True, description=(
        "check Python with ruff (undefined names, unused or wrong imports, syntax)"))
    default_servers: Annotated[bool, Setting(tighter=OFF_IS_STRICTER)] = Field(
        True, description=(
            "start the default language servers found on PATH (outside the root): "
            "basedpyright or pyright, typescript-language-server, gopls, rust-analyzer, clangd"))
    servers: Annotated[dict[str, LanguageServerSettings], Setting(combine="merge")] = Field(
        default_factory=dict, description=(
            "language servers by name ('python', 'typescript', 'go'...), each replacing the "
            "default of that name ({command = []} turns it off): {command, languages, init, "
            "settings}"))
    per_file: Annotated[int, Setting(tighter=FREE)] = Field(
        10, ge=0, le=1000, description="new diagnostics shown per file")
    per_call: Annotated[int, Setting(tighter=FREE)] = Field(
        30, ge=0, le=10_000, description="new diagnostics shown per call")
    wait: Annotated[float, Setting(tighter=FREE)] = Field(1.5, ge=0, le=600, description=(
        "seconds an edit waits for the language servers; what they find later comes with "
        "the next observation"))
    hang: Annotated[float, Setting(tighter=FEWER)] = Field(30.0, gt=0, le=600, description=(
        "seconds a language server may take to answer before it is stopped as hung"))
    warm: Annotated[int, Setting(tighter=FEWER)] = Field(
        3, ge=1, le=16, description="language servers kept running at once")


class OutputsSettings(Group):
    """How long outputs are cut (in model tokens), and where their whole text is kept."""

    observation_tokens: Annotated[int, Setting(tighter=FREE)] = Field(
        50_000, ge=1_000, le=1_000_000, description=(
            "model tokens of one tool's answer, on every surface; past it the middle is cut "
            "(the lines that look like errors kept) and the whole kept for read_file"))
    step_tokens: Annotated[int, Setting(tighter=FREE)] = Field(
        8_000, ge=500, le=1_000_000, description=(
            "model tokens one step of Loki.act adds to the conversation"))
    stream_tokens: Annotated[int, Setting(tighter=FREE)] = Field(
        3_000, ge=200, le=1_000_000, description=(
            "model tokens of the head, and of the tail, of a command's cut output"))
    keep_whole: Annotated[bool, Setting(tighter=OFF_IS_STRICTER)] = Field(True, description=(
        "keep the whole of a cut output in the session's spill folder (outside the root, "
        "hidden from commands), named by an id read_file and grep accept"))
    spill_bytes: Annotated[int, Setting(tighter=FEWER)] = Field(
        256 << 20, ge=1 << 20, le=16 << 30, description="bytes of one cut output kept at most")
    spill_total: Annotated[int, Setting(tighter=FEWER)] = Field(
        1 << 30, ge=1 << 20, le=64 << 30, description=(
            "bytes all sessions' spill folders hold together; the oldest outputs go first"))
    spill_age: Annotated[float, Setting(tighter=FEWER)] = Field(
        3 * 86400.0, gt=0, le=365 * 86400, description=(
            "seconds a session's kept outputs stay after it last kept one"))


class CodeSettings(Group):
    """Code navigation (outline, find_symbol, repo_map)."""

    cache: Annotated[bool | None, Setting(
        tighter=OFF_IS_STRICTER, keyword="code_cache", env=("LOKI_CODE_CACHE",),
        flags=(Flag("--code-cache", negatable=True),))] = Field(None, description=(
            "keep the code index on disk in the user's cache folder, never inside the root "
            "(None: LOKI_CODE_CACHE=1)"))


class WebSettings(Group):
    """The web_* tools."""

    enabled: Annotated[bool, Setting(tighter=OFF_IS_STRICTER, keyword="allow_web",
                                     flags=(Flag("--web"),))] = Field(
        False, description="add the web_* tools")


class MediaSettings(Group):
    """What read_file shows of images, PDFs and notebooks (media/)."""

    image_width: Annotated[int, Setting(tighter=FREE, keyword="image_width")] = Field(
        2048, ge=64, le=8192, description=(
            "widest image, in pixels, a model is shown; larger ones are downscaled to fit"))
    image_height: Annotated[int, Setting(tighter=FREE, keyword="image_height")] = Field(
        768, ge=64, le=8192, description=(
            "tallest image, in pixels, a model is shown; larger ones are downscaled to fit"))
    pdf_pages: Annotated[int, Setting(tighter=FREE, keyword="pdf_pages")] = Field(
        20, ge=1, le=100, description="most PDF pages one read_file call shows")


class CheckpointSettings(Group):
    """Checkpoints after every call that may change files, and rewind."""

    enabled: Annotated[bool, Setting(
        tighter=ON_IS_STRICTER, keyword="checkpoints",
        flags=(Flag("--checkpoints", negatable=True),))] = Field(True, description=(
            "keep a checkpoint of the root's files after every call that may change them, "
            "what commands and jobs changed too (in the state folder, outside the root; "
            "a project may not turn them off)"))
    max_file: Annotated[int, Setting()] = Field(64 << 20, ge=0, le=1 << 40, description=(
        "bytes: a bigger file is listed in the checkpoints, its bytes not kept (a rewind "
        "says it cannot put it back)"))
    max_bytes: Annotated[int, Setting()] = Field(2 << 30, ge=1 << 20, le=1 << 44, description=(
        "bytes the checkpoint store may take; the oldest runs are pruned beyond"))
    max_age_days: Annotated[float, Setting()] = Field(14.0, gt=0, le=3650, description=(
        "days a run's checkpoints are kept"))
    rewind_tool: Annotated[bool, Setting(
        tighter=OFF_IS_STRICTER, keyword="rewind_tool",
        flags=(Flag("--rewind-tool"),))] = Field(False, description=(
            "give the model a rewind tool (list the checkpoints; put the files back as "
            "after one of them)"))


class AgentSettings(Group):
    """The loop and its engine (``Loki``, ``loki do``, fleets)."""

    engine: Annotated[str | None, Setting(env=("LOKI_ENGINE",), flags=(
        Flag("--engine", metavar="NAME"),))] = Field(None, description=(
            "openai, anthropic, ollama, scripted, or a registered name (default: from the "
            "environment)"))
    model: Annotated[str | None, Setting(env=("LOKI_MODEL",), flags=(
        Flag("--model", metavar="M", help=(
            "the model name (for scripted: the JSONL file of decisions to replay)")),))] = Field(
        None, description="the model name the engine asks for")
    base_url: Annotated[str | None, Setting(env=("LOKI_BASE_URL",), flags=(
        Flag("--base-url", metavar="URL"),))] = Field(None, description=(
            "the API base URL (OpenAI-compatible servers)"))
    protocol: Annotated[ProtocolChoice, Setting(tighter=FREE)] = Field(
        "auto", description="native tool calling, text, or auto")
    max_steps: Annotated[int, Setting(tighter=FEWER, flags=(
        Flag("--max-steps", metavar="N"),))] = Field(
            12, ge=1, le=10_000, description="tool calls per task at most")


class McpSettings(Group):
    """``loki mcp``, the toolbox served over MCP (stdio or streamable HTTP)."""

    max_message_bytes: Annotated[int, Setting(tighter=FEWER, flags=(
        Flag("--max-message-bytes", metavar="N"),))] = Field(16 << 20, ge=1, le=1 << 30, description=(
            "a JSON-RPC message (a stdin line, an HTTP body) longer than this is answered "
            "with an error and dropped unread"))
    idle_timeout: Annotated[float, Setting(tighter=FEWER, flags=(
        Flag("--idle-timeout", metavar="SECONDS"),))] = Field(600.0, gt=0, le=7 * 86400, description=(
            "HTTP: a session with no request for this long ends, its toolbox (jobs "
            "included) closed"))
    max_sessions: Annotated[int, Setting(tighter=FEWER, flags=(
        Flag("--max-sessions", metavar="N"),))] = Field(32, ge=1, le=4096, description=(
            "HTTP: open sessions (a toolbox each) before new ones are refused"))
    http_hosts: Annotated[tuple[str, ...], Setting(flags=(
        Flag("--http-host", metavar="NAME"),))] = Field((), description=(
            "HTTP: host names clients reach the server by, the Host header (others refused "
            "against DNS rebinding; default: the address bound, and loopback names)"))
    http_origins: Annotated[tuple[str, ...], Setting(flags=(
        Flag("--http-origin", metavar="ORIGIN"),))] = Field((), description=(
            "HTTP: browser origins allowed to call (default: pages of the accepted hosts only)"))


