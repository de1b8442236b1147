"""The toolbox of a subcommand: the flags that fill :class:`~yggdrasil.loki.settings.Settings`,
the toolbox they open, and the fence said out loud.

Every toolbox-backed subcommand (tools, call, do, mcp) and ``loki fleet`` take the same
flags, made from the settings' declarations (``_flags``); a flag that is given overrides
the files and ``LOKI_*`` variables (``load_settings``), one that is not leaves them. :func:`announce` prints, when a run
starts, the one line saying which fence is actually in force, and a loud warning when
commands run unfenced or confirmation is off.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Collection
from typing import Any, TextIO

from ..errors import LokiError
from ..files import Confirm
from ..settings import Settings, SettingsError, load_settings
from ..tools import Toolbox, filesystem_toolbox
from ._common import CliError, wrap
from ._flags import TOOLBOX, add_settings_flags, given_settings

__all__ = [
    "add_profile_flag",
    "add_settings_flags",
    "announce",
    "announce_settings",
    "cli_settings",
    "fleet_fence",
    "open_toolbox",
    "subcommand",
    "toolbox_options",
]


def cli_settings(args: argparse.Namespace, root: str | None = None,
                 groups: Collection[str] = TOOLBOX) -> Settings:
    """The settings the files, the environment and the given flags (of the fields in
    ``groups``) make for ``root``."""
    overrides, replaced = given_settings(args, groups)
    where = root if root is not None else getattr(args, "root", ".")
    try:
        settings = load_settings(where, profile=args.profile, overrides=overrides)
        if replaced:  # --no-protect: drops the defaults and whatever the files added
            settings = settings.with_values(replaced, origin="command line")
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
    the profile, the settings flags (``_flags``), and ``--yes`` where a terminal may be
    asked."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("toolbox")
    group.add_argument("--root", default=".", metavar="DIR",
                       help="the folder the tools are confined to (default: the current folder)")
    add_profile_flag(group)
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


def add_profile_flag(group: Any) -> None:
    group.add_argument("--profile", metavar="NAME", help=(
        "apply the [profiles.NAME] tables of the settings files (or LOKI_PROFILE)"))


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
