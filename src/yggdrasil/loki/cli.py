"""The ``loki`` command: the toolbox from a terminal (``tools``, ``call``) and as an MCP server.

Thin by design: parse, call the library, print. Each subcommand is one ``add_*`` function
that registers its parser and one ``run_*`` function that does the work; they share
:func:`toolbox_options` / :func:`open_toolbox` (``--root``, ``--read-only``, ``--web``),
:func:`terminal_confirm` (the y/N prompt for destructive operations) and :class:`CliError`
(one line on stderr, non-zero exit). A new subcommand adds its ``add_*`` to ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ._files import Confirm
from .errors import LokiError
from .tools import Toolbox, filesystem_toolbox

__all__ = ["CliError", "main", "open_toolbox", "terminal_confirm", "toolbox_options"]

# Exit codes, shared by every subcommand (documented in `loki --help`).
EXIT_OK = 0
EXIT_TOOL_ERROR = 1  # the tool answered "ERROR: ..."
EXIT_USAGE = 2  # bad command line, missing root, unknown tool, bad arguments (argparse uses 2 too)
EXIT_REFUSED = 3  # the tool answered "REFUSED: ...": a destructive operation was declined
EXIT_INTERRUPTED = 130

EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}    success
  {EXIT_TOOL_ERROR}    the tool answered 'ERROR: ...' (printed on stdout)
  {EXIT_USAGE}    bad command line, missing root, unknown tool or bad arguments (one line on stderr)
  {EXIT_REFUSED}    the tool answered 'REFUSED: ...': a destructive operation was declined
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)"""


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
    user is asked ``<action>? [y/N]`` on stderr; without a terminal nobody can answer, so
    the action is declined (the tool then answers ``REFUSED: ...``) with a hint on stderr.
    """
    def confirm(action: str) -> bool:
        if assume_yes:
            return True
        inp, err = stdin or sys.stdin, stderr or sys.stderr
        if inp is None or not inp.isatty():
            err.write(f"loki: declined to {action}: no terminal to ask; pass --yes to allow\n")
            err.flush()
            return False
        err.write(f"loki: {action}? [y/N] ")
        err.flush()
        return inp.readline().strip().lower() in ("y", "yes")
    return confirm


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
                       help="block TCP connect/bind for run/run_python (Landlock ABI 4+)")
    if with_yes:
        group.add_argument("-y", "--yes", action="store_true",
                           help="allow overwriting/editing existing files without asking "
                                "(needed when there is no terminal to ask)")
    return parent


def open_toolbox(args: argparse.Namespace, confirm: Confirm | None = None) -> Toolbox:
    """The toolbox the parsed ``--root/--read-only/--web`` describe; CliError when it cannot be."""
    try:
        return filesystem_toolbox(args.root, read_only=args.read_only, allow_web=args.web,
                                  confirm=confirm, sandbox=args.sandbox,
                                  network=not args.no_network)
    except LokiError as exc:
        raise CliError(str(exc)) from exc


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


# -- loki tools ------------------------------------------------------------------------

def add_tools(commands: Any) -> None:
    parser = subcommand(
        commands, "tools", run_tools, with_yes=False,
        summary="list the tools, marking the ones that change files",
        description=("List the tools of the toolbox: signature, description, arguments. "
                     "'[changes files]' marks the tools that mutate."),
        epilog="examples:\n  loki tools\n  loki tools --root ~/src/app --read-only\n"
               "  loki tools --json | jq '.tools[] | select(.mutates) | .name'")
    parser.add_argument("--json", action="store_true",
                        help="print the catalog as JSON (Toolbox.to_dict() plus 'root')")


def run_tools(args: argparse.Namespace) -> int:
    box = open_toolbox(args)
    if args.json:
        print(json.dumps({"root": os.path.realpath(args.root), **box.to_dict()}, indent=2))
        return EXIT_OK
    mutating = sum(tool.mutates for tool in box)
    print(f"# {len(box)} tools in {os.path.realpath(args.root)}; "
          f"{mutating} marked [changes files]\n")
    print(box.spec())
    return EXIT_OK


# -- loki mcp --------------------------------------------------------------------------

def add_mcp(commands: Any) -> None:
    subcommand(
        commands, "mcp", run_mcp, with_yes=False,
        summary="serve the tools over MCP (stdio)",
        description=("Serve the toolbox as a Model Context Protocol server over stdin/stdout. "
                     "Logs go to stderr only. There is no terminal to ask before an existing "
                     "file is changed: mutating tools are marked destructiveHint so the MCP "
                     "client asks its user; use --read-only for a server that changes nothing."),
        epilog="examples:\n  loki mcp --root ~/src/app\n  loki mcp --root . --read-only\n\n"
               "client configuration (Claude Desktop / Claude Code / Cursor):\n"
               '  {"mcpServers": {"loki": {"command": "loki", '
               '"args": ["mcp", "--root", "/path/to/project"]}}}')


def run_mcp(args: argparse.Namespace) -> int:
    box = open_toolbox(args)  # before importing the SDK: a bad root fails fast
    try:
        from .mcp import serve
    except ImportError as exc:
        raise CliError(f"loki mcp needs the MCP SDK: pip install 'yggdrasil-loki[mcp]' ({exc})") from exc
    serve(box, root=os.path.realpath(args.root))
    return EXIT_OK


# -- the command -----------------------------------------------------------------------

def add_call(commands: Any) -> None:
    from .cli_call import add_call as add  # its own module: argument parsing for one tool

    add(commands)


def add_do(commands: Any) -> None:
    from .cli_do import add_do as add  # its own module: the loop's progress display lives there

    add(commands)


COMMANDS: list[Callable[[Any], None]] = [add_tools, add_call, add_do, add_mcp]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="loki", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The hands of a coding agent: tools confined to one folder (the root).",
        epilog="examples:\n  loki tools --root .\n  loki call read_file path=README.md end=5\n"
               "  loki do 'add a --verbose flag to cli.py' --root ~/src/app\n"
               "  loki mcp --root /path/to/project\n\n"
               "`loki COMMAND --help` shows each command's options.\n\n" + EXIT_CODES)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(commands)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse, letting ``key=value`` pairs follow options (``call TOOL --root R path=x``).

    argparse stops filling a ``nargs="*"`` positional at the first option; the pairs it
    leaves over are collected here instead of being rejected.
    """
    args, extra = parser.parse_known_args(argv)
    strays = [item for item in extra if item.startswith("-") or not hasattr(args, "pairs")]
    if strays:
        parser.error(f"unrecognized arguments: {' '.join(strays)}")
    if extra:
        args.pairs = [*args.pairs, *extra]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``loki``; return the exit code (the console script passes it to SystemExit)."""
    args = parse(build_parser(), argv)
    try:
        return int(args.run(args))
    except CliError as exc:
        return fail(str(exc), exc.code)
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # the reader went away (`loki tools | head`): stop quietly, without a second error at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what the shell reports for a writer killed by the pipe
    except (LokiError, OSError) as exc:
        return fail(str(exc), EXIT_TOOL_ERROR)
    except Exception as exc:  # a bug of ours: still one line, the traceback on request
        if os.environ.get("LOKI_DEBUG"):
            raise
        return fail(f"internal error: {type(exc).__name__}: {exc} (LOKI_DEBUG=1 shows the "
                    "traceback)", EXIT_TOOL_ERROR)


def fail(message: str, code: int) -> int:
    """The one-line error every subcommand ends with."""
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    sys.stderr.write(f"loki: error: {first}\n")
    return code
