"""``loki tools``: the catalog, as the model reads it or as JSON."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ._common import EXIT_OK, fit, terminal_width
from ._toolbox import open_toolbox, subcommand

__all__ = ["add_tools", "run_tools"]


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
    width = terminal_width()  # a pipe gets the lines whole
    print(fit(f"# {len(box)} tools in {os.path.realpath(args.root)}; "
              f"{mutating} marked [changes files]", width, "#   ") + "\n")
    print(fit(box.spec(), width))
    return EXIT_OK
