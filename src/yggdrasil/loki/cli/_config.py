"""``loki config`` (the effective settings and where each came from) and ``loki trust``."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..engines import shown_url
from ..files import answer_of
from ..settings import (
    Change,
    SettingsError,
    field_names,
    project_tables,
    trust_changes,
    trust_project,
)
from ._common import EXIT_OK, EXIT_REFUSED, CliError, fit, terminal_width, visible, wrap
from ._flags import add_settings_flags
from ._toolbox import add_profile_flag, cli_settings

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
    add_profile_flag(group)
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
                          "warnings": list(settings.warnings),
                          "ignored": [asdict(i) for i in settings.ignored]},
                         indent=2, default=str))
        return EXIT_OK
    width = terminal_width()
    for name, value, origin in rows:
        print(_setting_line(name, value, origin, width))
    for warning in settings.warnings:
        print(fit(f"# warning: {warning}", width, "#   "))
    return EXIT_OK


def _setting_line(name: str, value: Any, origin: str, width: int | None) -> str:
    """``name = value  # origin``; a list too long for ``width`` as a TOML array of
    several lines (its items whole, never split)."""
    line = f"{name} = {json.dumps(value, default=str)}  # {origin}"
    if width is None or len(line) <= width or not isinstance(value, list) or not value:
        return line
    rows, row = [], "   "
    for item in (json.dumps(v, default=str) + "," for v in value):
        if len(row) + 1 + len(item) > width and row.strip():
            rows.append(row)
            row = "   "
        row += " " + item
    return "\n".join([f"{name} = [  # {origin}", *rows, row, "]"])


def _value(dumped: dict[str, Any], dotted: str) -> Any:
    value: Any = dumped
    for part in dotted.split("."):
        value = value[part]
    return _masked(value)


def _masked(value: Any) -> Any:
    """A setting as printed: any URL in it without its password or token."""
    if isinstance(value, str):
        return shown_url(value)
    if isinstance(value, list):
        return [_masked(v) for v in value]
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    return value


def add_trust(commands: Any) -> None:
    parser = commands.add_parser(
        "trust", help="review and trust a project's loki.toml / [tool.loki] as it is now",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=wrap(
            "A project's settings file is written by whoever wrote the repository, so by "
            "default it may only tighten your settings. `loki trust` shows each change the "
            "project's settings tables make to yours (base tables and profiles; the ones "
            "that loosen marked LOOSENS), asks y/N on a terminal (--yes without one), then "
            "records the tables (their path, a hash and their content) in your "
            "configuration folder: they then apply in full, until their content changes, "
            "and the warning then says what changed. An agent cannot write loki.toml or "
            "your configuration, and a change it makes to [tool.loki] in pyproject.toml "
            "ends the trust."),
        epilog="examples:\n  loki trust --root .\n  loki trust --root . --yes\n"
               "  loki trust --root . --revoke")
    parser.add_argument("--root", default=".", metavar="DIR", help="the project folder")
    parser.add_argument("--revoke", action="store_true", help="stop trusting it")
    parser.add_argument("-y", "--yes", action="store_true",
                        help="trust without asking (needed when there is no terminal to ask)")
    parser.set_defaults(run=run_trust)


def run_trust(args: argparse.Namespace) -> int:
    files = [path for path, _ in project_tables(Path(args.root).resolve())]
    if not files:
        raise CliError(f"{args.root} has no loki.toml and no [tool.loki] in pyproject.toml")
    if not args.revoke:
        try:
            changes = trust_changes(args.root)
        except SettingsError as exc:
            raise CliError(str(exc)) from exc
        _show(changes, files)
        if not _agreed(args.yes, bool(changes)):
            print("not trusted")
            return EXIT_REFUSED
    trust_project(args.root, revoke=args.revoke)
    verb = "no longer trusted" if args.revoke else "trusted as it is now"
    for path in files:
        print(f"{visible(str(path))}: {verb}")
    return EXIT_OK


def _show(changes: list[Change], files: list[Path]) -> None:
    """Each change trusting makes to the user's settings, loosenings marked, on stdout
    (every character the project wrote shown escaped: it must not drive the terminal)."""
    names = ", ".join(visible(str(p)) for p in files)
    if not changes:
        print(f"{names}: trusting changes none of your settings")
        return
    loose = sum(c.loosens for c in changes)
    print(f"{names}: trusting makes {len(changes)} change(s) to your settings, "
          f"{loose} of them loosening:")
    for change in changes:
        where = f" (profile {visible(change.profile)})" if change.profile else ""
        mark = "  LOOSENS" if change.loosens else ""
        print(f"  {change.field}{where}: {_shown(change.before)} -> {_shown(change.after)}{mark}")


def _shown(value: Any) -> str:
    return visible(json.dumps(_masked(value), default=str, ensure_ascii=False))


def _agreed(assume_yes: bool, asking: bool) -> bool:
    """--yes, or y on a terminal; without a terminal, no (and how to say yes)."""
    if assume_yes or not asking:
        return True
    if sys.stdin is None or not sys.stdin.isatty():
        sys.stderr.write("loki: no terminal to ask; pass --yes to trust it\n")
        return False
    sys.stderr.write("loki: trust these settings? [y/N] ")
    sys.stderr.flush()
    return answer_of(sys.stdin.readline()) == "yes"
