"""What every ``loki`` subcommand shares: options, the toolbox, confirm, errors, exit codes.

:func:`toolbox_options` / :func:`open_toolbox` (``--root``, ``--read-only``, ``--web``,
``--sandbox``, ``--no-network``, ``--allow-host``, ``--protect``, ``--no-protect``,
``--rule``, ``--rule-default``, ``--on-syntax-error``, ``--mcp``), :func:`subcommand` (registers
one), :func:`terminal_confirm` (the y/N prompt for destructive operations, with the diff
it asks about), :class:`CliError` and :func:`fail` (the error on stderr, a non-zero exit,
never a traceback).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable
from typing import Any, TextIO

from ..errors import LokiError
from ..files import Answer, Confirm, answer_of
from ..tools import DEFAULT_PROTECTED, McpServer, Toolbox, filesystem_toolbox

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_CODES",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "CliError",
    "Parser",
    "fail",
    "open_toolbox",
    "subcommand",
    "terminal_confirm",
    "toolbox_options",
    "visible",
    "wrap",
]

# Exit codes, shared by every subcommand (documented in `loki --help`).
EXIT_OK = 0
EXIT_TOOL_ERROR = 1  # the tool answered "ERROR: ..."
EXIT_USAGE = 2  # bad command line, missing root, unknown tool, bad arguments (argparse uses 2 too)
EXIT_REFUSED = 3  # the tool answered "REFUSED: ...": a destructive operation was declined
EXIT_INCOMPLETE = 4  # do: the step budget ran out before the engine gave an answer
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away (`loki tools | head`)

EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}    success
  {EXIT_TOOL_ERROR}    call: the tool answered 'ERROR: ...' (printed on stdout); do: the engine
       failed (after its retries); any command: an error while running it (on stderr)
  {EXIT_USAGE}    bad command line, missing root, unknown tool, bad arguments, no engine (on stderr)
  {EXIT_REFUSED}    call: the tool answered 'REFUSED: ...': a destructive operation was declined
  {EXIT_INCOMPLETE}    do: the step budget ran out before the engine answered
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
  {EXIT_BROKEN_PIPE}  the reader of stdout went away (e.g. `loki tools | head`)"""


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, like every other loki error."""

    def error(self, message: str) -> Any:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class CliError(Exception):
    """A mistake on the command line: printed as one ``loki: error: ...`` line."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def terminal_confirm(assume_yes: bool, *, stdin: TextIO | None = None,
                     stderr: TextIO | None = None) -> Confirm:
    """The ``confirm`` for a toolbox driven from a terminal.

    With ``assume_yes`` every action is allowed. Otherwise, when stdin is a terminal the
    user is shown the diff of the change (when the action carries one, as the file tools'
    ``ConfirmAction`` does) and asked ``<action>? [y]es/[N]o/[a]lways ...`` on stderr, with
    control characters shown escaped (file content must not drive the terminal); "always"
    allows the same question (this verb on this path, this rule, this tool) for the rest
    of the session (the toolbox's ``Approvals`` remember it). Without a terminal nobody
    can answer, so the action is declined (the tool then answers ``REFUSED: ...``) with a
    hint on stderr.
    """
    def confirm(action: str) -> Answer:
        if assume_yes:
            return "yes"
        inp, err = stdin or sys.stdin, stderr or sys.stderr
        if inp is None or not inp.isatty():
            err.write(f"loki: declined to {action}: no terminal to ask; pass --yes to allow\n")
            err.flush()
            return "no"
        diff = getattr(action, "diff", "")  # a files.ConfirmAction carries the change
        if diff:
            err.write(visible(diff.rstrip("\n")) + "\n")
        key = getattr(action, "key", "") or action
        scope = "this session" if key == action else visible(key)
        err.write(f"loki: {visible(action)}? [y]es/[N]o/[a]lways for {scope}: ")
        err.flush()
        return answer_of(inp.readline())
    return confirm


# C0 and C1 controls but tab and newline, DEL, and the bidi overrides that reorder text
_UNSEEN = [*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F),
           *range(0x2066, 0x206A)]
_SHOW = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in _UNSEEN}


def visible(text: str) -> str:
    """``text`` with every character that could move the cursor, recolour, retitle or
    reorder the terminal shown as an escape (``\\x1b``), so what is shown is what is asked."""
    return text.translate(_SHOW)


def wrap(text: str) -> str:
    """A help paragraph filled by hand: the raw formatter keeps the examples' layout."""
    return textwrap.fill(text, width=88)


def toolbox_options(*, with_yes: bool) -> argparse.ArgumentParser:
    """A parent parser with the options every toolbox-backed subcommand shares."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("toolbox")
    group.add_argument("--root", default=".", metavar="DIR",
                       help="the folder the tools are confined to (default: the current folder)")
    group.add_argument("--read-only", action="store_true",
                       help="only the read tools: no write_file, edit_file, run_python or run")
    group.add_argument("--web", action="store_true", help="add the web_* tools")
    group.add_argument("--sandbox", choices=("auto", "require", "off"), default="auto",
                       help="fence run/run_python with Landlock: when available (auto, the "
                            "default), always or refuse to run (require), never (off)")
    group.add_argument("--no-network", action="store_true",
                       help="no network for commands: a network namespace of their own with only "
                            "loopback (without namespaces, Landlock ABI 4+ blocks TCP only)")
    group.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                       help="commands may reach only the hosts given (repeatable; 'pypi.org', "
                            "'*.github.com', 'host:8080') over HTTP(S), through loki's proxy")
    group.add_argument("--protect", action="append", default=[], metavar="GLOB",
                       help="also protect files matching GLOB (gitignore syntax, repeatable): "
                            "no tool or command reads them; .env, keys, credentials are "
                            "protected by default")
    group.add_argument("--no-protect", action="store_true",
                       help="drop the default protected files (.env, *.pem, ...); --protect "
                            "globs still apply")
    group.add_argument("--rule", action="append", default=[], metavar="ACTION:COMMAND",
                       help="allow, ask about or deny commands by their leading words, e.g. "
                            "--rule deny:'git push' --rule ask:'rm -rf' (repeatable, first "
                            "match wins)")
    group.add_argument("--rule-default", choices=("allow", "ask", "deny"), default="allow",
                       help="what commands no --rule matches get (default: allow)")
    group.add_argument("--on-syntax-error", choices=("warn", "reject"), default="warn",
                       help="a write, edit or patch that breaks a file's syntax (.py, .json, "
                            ".toml, .yaml, and the code-navigation languages by their grammar): "
                            "write it with a WARNING (warn, the default) or refuse it (reject)")
    group.add_argument("--mcp", action="append", default=[], metavar="NAME=SERVER",
                       help="add the tools of an MCP server, named NAME__TOOL: "
                            "NAME='COMMAND ARGS' (stdio) or NAME=http://HOST/PATH (streamable "
                            "HTTP); repeatable. They run outside the fence; --rule decides "
                            "their calls by tool name (--rule deny:NAME__TOOL)")
    if with_yes:
        group.add_argument("-y", "--yes", action="store_true",
                           help="allow overwriting/editing existing files without asking "
                                "(needed when there is no terminal to ask)")
    return parent


def protect_globs(args: argparse.Namespace) -> tuple[str, ...]:
    """The protected globs ``--protect``/``--no-protect`` ask for: the default plus
    --protect, or with --no-protect only --protect."""
    return tuple(args.protect) if args.no_protect else (*DEFAULT_PROTECTED, *args.protect)


def open_toolbox(args: argparse.Namespace, confirm: Confirm | None = None) -> Toolbox:
    """The toolbox the parsed ``--root/--read-only/--web`` describe; CliError when it cannot be."""
    if args.no_network and args.allow_host:
        raise CliError("--no-network and --allow-host contradict each other; give one")
    protect = protect_globs(args)
    network: bool | list[str] = list(args.allow_host) if args.allow_host else not args.no_network
    try:
        servers = [McpServer.parse(text) for text in getattr(args, "mcp", [])]
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    try:
        return filesystem_toolbox(args.root, read_only=args.read_only, allow_web=args.web,
                                  confirm=confirm, sandbox=args.sandbox, network=network,
                                  on_syntax_error=args.on_syntax_error,
                                  protect=protect, rules=[_rule(r) for r in args.rule],
                                  rules_default=args.rule_default, mcp_servers=servers)
    except ImportError as exc:
        raise CliError(f"--mcp needs the mcp package: pip install 'yggdrasil-loki[mcp]' "
                       f"({exc})") from exc
    except (LokiError, ValueError) as exc:
        raise CliError(str(exc)) from exc


def _rule(text: str) -> tuple[str, str]:
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


def fail(message: str, code: int) -> int:
    """The error every subcommand ends with: ``loki: error: ...`` on stderr, whole.

    A message of several lines (how to configure an engine, a list of choices) is printed
    in full; only its first line carries the prefix.
    """
    text = message.strip() or "failed"
    sys.stderr.write(f"loki: error: {text}\n")
    return code
