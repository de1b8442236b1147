"""``loki rewind RUN [STEP]``: list a run's checkpoints, or put its root's files back.

Thin: the checkpoints package does the work (the same rewind a toolbox does, checked path
by path: a file changed since the run's last checkpoint is kept and listed); this module
finds the run (a checkpoint run id, a ``loki do`` run id, or a transcript), and prints.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import LokiError
from ._common import EXIT_OK, EXIT_TOOL_ERROR, CliError, wrap

__all__ = ["add_rewind", "run_rewind"]

EXAMPLES = """examples:
  loki rewind 20260301-101500-a1b2c3            # list the run's checkpoints
  loki rewind 20260301-101500-a1b2c3 0 --dry-run   # what going back to before it would do
  loki rewind 20260301-101500-a1b2c3 3          # the files as right after checkpoint 3
  loki rewind ~/.local/state/loki/runs/20260301-101500-a1b2c3.jsonl 0

exit codes: 0 done (or listed), 1 some paths could not be put back (listed, with why),
2 no such run or checkpoint, or another rewind of the root is running."""


def add_rewind(commands: Any) -> None:
    parser = commands.add_parser(
        "rewind", help="list a run's checkpoints, or put its files back as after one",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES,
        description=wrap(
            "Every call of a run that may change files ends with a checkpoint of the root's "
            "files (in the state folder beside the runs folder, outside the root). Without "
            "STEP, list them. With STEP, put the root's files back as they were right after "
            "that checkpoint (0: before the run's first step), what commands and background "
            "jobs changed too. A file changed since the run's last checkpoint, a protected "
            "file and one whose bytes were not kept (too big, unreadable) are listed with "
            "why, never overwritten. The rewind is a checkpoint of its own: rewinding to "
            "the last one before it undoes it."))
    parser.set_defaults(run=run_rewind)
    parser.add_argument("run_id", metavar="RUN",
                        help="a run's id (as `loki do` prints it) or its transcript file")
    parser.add_argument("step", metavar="STEP", nargs="?", type=int,
                        help="the checkpoint to go back to; leave it out to list them")
    parser.add_argument("--dry-run", action="store_true",
                        help="say what would be put back, and show the diff; change nothing")
    parser.add_argument("--path", action="append", default=[], metavar="PATH",
                        help="only this file (relative to the run's root); repeatable")


def run_rewind(args: argparse.Namespace) -> int:
    from ..checkpoints import Checkpoints, checkpoint_folder
    from ..files import Root
    from ..results import render_text
    from ..search import protection
    from ..settings import load_settings

    folder = checkpoint_folder()
    if not (folder / "store.db").is_file():
        raise CliError(f"no checkpoints are kept in {folder} yet (LOKI_STATE_DIR moves it)")
    run = _checkpoint_run(args.run_id)
    try:
        from ..checkpoints import Timeline
        from ..files import Store

        info = Timeline(Store(folder)).run(run)
        if info is None:
            raise CliError(f"no checkpoints of run {run!r} in {folder} (never kept, or pruned)")
        settings = load_settings(info.root)
        root = Root.at(info.root, protect=protection(settings.policy.protect))
        keeper = Checkpoints.of_run(run, folder, root)
        if args.step is None:
            print(render_text(keeper.listing()))
            return EXIT_OK
        result, _ = keeper.rewind(args.step, args.path or None, dry_run=args.dry_run)
    except LokiError as exc:
        raise CliError(str(exc)) from exc
    print(render_text(result))
    return EXIT_TOOL_ERROR if result.not_restored else EXIT_OK


def _checkpoint_run(given: str) -> str:
    """The checkpoint run a RUN argument names: a transcript's (its start record says),
    else the id as given (``loki do`` names both alike)."""
    path = Path(given)
    if not path.is_file():
        from ._runs import runs_folder

        path = runs_folder() / f"{given}.jsonl"
        if not path.is_file():
            return given
    try:
        with path.open(encoding="utf-8") as file:
            start = json.loads(file.readline())
    except (OSError, ValueError) as exc:
        raise CliError(f"{given!r}: not a run's transcript ({exc})") from exc
    if not isinstance(start, dict) or start.get("type") != "start":
        raise CliError(f"{given!r}: not a run's transcript (no start record)")
    return str(start.get("checkpoints") or start.get("run") or path.stem)
