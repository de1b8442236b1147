"""The ``loki`` command: its parser, one module per subcommand, and ``main``.

Thin by design: parse, call the library, print. Each subcommand module has one ``add_*``
function that registers its parser and one ``run_*`` function that does the work; a new
subcommand adds its ``add_*`` to ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import LokiError
from ._call import add_call
from ._common import (
    EXIT_BROKEN_PIPE,
    EXIT_CODES,
    EXIT_INTERRUPTED,
    EXIT_TOOL_ERROR,
    CliError,
    Parser,
    fail,
)
from ._config import add_config, add_trust
from ._do import add_do
from ._fleet import add_fleet
from ._mcp import add_mcp
from ._report import add_report
from ._rewind import add_rewind
from ._tools import add_tools

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS: list[Callable[[Any], None]] = [add_tools, add_call, add_do, add_mcp, add_fleet,
                                         add_config, add_trust, add_report, add_rewind]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="loki", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The hands of a coding agent: tools confined to one folder (the root).",
        epilog="examples:\n  loki tools --root .\n  loki call read_file path=README.md end=5\n"
               "  loki do 'add a --verbose flag to cli.py' --root ~/src/app\n"
               "  loki mcp --root /path/to/project\n"
               "  loki fleet tasks.jsonl --out runs/r1 --workers 8\n"
               "  loki report runs/r1\n"
               "  loki rewind RUN 0 --dry-run\n"
               "  loki config --root .\n\n"
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
        return EXIT_BROKEN_PIPE  # what the shell reports for a writer killed by the pipe
    except (LokiError, OSError) as exc:
        return fail(str(exc), EXIT_TOOL_ERROR)
    except Exception as exc:  # a bug of ours: still one line, the traceback on request
        if os.environ.get("LOKI_DEBUG"):
            raise
        return fail(f"internal error: {type(exc).__name__}: {exc} (LOKI_DEBUG=1 shows the "
                    "traceback)", EXIT_TOOL_ERROR)
