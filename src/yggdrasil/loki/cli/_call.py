"""``loki call TOOL key=value ...``: run one tool from a terminal or a script."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import ToolError
from ..results import human_size
from ..tools import ToolResult
from ._common import (
    EXIT_CODES,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_TOOL_ERROR,
    CliError,
    terminal_confirm,
)
from ._toolbox import cli_settings, open_toolbox, subcommand

__all__ = ["add_call", "run_call"]


def add_call(commands: Any) -> None:
    parser = subcommand(
        commands, "call", run_call, with_yes=True,
        summary="run one tool and print its observation",
        description=("Run one tool and print its observation on stdout. Arguments are "
                     "key=value pairs; a value is read as JSON where the tool's schema wants a "
                     "number, boolean, array or object, and kept as text where it wants a "
                     "string. --args takes a JSON object; key=value pairs override it."),
        epilog="examples:\n"
               "  loki call read_file path=README.md start=1 end=20\n"
               "  loki call grep pattern='def main' glob='*.py'\n"
               "  loki call edit_file path=app.py old='debug = False' new='debug = True' --yes\n"
               "  loki call write_file --args '{\"path\": \"notes.txt\", \"content\": \"hi\\n\"}'\n"
               "\n" + EXIT_CODES)
    parser.add_argument("tool", help="tool name (see `loki tools`)")
    parser.add_argument("pairs", nargs="*", default=[], metavar="key=value",
                        help="tool arguments")
    parser.add_argument("--args", metavar="JSON", help="tool arguments as a JSON object")


def run_call(args: argparse.Namespace) -> int:
    if sys.stderr.isatty():  # a long first code index build says how far it got
        logging.getLogger("yggdrasil.loki.code").addHandler(logging.StreamHandler())
        logging.getLogger("yggdrasil.loki.code").setLevel(logging.INFO)
    # one call, no run to rewind: it keeps no checkpoints (nor waits for their first walk)
    settings = cli_settings(args).with_values({"checkpoints.enabled": False},
                                              origin="loki call")
    box = open_toolbox(args, confirm=terminal_confirm(args.yes), settings=settings)
    tool = box.get(args.tool)
    if tool is None:
        hint = " (write tools are off with --read-only)" if args.read_only else ""
        raise CliError(f"unknown tool {args.tool!r}; available tools: {', '.join(box.tools)}{hint}")
    arguments = call_arguments(tool.input_schema, args.args, args.pairs)
    check_arguments(tool.name, tool.input_schema, arguments)
    result = box.invoke(tool.name, arguments)
    text = result.text
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    for image in result.images:  # a terminal gets what the model saw, never the bytes
        sys.stdout.write(f"[image part: {image.mime}, {image.width}x{image.height} px, "
                         f"{human_size(len(image.data))}; not printed]\n")
    return exit_code(result)


def exit_code(result: ToolResult) -> int:
    if result.refused:
        return EXIT_REFUSED
    return EXIT_TOOL_ERROR if result.is_error else EXIT_OK


def call_arguments(schema: dict[str, Any], args_json: str | None,
                   pairs: Sequence[str]) -> dict[str, Any]:
    """``--args`` JSON merged with ``key=value`` pairs (the pairs win)."""
    arguments: dict[str, Any] = {}
    if args_json is not None:
        try:
            arguments = json.loads(args_json)
        except json.JSONDecodeError as exc:
            raise CliError(f"--args is not valid JSON: {exc}") from exc
        if not isinstance(arguments, dict):
            raise CliError("--args must be a JSON object, e.g. '{\"path\": \"README.md\"}'")
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise CliError(f"argument {pair!r} is not key=value, e.g. path=README.md")
        arguments[key] = pair_value(schema["properties"].get(key, {}), text)
    return arguments


def pair_value(prop: dict[str, Any], text: str) -> Any:
    """A ``key=value`` value as the schema wants it: JSON for non-strings, else the text."""
    if prop.get("type") in ("integer", "number", "boolean", "array", "object"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text  # binding then says what type was expected
    return text


def check_arguments(name: str, schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    """Reject arguments the tool would refuse, before running it, as a usage error."""
    from ..toolbox import bind_args

    try:
        bind_args(name, schema, arguments)
    except ToolError as exc:
        raise CliError(str(exc)) from exc
