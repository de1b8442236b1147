"""``loki config`` (the effective settings and where each came from) and ``loki trust``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..settings import field_names, trust_project
from ._common import EXIT_OK, CliError, wrap
from ._toolbox import add_settings_flags, cli_settings

__all__ = ["add_config", "add_trust", "run_config", "run_trust"]


def add_config(commands: Any) -> None:
    parser = commands.add_parser(
        "config", help="show the effective settings and where each came from",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=wrap(
            "Print every setting in force for a root, as TOML, with where each value came "
            "from: default, the user's file (~/.config/loki/config.toml), the project's "
            "loki.toml or [tool.loki] in pyproject.toml, a LOKI_* variable, or a flag. "
            "Settings an untrusted project file asked for but may not have (it may only "
            "tighten) are listed as warnings."),
        epilog="examples:\n  loki config --root .\n  loki config --profile ci --json")
    group = parser.add_argument_group("settings")
    group.add_argument("--root", default=".", metavar="DIR", help="the project folder")
    add_settings_flags(group)
    parser.add_argument("--json", action="store_true", help="print JSON with the origins")
    parser.set_defaults(run=run_config)


def run_config(args: argparse.Namespace) -> int:
    settings = cli_settings(args)
    dumped = settings.model_dump(mode="json")  # once, not once per field
    rows = [(name, _value(dumped, name), settings.origin(name)) for name in field_names()]
    if args.json:
        print(json.dumps({"settings": {n: v for n, v, _ in rows},
                          "origins": {n: o for n, _, o in rows},
                          "warnings": list(settings.warnings)}, indent=2, default=str))
        return EXIT_OK
    for name, value, origin in rows:
        print(f"{name} = {json.dumps(value, default=str)}  # {origin}")
    for warning in settings.warnings:
        print(f"# warning: {warning}")
    return EXIT_OK


def _value(dumped: dict[str, Any], dotted: str) -> Any:
    value: Any = dumped
    for part in dotted.split("."):
        value = value[part]
    return value


def add_trust(commands: Any) -> None:
    parser = commands.add_parser(
        "trust", help="trust a project's loki.toml / [tool.loki] as it is now",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=wrap(
            "A project's settings file is written by whoever wrote the repository, so by "
            "default it may only tighten your settings. `loki trust` records the project's "
            "settings tables (their path and a hash of their content) in your configuration "
            "folder: they then apply in full, until their content changes. An agent cannot "
            "write loki.toml or your configuration, and a change it makes to [tool.loki] in "
            "pyproject.toml ends the trust."),
        epilog="examples:\n  loki trust --root .\n  loki trust --root . --revoke")
    parser.add_argument("--root", default=".", metavar="DIR", help="the project folder")
    parser.add_argument("--revoke", action="store_true", help="stop trusting it")
    parser.set_defaults(run=run_trust)


def run_trust(args: argparse.Namespace) -> int:
    files = trust_project(args.root, revoke=args.revoke)
    if not files:
        raise CliError(f"{args.root} has no loki.toml and no [tool.loki] in pyproject.toml")
    verb = "no longer trusted" if args.revoke else "trusted as it is now"
    for path in files:
        print(f"{path}: {verb}")
    return EXIT_OK


