"""``loki do "TASK"``: run the reason -> act -> observe loop from a terminal.

Progress goes to stderr (a spinner while the model thinks, one line per step, the step
budget); the answer goes to stdout, or the whole ActResult with ``--json``. Destructive
operations ask y/N on a terminal, and are refused without one unless ``--yes`` (said
before the first model call; a run with a declined step exits 3). Ctrl-C
(or SIGTERM) stops the run and still reports what changed; background jobs the agent
started end with the run, however it ends.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from ..engines import shown_url
from ..errors import EngineConfigError, EngineError, LokiError
from ..files import Confirm, answer_of
from ..tools import Toolbox
from ._common import (
    EXIT_CODES,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_TOOL_ERROR,
    CliError,
    confirm_mode,
    terminal_confirm,
)
from ._flags import AGENT, TOOLBOX, add_settings_flags, given_flags, restore_flags
from ._runs import (
    MAX_INSTRUCTIONS_FILE,
    event_sink,
    find_run,
    last_run,
    record_toolbox,
    recorded_toolbox,
    runs_folder,
    start_line,
)
from ._toolbox import announce, cli_settings, open_toolbox, subcommand

__all__ = ["EXIT_INCOMPLETE", "add_do", "failure_detail", "run_do"]

ARGS_SHOWN = 60  # characters of a step's arguments on its progress line


def add_do(commands: Any) -> None:
    parser = subcommand(
        commands, "do", run_do, with_yes=True,
        summary="let the agent work on a task in the root",
        description=(
            "Run the agent loop on TASK: the engine picks one tool call per step, the "
            "toolbox runs it inside --root, and the observation goes back to the engine, "
            "until it answers or --max-steps runs out. Without --engine the engine comes "
            "from LOKI_ENGINE/LOKI_MODEL/LOKI_BASE_URL, else ANTHROPIC_API_KEY, "
            "OPENAI_API_KEY, or an Ollama server on localhost:11434."),
        epilog="examples:\n"
               "  loki do 'add a --verbose flag to cli.py' --root ~/src/app\n"
               "  loki do 'summarise data/sales.csv' --read-only --engine ollama --model qwen3\n"
               "  loki do 'fix the failing test' --engine openai --base-url "
               "http://localhost:8000/v1 --model my-model --yes\n"
               "  loki do 'replay' --engine scripted --model run.jsonl --json\n"
               "\n" + EXIT_CODES)
    parser.add_argument("task", help="what the agent should do, in plain words")
    add_settings_flags(parser.add_argument_group("the agent"), AGENT)
    parser.add_argument("--json", action="store_true",
                        help="print the whole result (steps, answer, files, usage) as JSON")
    parser.add_argument("--log", metavar="FILE",
                        help="write the JSONL transcript here as the run goes (default: the "
                             "runs folder, $LOKI_STATE_DIR/runs or ~/.local/state/loki/runs; "
                             "replayable with --engine scripted --model FILE)")
    parser.add_argument("--instructions", metavar="FILE",
                        help="put this file's text in the system prompt, after the project's "
                             "AGENTS.md files")
    parser.add_argument("--no-agents-md", action="store_true",
                        help="do not read the AGENTS.md files from the repository's top down "
                             "to --root")
    parser.add_argument("--events", metavar="FILE",
                        help="write one JSON event per line as the run goes ('-': stdout, "
                             "instead of the answer); see docs for the schema")
    again = parser.add_mutually_exclusive_group()
    again.add_argument("--continue", dest="resume_last", action="store_true",
                       help="continue the last run in --root: the model sees its conversation")
    again.add_argument("--resume", metavar="RUN",
                       help="continue the run with this id (or transcript file)")


def run_do(args: argparse.Namespace) -> int:
    from ..agent import Loki
    from ..loop import new_run_id

    if args.events == "-" and args.json:
        raise CliError("--events - and --json both write to stdout; give one a file")
    session = _session(args)
    if session is not None:
        _restore_toolbox(args, session)
    settings = cli_settings(args, groups=TOOLBOX | AGENT)
    args.max_steps = settings.agent.max_steps
    instructions = _read_instructions(args.instructions)
    said = len(session.notes) if session is not None else 0
    try:
        loki = Loki(agents_md=not args.no_agents_md, settings=settings)
    except (EngineConfigError, ValueError) as exc:
        raise CliError(str(exc)) from exc
    progress = Progress(args.max_steps, live=sys.stderr.isatty())
    declined = Declined(progress.paused(terminal_confirm(args.yes)))
    box = open_toolbox(args, confirm=declined, settings=settings)
    # one id names the run's transcript and its checkpoints (`loki rewind RUN STEP`)
    run_id = box.checkpointing.run if box.checkpointing is not None else new_run_id()
    if session is not None:
        _continue_checkpoints(box, session)
    transcript = args.log or runs_folder(create=True) / f"{run_id}.jsonl"
    record_toolbox(run_id, given_flags(args), args.profile)
    sys.stderr.write(start_line(loki.engine, args, run_id, session, settings) + "\n")
    announce(box, confirm=confirm_mode(args.yes), root=args.root)
    if not (args.yes or settings.read_only or _terminal()):
        sys.stderr.write("loki: no terminal to ask: edits of existing files and commands an "
                         "ask rule matches will be declined (exit 3 if any is); pass --yes "
                         "to allow them, or --read-only\n")
    signal.signal(signal.SIGTERM, _interrupt)  # a kill ends the run as Ctrl-C does
    try:
        with event_sink(args.events) as on_event:
            try:
                with progress:
                    result = loki.act(args.task, root=args.root, max_steps=args.max_steps,
                                      toolbox=box, on_step=progress.step, transcript=transcript,
                                      instructions=instructions, session=session,
                                      on_event=on_event, run_id=run_id)
            finally:
                box.close()  # background jobs end with the run (Ctrl-C too) and settle
        result.files_changed = list(box.changed)
    except KeyboardInterrupt:
        report_changes(box, "interrupted")
        return EXIT_INTERRUPTED
    except EngineError as exc:
        report_changes(box, f"engine error: {shown_url(str(exc))}")
        return EXIT_TOOL_ERROR
    if args.json:
        print(result.to_json(indent=2))
    elif args.events != "-":
        print(result.answer or "(no answer: the step budget ran out)")
    for note in session.notes[said:] if session is not None else ():
        sys.stderr.write(f"loki: {note}\n")  # what the run found no longer holds
    if not args.json:
        report_changes(box, usage=result.usage)
        sys.stderr.write(f"run {run_id}: continue it with `loki do --resume {run_id} TASK`\n")
    if not result.completed:
        return EXIT_INCOMPLETE
    if declined.count:
        sys.stderr.write(f"loki: {declined.count} step{'s' if declined.count > 1 else ''} "
                         "declined (exit 3)\n")
        return EXIT_REFUSED
    return EXIT_OK


def _terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


class Declined:
    """A ``confirm`` that counts what it declined: a run with a declined step exits 3
    (without a terminal nobody can say yes, which CI must not mistake for success)."""

    def __init__(self, confirm: Confirm) -> None:
        self.confirm, self.count = confirm, 0

    def __call__(self, action: str) -> Any:
        answer = self.confirm(action)
        if answer_of(answer) == "no":
            self.count += 1
        return answer


def _read_instructions(path: str | None) -> str:
    if path is None:
        return ""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read(MAX_INSTRUCTIONS_FILE + 1)[:MAX_INSTRUCTIONS_FILE]
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"--instructions {path!r}: cannot read it ({exc})") from exc


def _session(args: argparse.Namespace) -> Any:
    """The session --continue/--resume name, None for a new one; CliError when not found."""
    from ..loop import Session

    if not (args.resume_last or args.resume):
        return None
    path = last_run(args.root) if args.resume_last else find_run(args.resume)
    try:
        session = Session.from_transcript(path)
    except LokiError as exc:
        raise CliError(str(exc)) from exc
    for note in session.notes:
        sys.stderr.write(f"loki: {note}\n")
    return session


def _restore_toolbox(args: argparse.Namespace, session: Any) -> None:
    """Continue means the same toolbox: the toolbox flags the earlier run recorded go into
    ``args`` where no flag given now sets the same setting; stderr says which."""
    earlier = session.runs[-1] if session.runs else None
    record = recorded_toolbox(earlier) if earlier else None
    if record is None:
        sys.stderr.write(f"loki: run {earlier} kept no toolbox flags; the toolbox is made from "
                         "the flags given now\n")
        return
    restored, overridden = restore_flags(args, record["flags"])
    if args.profile is None and isinstance(record.get("profile"), str):
        args.profile = record["profile"]
        restored.append(f"--profile {args.profile}")
    if restored:
        sys.stderr.write(f"loki: restored the toolbox flags of run {earlier}: "
                         f"{', '.join(restored)}\n")
    if overridden:
        sys.stderr.write(f"loki: given now instead of run {earlier}'s: "
                         f"{', '.join(overridden)}\n")


def _continue_checkpoints(box: Toolbox, session: Any) -> None:
    """The run's checkpoints go on from the earlier run's last one: a rewind of this run
    can go back into the earlier run's steps (files changed in between are kept)."""
    earlier = session.runs[-1] if session.runs else None
    if box.checkpointing is None or earlier is None:
        return
    try:
        box.checkpointing.follow(earlier)
    except LokiError as exc:  # its checkpoints were pruned, or never kept
        sys.stderr.write(f"loki: the earlier run's checkpoints cannot be continued: {exc}\n")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class Progress:
    """Step lines on stderr, with a spinner between them when stderr is a terminal."""

    def __init__(self, max_steps: int, *, live: bool) -> None:
        from rich.console import Console

        self.max_steps = max_steps
        self.console = Console(stderr=True, highlight=False, soft_wrap=True)
        self.status: Any = self.console.status(self._waiting(1)) if live else None

    def _waiting(self, n: int) -> str:
        return f"step {n}/{self.max_steps}: thinking..."

    def __enter__(self) -> Progress:
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()

    def step(self, step: Any) -> None:
        from rich.markup import escape

        if step.tool:
            args = json.dumps(step.args, ensure_ascii=False)
            args = args if len(args) <= ARGS_SHOWN else args[: ARGS_SHOWN - 3] + "..."
            first = step.observation.splitlines()[0] if step.observation else ""
            detail = failure_detail(step.data)
            shown = f"{first[:80]}: {detail[:120]}" if detail else first[:80]
            line = f"[bold]{step.n}/{self.max_steps}[/] {escape(step.tool)} {escape(args)}"
            self.console.print(f"{line}  [dim]-> {escape(shown)}[/]")
        else:
            self.console.print(f"[bold]{step.n}/{self.max_steps}[/] [yellow]reply was not a "
                               "decision; asked again[/]")
        if self.status is not None:
            self.status.update(self._waiting(step.n + 1))

    def paused(self, confirm: Confirm) -> Confirm:
        """``confirm`` with the spinner stopped while the user is asked."""
        def ask(action: str) -> Any:
            if self.status is None:
                return confirm(action)
            self.status.stop()
            try:
                return confirm(action)
            finally:
                self.status.start()
        return ask


def report_changes(box: Toolbox, headline: str = "", *, usage: dict[str, int] | None = None) -> None:
    """What the run changed (and its token usage), on stderr."""
    err = sys.stderr
    if headline:
        err.write(f"loki: {headline}\n")
    if box.changed:
        err.write(f"files changed ({len(box.changed)}):\n")
        for line in change_lines(box):
            err.write(f"  {line}\n")
    else:
        err.write("files changed: none\n")
    if usage:
        err.write(f"tokens: {usage.get('input_tokens', 0)} in, {usage.get('output_tokens', 0)} "
                  f"out, {usage.get('requests', 0)} requests\n")


def failure_detail(data: dict[str, Any] | None) -> str:
    """The last line of stderr of a failed command (run/run_python), from the step's
    typed result; '' otherwise."""
    if not data or data.get("kind") != "command" or data.get("exit_code") == 0:
        return ""
    stderr = data.get("stderr") or {}
    text = f"{stderr.get('head', '')}\n{stderr.get('tail', '')}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


_MARKS = {"created": "A", "modified": "M", "deleted": "D", "transient": "T"}


def change_lines(box: Toolbox) -> list[str]:
    """``M cli.py  (+3 -1)`` per changed file: status mark, path, lines added and removed."""
    lines = []
    for rel, status in box.changes.items():
        counts = _line_counts(box, rel)
        detail = f"  (+{counts[0]} -{counts[1]})" if counts else ""
        lines.append(f"{_MARKS.get(status, '?')} {rel}{detail}")
    return lines


def _line_counts(box: Toolbox, rel: str) -> tuple[int, int] | None:
    try:
        return box.journal.line_counts(rel) if box.journal is not None else None
    except LokiError:  # the file went away or turned into something else meanwhile
        return None
