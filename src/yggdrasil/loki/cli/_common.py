"""What every ``loki`` subcommand shares: options, the toolbox, confirm, errors, exit codes.

:func:`toolbox_options` / :func:`open_toolbox` (``--root``, ``--read-only``, ``--web``,
``--sandbox``, ``--no-network``, ``--allow-host``, ``--protect``, ``--no-protect``,
``--rule``, ``--rule-default``, ``--on-syntax-error``, ``--mcp``), :func:`subcommand` (registers
one), :func:`terminal_confirm` (the y/N prompt for destructive operations, with the diff
it asks about), :class:`CliError` and :func:`fail` (the error on stderr, a non-zero exit,
never a traceback).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import textwrap
from typing import Any, TextIO

from ..files import Answer, Confirm, answer_of
from ..results import did_you_mean

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_CODES",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_TOOL_ERROR",
    "EXIT_USAGE",
    "CliError",
    "Parser",
    "confirm_mode",
    "fail",
    "fit",
    "terminal_confirm",
    "terminal_width",
    "visible",
    "wrap",
]

# Exit codes, shared by every subcommand (documented in `loki --help`).
EXIT_OK = 0
EXIT_TOOL_ERROR = 1  # the tool answered "ERROR: ..."
EXIT_USAGE = 2  # bad command line, missing root, unknown tool, bad arguments (argparse uses 2 too)
EXIT_REFUSED = 3  # the tool answered "REFUSED: ...": a destructive operation was declined
EXIT_INCOMPLETE = 4  # do: the step budget ran out before the engine gave an answer
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away (`loki tools | head`)

EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}    success
  {EXIT_TOOL_ERROR}    call: the tool answered 'ERROR: ...' (printed on stdout); do: the engine
       failed (after its retries); any command: an error while running it (on stderr)
  {EXIT_USAGE}    bad command line, missing root, unknown tool, bad arguments, no engine (on stderr)
  {EXIT_REFUSED}    call: the tool answered 'REFUSED: ...': a destructive operation was declined;
       do: the agent answered, but a step was declined (no terminal to ask and no --yes,
       or answered no)
  {EXIT_INCOMPLETE}    do: the step budget ran out before the engine answered
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
  {EXIT_BROKEN_PIPE}  the reader of stdout went away (e.g. `loki tools | head`)"""


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, like every other loki error, and name
    the closest choice for one that is not (``loki cofig``: did you mean config?)."""

    def error(self, message: str) -> Any:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            hint = did_you_mean(value, map(str, action.choices or ()))
            if not hint:
                raise
            raise argparse.ArgumentError(action, f"{exc.message}{hint}") from None


class CliError(Exception):
    """A mistake on the command line: printed as one ``loki: error: ...`` line."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def terminal_confirm(assume_yes: bool, *, stdin: TextIO | None = None,
                     stderr: TextIO | None = None) -> Confirm:
    """The ``confirm`` for a toolbox driven from a terminal.

    With ``assume_yes`` every action is allowed. Otherwise, when stdin is a terminal the
    user is shown the diff of the change (when the action carries one, as the file tools'
    ``ConfirmAction`` does) and asked ``<action>? [y]es/[N]o/[a]lways ...`` on stderr, with
    control characters shown escaped (file content must not drive the terminal); "always"
    allows the same question (this verb on this path, this rule, this tool) for the rest
    of the session (the toolbox's ``Approvals`` remember it). Without a terminal nobody
    can answer, so the action is declined (the tool then answers ``REFUSED: ...``) with a
    hint on stderr.
    """
    def confirm(action: str) -> Answer:
        if assume_yes:
            return "yes"
        inp, err = stdin or sys.stdin, stderr or sys.stderr
        if inp is None or not inp.isatty():
            err.write(f"loki: declined to {action}: no terminal to ask; pass --yes to allow\n")
            err.flush()
            return "no"
        diff = getattr(action, "diff", "")  # a files.ConfirmAction carries the change
        if diff:
            err.write(visible(diff.rstrip("\n")) + "\n")
        key = getattr(action, "key", "") or action
        scope = "this session" if key == action else visible(key)
        err.write(f"loki: {visible(action)}? [y]es/[N]o/[a]lways for {scope}: ")
        err.flush()
        return answer_of(inp.readline())
    return confirm


def confirm_mode(assume_yes: bool) -> str:
    """What :func:`terminal_confirm` will do, for the start line."""
    if assume_yes:
        return "off (--yes: existing files are changed without asking)"
    if sys.stdin is not None and sys.stdin.isatty():
        return "asked on the terminal"
    return "declined (no terminal to ask; --yes allows)"


# C0 and C1 controls but tab and newline, DEL, and the bidi overrides that reorder text
_UNSEEN = [*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F),
           *range(0x2066, 0x206A)]
_SHOW = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in _UNSEEN}


def visible(text: str) -> str:
    """``text`` with every character that could move the cursor, recolour, retitle or
    reorder the terminal shown as an escape (``\\x1b``), so what is shown is what is asked."""
    return text.translate(_SHOW)


def printable(value: object) -> str:
    """A text someone else wrote (a run folder's field, a repository's name) as one line on
    the terminal: :func:`visible`, and its line breaks and tabs escaped too."""
    return visible(str(value)).translate(_BREAKS)


_BREAKS = {0x0A: "\\n", 0x09: "\\t"}


def wrap(text: str) -> str:
    """A help paragraph filled by hand: the raw formatter keeps the examples' layout."""
    return textwrap.fill(text, width=88)


def fail(message: str, code: int) -> int:
    """The error every subcommand ends with: ``loki: error: ...`` on stderr, whole.

    A message of several lines (how to configure an engine, a list of choices) is printed
    in full; only its first line carries the prefix. It may quote what others wrote (a
    path, a line of a run folder): its control characters are shown escaped.
    """
    text = visible(message.strip()) or "failed"
    sys.stderr.write(f"loki: error: {text}\n")
    return code


MIN_WIDTH = 40  # narrower than this, wrapping helps no one


def terminal_width() -> int | None:
    """The width stdout's lines should fit: ``$COLUMNS``, else the terminal's; None when
    stdout is no terminal and ``$COLUMNS`` is unset (a pipe or a file gets lines whole)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return max(int(columns), MIN_WIDTH)
    if sys.stdout is not None and sys.stdout.isatty():
        return max(shutil.get_terminal_size().columns, MIN_WIDTH)
    return None


def fit(text: str, width: int | None, indent: str | None = None) -> str:
    """``text`` with every line longer than ``width`` wrapped at spaces (a word longer
    than the width, a path, stays whole), its continuation lines starting with ``indent``,
    by default indented under the line's text (under the text after ``- `` of a list
    item); lines that fit, and all of them when ``width`` is None, are kept as they are."""
    if width is None:
        return text
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        body = line.lstrip(" ")
        under = " " * (len(line) - len(body) + (2 if body.startswith("- ") else 0))
        out.append(textwrap.fill(line, width, subsequent_indent=indent or under or "  ",
                                 break_long_words=False, break_on_hyphens=False,
                                 replace_whitespace=False))
    return "\n".join(out)
