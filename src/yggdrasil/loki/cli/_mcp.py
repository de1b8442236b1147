"""``loki mcp``: the toolbox as an MCP server over stdio (the server itself is ``mcp/``)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ._common import EXIT_OK, CliError, open_toolbox, subcommand

__all__ = ["add_mcp", "run_mcp"]


def add_mcp(commands: Any) -> None:
    parser = subcommand(
        commands, "mcp", run_mcp, with_yes=False,
        summary="serve the tools over MCP (stdio)",
        description=("Serve the toolbox as a Model Context Protocol server over stdin/stdout. "
                     "Logs go to stderr only. There is no terminal to ask before an existing "
                     "file is changed: mutating tools are marked destructiveHint so the MCP "
                     "client asks its user; use --read-only for a server that changes nothing. "
                     "A cancelled request stops its tool (a command with its whole process "
                     "tree); SIGTERM, SIGINT or the client closing stdin stop the running "
                     "command, remove the undo and scratch folders, and exit. Works with the "
                     "mcp SDK 1.x (>=1.24) and 2.x."),
        epilog="examples:\n  loki mcp --root ~/src/app\n  loki mcp --root . --read-only\n\n"
               "client configuration (Claude Desktop / Claude Code / Cursor):\n"
               '  {"mcpServers": {"loki": {"command": "loki", '
               '"args": ["mcp", "--root", "/path/to/project"]}}}')
    group = parser.add_argument_group("mcp")
    group.add_argument("--max-message-bytes", type=_positive, default=None,
                       metavar="N", help="a JSON-RPC message (a line on stdin, an HTTP body) "
                       "longer than N bytes is answered with an error and dropped unread "
                       "(default: 16777216 = 16 MiB)")


def run_mcp(args: argparse.Namespace) -> int:
    box = open_toolbox(args)  # before importing the SDK: a bad root fails fast
    try:
        from ..mcp import load_sdk, serve

        load_sdk()
    except ImportError as exc:
        raise CliError(f"loki mcp needs the MCP SDK: pip install 'yggdrasil-loki[mcp]' ({exc})") from exc
    limit = {"max_message_bytes": args.max_message_bytes} if args.max_message_bytes else {}
    serve(box, root=os.path.realpath(args.root), **limit)
    return EXIT_OK


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value
