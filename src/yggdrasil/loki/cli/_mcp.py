"""``loki mcp``: the toolbox as an MCP server over stdio, or over streamable HTTP with
``--http`` (a toolbox per session); the server itself is ``mcp/``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ..settings import Settings
from ._common import EXIT_OK, CliError
from ._flags import MCP, TOOLBOX, add_settings_flags
from ._toolbox import announce, cli_settings, open_toolbox, subcommand

__all__ = ["add_mcp", "run_mcp"]

TOKEN_ENV = "LOKI_MCP_TOKEN"


def add_mcp(commands: Any) -> None:
    parser = subcommand(
        commands, "mcp", run_mcp, with_yes=False,
        summary="serve the tools over MCP (stdio, or streamable HTTP with --http)",
        description=("Serve the toolbox as a Model Context Protocol server over stdin/stdout, "
                     "or over streamable HTTP with --http (each client session gets a toolbox "
                     "of its own, closed when the session ends). Logs go to stderr only. "
                     "There is no terminal to ask before an existing "
                     "file is changed: mutating tools are marked destructiveHint so the MCP "
                     "client asks its user; use --read-only for a server that changes nothing. "
                     "A cancelled request stops its tool (a command with its whole process "
                     "tree); SIGTERM, SIGINT or the client closing stdin stop the running "
                     "command, remove the undo and scratch folders, and exit. Works with the "
                     "mcp SDK 1.x (>=1.24; >=1.30 for --http) and 2.x."),
        epilog="examples:\n  loki mcp --root ~/src/app\n  loki mcp --root . --read-only\n"
               "  loki mcp --root . --http 127.0.0.1:8765          # prints a token once\n"
               "  LOKI_MCP_TOKEN=$(cat tok) loki mcp --root . --http 0.0.0.0:8765 "
               "--http-host box.internal\n\n"
               "client configuration (Claude Desktop / Claude Code / Cursor):\n"
               '  {"mcpServers": {"loki": {"command": "loki", '
               '"args": ["mcp", "--root", "/path/to/project"]}}}\n'
               "  claude mcp add --transport http loki http://127.0.0.1:8765/mcp "
               '--header "Authorization: Bearer $TOKEN"')
    add_settings_flags(parser.add_argument_group("mcp"), MCP)
    http = parser.add_argument_group("streamable HTTP")
    http.add_argument("--http", metavar="HOST:PORT",
                      help="serve over streamable HTTP at http://HOST:PORT/mcp instead of stdio "
                           "(PORT 0 picks a free one; the URL is logged)")
    http.add_argument("--token-file", metavar="FILE",
                      help=f"the bearer token clients must send (default: ${TOKEN_ENV}, else a "
                           "new one printed once on stderr)")
    http.add_argument("--no-token", action="store_true",
                      help="accept requests without a token: only behind a proxy that "
                           "authenticates")


def run_mcp(args: argparse.Namespace) -> int:
    settings = cli_settings(args, groups=TOOLBOX | MCP)  # read once: every session gets them
    box = open_toolbox(args, settings=settings)  # before importing the SDK: fails fast
    announce(box, confirm="by the MCP client (mutating tools are marked destructive)",
             root=args.root)
    try:
        from ..mcp import load_sdk, serve

        load_sdk()
    except ImportError as exc:
        raise CliError(f"loki mcp needs the MCP SDK: pip install 'yggdrasil-loki[mcp]' ({exc})") from exc
    limit = settings.mcp.max_message_bytes
    root = os.path.realpath(args.root)
    if args.http:
        box.close()  # it showed the options make a toolbox; each session makes its own
        _serve_http(args, root, limit, settings)
    else:
        serve(box, root=root, max_message_bytes=limit)
    return EXIT_OK


def _serve_http(args: argparse.Namespace, root: str, limit: int, settings: Settings) -> None:
    from ..mcp import serve_http

    host, port = _address(args.http)
    token = _token(args)
    try:
        serve_http(lambda: open_toolbox(args, settings=settings), host, port, token=token,
                   names=list(settings.mcp.http_hosts), origins=list(settings.mcp.http_origins),
                   root=root, idle_timeout=settings.mcp.idle_timeout,
                   max_sessions=settings.mcp.max_sessions, max_message_bytes=limit)
    except ImportError as exc:
        raise CliError(f"loki mcp --http: {exc}: pip install -U 'mcp>=1.30'") from exc
    except OSError as exc:
        raise CliError(f"--http {args.http}: {exc.strerror or exc}") from exc


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise CliError(f"--http {text!r}: write HOST:PORT, e.g. --http 127.0.0.1:8765 "
                       "(or [::1]:8765)")
    return host.strip("[]"), int(port)


def _token(args: argparse.Namespace) -> str | None:
    """The bearer token: --token-file, else $LOKI_MCP_TOKEN, else a new one shown once."""
    from ..mcp import new_token

    if args.no_token:
        if args.token_file:
            raise CliError("--no-token and --token-file contradict each other; give one")
        sys.stderr.write("loki mcp: WARNING: --no-token: anyone who reaches the port can "
                         "read, write and run commands in the root\n")
        return None
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as exc:
            raise CliError(f"--token-file {args.token_file}: {exc.strerror}") from exc
        source = f"--token-file {args.token_file}"
    elif os.environ.get(TOKEN_ENV):
        token, source = os.environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        token = new_token()
        sys.stderr.write(f"loki mcp: bearer token (shown once; clients send "
                         f"'Authorization: Bearer <token>'): {token}\n")
        sys.stderr.flush()
        return token
    if len(token) < 16:
        raise CliError(f"the token from {source} is {len(token)} characters; use at least 16 "
                       "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return token
