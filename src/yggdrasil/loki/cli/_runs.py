"""What ``loki do`` keeps and says about its runs: the runs folder of transcripts (for
``--continue``/``--resume``), the ``--events`` stream, and the line that names the engine.

Every run's transcript goes to the runs folder (``$LOKI_STATE_DIR/runs``, else
``$XDG_STATE_HOME/loki/runs``, else ``~/.local/state/loki/runs``; private to the user),
named by the run's id, unless ``--log FILE`` puts it elsewhere. Beside it,
``<id>.toolbox.json`` keeps the toolbox flags the run was given (``--mcp``, ``--rule``,
``--read-only``...), so that ``--continue`` and ``--resume`` open the same toolbox.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from ..engines import shown_url
from ._common import CliError

__all__ = ["MAX_INSTRUCTIONS_FILE", "event_sink", "find_run", "last_run", "record_toolbox",
           "recorded_toolbox", "runs_folder", "start_line"]

MAX_INSTRUCTIONS_FILE = 65_536  # characters read from --instructions (the prompt caps again)


def runs_folder(*, create: bool = False) -> Path:
    """Where the transcripts of ``loki do`` runs are kept (beside the checkpoints)."""
    from ..checkpoints import state_folder

    folder = state_folder() / "runs"
    if create:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def record_toolbox(run_id: str, flags: dict[str, Any], profile: str | None) -> None:
    """Keep the toolbox flags of run ``run_id`` (private to the user: ``--env`` values may
    be secrets) for a later ``--continue``; written whole or not at all."""
    folder = runs_folder(create=True)
    path = folder / f"{run_id}.toolbox.json"
    part = path.with_suffix(".part")
    try:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump({"flags": flags, "profile": profile}, file, ensure_ascii=False)
        os.replace(part, path)
    except OSError as exc:
        sys.stderr.write(f"loki: warning: cannot keep the run's toolbox flags for --continue "
                         f"({exc})\n")


def recorded_toolbox(run_id: str) -> dict[str, Any] | None:
    """What :func:`record_toolbox` kept for ``run_id``; None for a run that kept nothing
    (an older version's, or one whose record cannot be read)."""
    try:
        with (runs_folder() / f"{run_id}.toolbox.json").open(encoding="utf-8") as file:
            record = json.load(file)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("flags"), dict):
        return None
    return record


def _start_of(path: Path) -> dict[str, Any] | None:
    try:
        with path.open(encoding="utf-8") as file:
            record = json.loads(file.readline())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("type") == "start" else None


def last_run(root: str) -> Path:
    """The newest transcript in the runs folder of a run in ``root``."""
    where = os.path.realpath(root)
    folder = runs_folder()
    found = sorted(folder.glob("*.jsonl"), key=lambda p: (p.stat().st_mtime, p.name),
                   reverse=True) if folder.is_dir() else []
    for path in found:
        start = _start_of(path)
        if start is not None and start.get("root") == where:
            return path
    raise CliError(f"--continue: no earlier run in {where} (transcripts are kept in {folder}); "
                   "start one without --continue")


def find_run(run: str) -> Path:
    """A run's transcript by its id (in the runs folder) or its path."""
    folder = runs_folder()
    for path in (Path(run), folder / f"{run}.jsonl"):
        if path.is_file():
            return path
    recent = sorted(p.stem for p in folder.glob("*.jsonl"))[-5:] if folder.is_dir() else []
    listed = f"; the latest: {', '.join(recent)}" if recent else ""
    raise CliError(f"--resume {run!r}: no such run id or transcript file in {folder}{listed}")


@contextmanager
def event_sink(target: str | None) -> Iterator[Callable[[dict[str, Any]], None] | None]:
    """``on_event`` writing JSON lines to ``target`` ('-': stdout), flushed per event."""
    if target is None:
        yield None
        return
    try:
        stream: IO[str] = sys.stdout if target == "-" else open(target, "w", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise CliError(f"--events {target!r}: cannot write it ({exc})") from exc

    def write(event: dict[str, Any]) -> None:
        stream.write(json.dumps(event, ensure_ascii=False) + "\n")
        stream.flush()

    try:
        yield write
    finally:
        if stream is not sys.stdout:
            stream.close()


def start_line(engine: Any, args: argparse.Namespace, run_id: str, session: Any,
               settings: Any = None) -> str:
    """``loki: openai model gpt-4.1 (the engine's default) at https://...; run <id>``."""
    name = str(getattr(engine, "name", type(engine).__name__))
    model = str(getattr(engine, "model", "") or "")
    url = shown_url(str(getattr(engine, "base_url", "") or ""))
    where = f" at {url}" if url else ""
    line = f"loki: {name} model {model} ({model_source(args, name, settings)}){where}; run {run_id}"
    if session is not None:
        line += f", continuing {session.runs[-1]} ({len(session.messages)} messages)"
    return line


def model_source(args: argparse.Namespace, engine: str, settings: Any = None) -> str:
    """Where the model name came from, so a default is never silent."""
    if args.model:
        return "--model"
    origin = settings.origin("agent.model") if settings is not None else "default"
    if origin not in ("default", "environment"):
        return f"agent.model of the settings, {origin}"
    if not args.engine and os.environ.get("LOKI_MODEL"):
        return "LOKI_MODEL"
    if engine == "ollama":
        return "the first model the Ollama server lists; --model or LOKI_MODEL to choose"
    return f"the {engine} engine's default; --model or LOKI_MODEL to choose"
