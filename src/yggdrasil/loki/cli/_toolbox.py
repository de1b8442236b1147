"""The toolbox of a subcommand: the flags that fill :class:`~yggdrasil.loki.settings.Settings`,
the toolbox they open, and the fence said out loud.

Every toolbox-backed subcommand (tools, call, do, mcp) and ``loki fleet`` take the same
flags; a flag that is given overrides the files and ``LOKI_*`` variables
(``load_settings``), one that is not leaves them. :func:`announce` prints, when a run
starts, the one line saying which fence is actually in force, and a loud warning when
commands run unfenced or confirmation is off.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any, TextIO

from ..errors import LokiError
from ..files import Confirm
from ..settings import Settings, SettingsError, load_settings
from ..tools import McpServer, Toolbox, filesystem_toolbox
from ._common import CliError, wrap

__all__ = [
    "add_settings_flags",
    "announce",
    "announce_settings",
    "cli_settings",
    "fleet_fence",
    "open_toolbox",
    "pairs",
    "rule",
    "subcommand",
    "toolbox_options",
]


def add_settings_flags(group: Any, *, fleet: bool = False) -> None:
    """The settings flags, into an argparse group (``fleet``: without --read-only/--web)."""
    add = group.add_argument
    add("--profile", metavar="NAME",
        help="apply the [profiles.NAME] tables of the settings files (or LOKI_PROFILE)")
    if not fleet:
        add("--read-only", action="store_const", const=True, default=None,
            help="only the read tools: no write_file, edit_file, run_python or run")
        add("--web", action="store_const", const=True, default=None, help="add the web_* tools")
    add("--sandbox", choices=("auto", "require", "off"), default=None,
        help="fence commands with Landlock and namespaces: when available (auto, the default), "
             "always or refuse to run (require), never (off)")
    add("--no-network", action="store_true",
        help="no network for commands: a network namespace of their own with only loopback "
             "(without namespaces, Landlock ABI 4+ blocks TCP only)")
    add("--allow-host", action="append", default=[], metavar="HOST",
        help="commands may reach only the hosts given (repeatable; 'pypi.org', '*.github.com', "
             "'host:8080') over HTTP(S), through loki's proxy")
    add("--allow-private-hosts", action="store_const", const=True, default=None,
        help="the web tools and the proxy may reach private and loopback addresses")
    add("--host", action="append", default=[], metavar="NAME=ADDRESS",
        help="resolve NAME to ADDRESS for the proxy instead of DNS (repeatable)")
    add("--writable", action="append", default=[], metavar="DIR",
        help="commands may also write DIR (repeatable; it must exist), e.g. ~/.cache/pip")
    add("--unix-socket", action="append", default=[], metavar="PATH",
        help="commands may also connect to this UNIX socket, or the sockets in this folder "
             "(repeatable); other sockets outside the root and their TMPDIR are unreachable")
    add("--hidden", action="append", default=[], metavar="PATH",
        help="commands may not read PATH either (repeatable; ~/.ssh, ~/.aws... always)")
    add("--git-writable", action="store_const", const=True, default=None,
        help="commands and tools may change .git/config and .git/hooks")
    add("--env", action="append", default=[], metavar="NAME=VALUE",
        help="add a variable to the commands' environment (repeatable)")
    add("--protect", action="append", default=[], metavar="GLOB",
        help="also protect files matching GLOB (gitignore syntax, repeatable): no tool or "
             "command reads them; .env, keys, credentials are protected by default")
    add("--no-protect", action="store_true",
        help="drop the default protected files (.env, *.pem, ...); --protect globs still apply")
    add("--rule", action="append", default=[], metavar="ACTION:COMMAND",
        help="allow, ask about or deny commands by their leading words, e.g. --rule "
             "deny:'git push' --rule ask:'rm -rf' (repeatable, first match wins)")
    add("--rule-default", choices=("allow", "ask", "deny"), default=None,
        help="what commands no --rule matches get (default: allow)")
    add("--max-jobs", type=int, default=None, metavar="N",
        help="background jobs running at once (default 8; 0: none)")
    add("--job-lifetime", type=float, default=None, metavar="SECONDS",
        help="a background job is stopped after this long (default 3600)")
    add("--on-syntax-error", choices=("warn", "reject"), default=None,
        help="a write, edit or patch that breaks a file's syntax: write it with a WARNING "
             "(warn, the default) or refuse it (reject)")
    add("--code-cache", action=argparse.BooleanOptionalAction, default=None,
        help="keep the code index on disk in the user's cache folder")
    add("--mcp", action="append", default=[], metavar="NAME=SERVER",
        help="add the tools of an MCP server, named NAME__TOOL: NAME='COMMAND ARGS' (stdio) or "
             "NAME=http://HOST/PATH (streamable HTTP); repeatable. They run outside the fence; "
             "--rule decides their calls by tool name (--rule deny:NAME__TOOL)")


def pairs(items: list[str], flag: str) -> dict[str, str]:
    """``["A=1", "B=2"]`` -> ``{"A": "1", "B": "2"}``; CliError for an item without ``=``."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise CliError(f"{flag} {item!r}: write NAME=VALUE")
        out[name] = value
    return out


def mcp_servers(items: list[str]) -> dict[str, McpServer]:
    """``--mcp NAME=SERVER`` flags as servers by name; CliError for a malformed one."""
    try:
        servers = [McpServer.parse(text) for text in items]
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    return {server.name: server for server in servers}


def cli_settings(args: argparse.Namespace, root: str | None = None,
                 extra: dict[str, Any] | None = None) -> Settings:
    """The settings the files, the environment and the given flags make for ``root``
    (``extra``: a subcommand's own flags, by field; None where not given)."""
    if args.no_network and args.allow_host:
        raise CliError("--no-network and --allow-host contradict each other; give one")
    given: dict[str, Any] = {
        "read_only": getattr(args, "read_only", None), "web.enabled": getattr(args, "web", None),
        "fence.sandbox": args.sandbox,
        "fence.network": (list(args.allow_host) if args.allow_host
                          else False if args.no_network else None),
        "fence.allow_private_hosts": args.allow_private_hosts,
        "fence.hosts": pairs(args.host, "--host") or None,
        "fence.writable": [os.path.expanduser(p) for p in args.writable] or None,
        "fence.unix_sockets": [os.path.expanduser(p) for p in args.unix_socket] or None,
        "fence.hidden": list(args.hidden) or None, "fence.git_writable": args.git_writable,
        "fence.env": pairs(args.env, "--env") or None,
        "policy.protect": list(args.protect) or None,
        "policy.rules": [rule(r) for r in args.rule] or None,
        "policy.rules_default": args.rule_default, "jobs.max_jobs": args.max_jobs,
        "jobs.lifetime": args.job_lifetime, "editing.on_syntax_error": args.on_syntax_error,
        "code.cache": args.code_cache, "mcp_servers": mcp_servers(args.mcp) or None,
        **(extra or {}),
    }
    where = root if root is not None else getattr(args, "root", ".")
    try:
        settings = load_settings(where, profile=args.profile,
                                 overrides={k: v for k, v in given.items() if v is not None})
        if args.no_protect:  # drops the defaults and whatever the files added
            settings = settings.with_values({"policy.protect": tuple(args.protect)},
                                            origin="command line")
    except SettingsError as exc:
        raise CliError(str(exc)) from exc
    return settings


def announce(box: Toolbox, *, confirm: str, root: str, out: TextIO | None = None) -> None:
    """One stderr line with the fence in force for ``box``, then a loud line for each
    thing that is off: commands unfenced, confirmation off, project settings ignored."""
    announce_settings(box.settings, box.fence, confirm=confirm, root=root, out=out)


def fleet_fence(settings: Settings) -> str:
    """How commands of a toolbox with these settings would run (a fleet has no toolbox
    of its own: one is made in a temp folder, asked, and closed)."""
    with tempfile.TemporaryDirectory(prefix="loki-fence-") as where, filesystem_toolbox(
            where, settings=settings.with_values({"mcp_servers": {}})) as box:
        return box.fence


def announce_settings(settings: Settings, fence: str, *, confirm: str, root: str | None,
                      out: TextIO | None = None) -> None:
    """The start line of :func:`announce` from settings and how commands run (``fence``)."""
    err = out or sys.stderr
    net, policy = settings.fence.network, settings.policy
    network = ("open" if net is True else "none (loopback only)" if net is False
               else "only " + ", ".join(net))
    rules = (f"{len(policy.rules)} rule{'s' if len(policy.rules) != 1 else ''}, "
             f"otherwise {policy.rules_default}")
    commands = "none (read-only)" if settings.read_only else fence or "n/a"
    err.write(f"loki: fence: commands {commands}; network {network}; "
              f"{len(policy.protect)} protected globs; {rules}; confirm {confirm}\n")
    if not settings.read_only and fence.startswith("UNFENCED"):
        err.write("loki: WARNING: commands run UNFENCED: they can read and write anything "
                  "this user can\n")
    temp = os.path.realpath(tempfile.gettempdir())
    real = os.path.realpath(root) if root is not None else ""
    if real and not settings.read_only and (real == temp or real.startswith(temp + os.sep)):
        err.write(f"loki: WARNING: the root is inside the system temp folder ({temp}): "
                  "existing files there are overwritten and edited without confirmation\n")
    for warning in settings.warnings:
        err.write(f"loki: warning: {warning}\n")
    err.flush()


def toolbox_options(*, with_yes: bool) -> argparse.ArgumentParser:
    """A parent parser with the options every toolbox-backed subcommand shares: the root,
    the settings flags (``_settings``), and ``--yes`` where a terminal may be asked."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("toolbox")
    group.add_argument("--root", default=".", metavar="DIR",
                       help="the folder the tools are confined to (default: the current folder)")
    add_settings_flags(group)
    if with_yes:
        group.add_argument("-y", "--yes", action="store_true",
                           help="allow overwriting/editing existing files without asking "
                                "(needed when there is no terminal to ask)")
    return parent


def open_toolbox(args: argparse.Namespace, confirm: Confirm | None = None,
                 settings: Settings | None = None) -> Toolbox:
    """The toolbox ``settings`` describe (default: those the settings files, the
    environment and the flags make); CliError when it cannot be made."""
    settings = settings if settings is not None else cli_settings(args)
    try:
        return filesystem_toolbox(args.root, settings=settings, confirm=confirm)
    except ImportError as exc:
        raise CliError(f"--mcp needs the mcp package: pip install 'yggdrasil-loki[mcp]' "
                       f"({exc})") from exc
    except (LokiError, ValueError) as exc:
        raise CliError(str(exc)) from exc


def rule(text: str) -> tuple[str, str]:
    """``deny:git push`` -> ("deny", "git push")."""
    action, sep, words = text.partition(":")
    if not sep or action not in ("allow", "ask", "deny"):
        raise CliError(f"--rule {text!r}: write ACTION:COMMAND with ACTION allow, ask or deny, "
                       "e.g. --rule deny:'git push'")
    return action, words


def subcommand(commands: Any, name: str, run: Callable[[argparse.Namespace], int], *,
               with_yes: bool, summary: str, description: str,
               epilog: str) -> argparse.ArgumentParser:
    """Register a toolbox-backed subcommand: the shared options, a filled description, the
    examples laid out as written, and ``run`` as what it does."""
    parser = commands.add_parser(
        name, parents=[toolbox_options(with_yes=with_yes)], help=summary,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=wrap(description), epilog=epilog)
    parser.set_defaults(run=run)
    return parser
