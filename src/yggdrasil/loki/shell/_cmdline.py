"""The commands a shell command line would run, found by bash's grammar (bashlex).

:func:`simple_commands` yields the words of every simple command of a line: those of
pipelines, ``&&``/``||``/``;`` lists and newlines, subshells and ``{ ...; }`` groups,
``if``/``for``/``while`` bodies, function bodies, ``$(...)``, backquotes and ``<(...)``
anywhere (arguments, assignments, redirections), and the command lines inside ``bash -c
'...'`` (any shell), ``eval ...``, ``env -S '...'``, ``watch '...'`` and ``find -exec``.
Wrappers are looked through to the command they run (``env VAR=1``, ``sudo -u x``,
``doas``, ``command``, ``builtin``, ``exec``, ``nohup``, ``setsid``, ``time``, ``nice``,
``ionice``, ``stdbuf``, ``timeout 5``, ``xargs -n1``, ``flock FILE``, ``chrt``,
``taskset``, ``strace``), and the wrapper itself is yielded too. A word holding an
expansion (``$X``, ``$(...)``) is marked dynamic: its value is only known when it runs.
A line that cannot be read raises :class:`Unreadable`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_MAX_LINE = 64_000  # characters parsed; a longer line is asked about
_MAX_DEPTH = 8  # command lines inside command lines (bash -c "eval '...'")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish"})


@dataclass(frozen=True)
class Word:
    text: str
    dynamic: bool = False  # holds an expansion: its value is only known when it runs


class Unreadable(Exception):
    """The line cannot be read well enough to decide: it is asked about."""


# -- the simple commands of a line ------------------------------------------------------


Command = tuple[list[Word], bool]  # its words; True when it only wraps another command


def simple_commands(line: str, depth: int = 0) -> Iterator[Command]:
    """The words of every command ``line`` would run, wrappers looked through."""
    import bashlex  # imported only when a toolbox has rules

    if depth > _MAX_DEPTH:
        raise Unreadable("command lines are nested too deeply to read")
    if len(line) > _MAX_LINE:
        raise Unreadable(f"the command line is longer than {_MAX_LINE} characters")
    if not line.strip():
        return
    try:
        trees = bashlex.parse(line)
    except RecursionError:
        raise Unreadable("the command line is nested too deeply to parse") from None
    except Exception as exc:  # bashlex's ParsingError, NotImplementedError, ...
        raise Unreadable(f"the shell parser cannot read it ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else 'unsupported syntax'})") from None
    for tree in trees:
        yield from _walk(tree, depth)


def _walk(node: Any, depth: int) -> Iterator[Command]:
    kind = getattr(node, "kind", "")
    if kind == "command":
        words = [_word(p) for p in node.parts if p.kind == "word"]
        if words:
            yield from _unwrap(words, depth)
    elif kind == "heredoc" and ("$(" in node.value or "`" in node.value):
        raise Unreadable("a here-document runs $(...) or `...`")
    for child in _children(node):
        yield from _walk(child, depth)


def _children(node: Any) -> Iterator[Any]:
    for value in vars(node).values():
        if isinstance(value, list):
            yield from (v for v in value if hasattr(v, "kind"))
        elif hasattr(value, "kind"):
            yield value


def _word(node: Any) -> Word:
    dynamic = any(p.kind not in ("tilde",) for p in getattr(node, "parts", []))
    return Word(node.word, dynamic)


# -- wrappers: the command a command runs ------------------------------------------------

# Options of each wrapper that take a value (the next word), and how many plain words
# come before the command it runs (timeout's duration, flock's file, chrt's priority...).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-T", "-U", "--user",
                        "--group", "--host", "--prompt", "--chdir", "--close-from", "--role",
                        "--type", "--command-timeout", "--other-user"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "env": (frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "nohup": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "--class", "-n", "--classdata"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "xargs": (frozenset({"-n", "-L", "-P", "-I", "-i", "-d", "-E", "-e", "-s", "-a",
                         "--max-args", "--max-lines", "--max-procs", "--replace", "--delimiter",
                         "--eof", "--max-chars", "--arg-file"}), 0),
    "flock": (frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}), 1),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "unbuffer": (frozenset(), 0),
    "strace": (frozenset({"-o", "-e", "-p", "-s", "-u", "-E", "-P", "-a", "-I", "-b"}), 0),
    "ltrace": (frozenset({"-o", "-e", "-p", "-s", "-u", "-n", "-a"}), 0),
}


def _unwrap(words: list[Word], depth: int) -> Iterator[Command]:
    """``words`` and what it runs: the wrapper itself is yielded too, so that a rule on it
    (``deny sudo``) still sees it."""
    inner = [] if words[0].dynamic else list(_inner(words, depth))
    yield words, bool(inner)
    yield from inner


def _inner(words: list[Word], depth: int) -> Iterator[Command]:
    """The commands a wrapper, a shell, eval or find runs (nothing for other programs)."""
    name = os.path.basename(words[0].text)
    args = words[1:]
    if name in _SHELLS:
        yield from _shell_script(args, depth)
    elif name == "eval":
        yield from _line(" ".join(w.text for w in args), args, depth)
    elif name == "watch":
        rest = _after_options(args, frozenset({"-n", "--interval", "-d", "--differences"}), 0)
        yield from _line(" ".join(w.text for w in rest), rest, depth)
    elif name == "find":
        yield from _find_exec(args, depth)
    elif name == "env" and any(w.text in ("-S", "--split-string") or w.text.startswith("-S")
                               for w in args):
        yield from _env_split(args, depth)
    elif name == "command" and any(w.text in ("-v", "-V") for w in args):
        return  # looks a name up, runs nothing
    elif name in _WRAPPERS:
        values, positional = _WRAPPERS[name]
        inner = _after_options(args, values, positional, assignments=name in ("env", "sudo"))
        if inner:
            yield from _unwrap(inner, depth)


def _after_options(args: list[Word], values: frozenset[str], positional: int,
                   assignments: bool = False) -> list[Word]:
    """The words after a wrapper's options (and its ``positional`` words)."""
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "--":
            i += 1
            break
        if text.startswith("-") and len(text) > 1:
            i += 2 if text in values else 1
        elif assignments and "=" in text and not text.startswith("="):
            i += 1
        else:
            break
    return args[i + positional:]


def _line(text: str, words: list[Word], depth: int) -> Iterator[Command]:
    """The commands of a command line given as words. One only known when it runs
    (``eval "$ARGS"``) is asked about, and what can be read of it is judged too."""
    if not any(w.dynamic for w in words):
        yield from simple_commands(text, depth + 1)
        return
    yield [Word(text, dynamic=True)], False
    try:
        found = list(simple_commands(text, depth + 1))
    except Unreadable:
        return
    yield from found


def reads_commands(line: str) -> bool:
    """Whether ``line`` runs a shell that takes its commands from stdin (``bash``,
    ``sh -s x``, ``bash -o posix``, ``cat | bash``): what a background job of it is sent
    is a command line too. A line that cannot be read is taken to (the safe answer)."""
    try:
        commands = list(simple_commands(line))
    except Unreadable:
        return True
    return any(words and os.path.basename(words[0].text) in _SHELLS
               and _reads_stdin([w.text for w in words[1:]]) for words, _ in commands)


_OPTION_ARGUMENT = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def _reads_stdin(args: list[str]) -> bool:
    """Whether a shell run with ``args`` reads its commands from stdin: no ``-c`` and no
    script operand, or ``-s`` (then the operands are only its positional parameters)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return i + 1 == len(args)  # what follows `--` is a script, if anything
        if arg in _OPTION_ARGUMENT:
            i += 2
            continue
        if arg.startswith("--"):  # --login, --norc, --posix...
            i += 1
            continue
        if arg.startswith(("-", "+")) and len(arg) > 1:
            flags = arg[1:]
            if "c" in flags:
                return False  # commands from the argument: judged as a command line
            if "s" in flags:
                return True  # from stdin, whatever follows
            i += 2 if flags[-1] in "oO" else 1  # `-eo pipefail`: the last flag's argument
            continue
        return False  # a script file
    return True


def _shell_script(args: list[Word], depth: int) -> Iterator[Command]:
    """``bash -c 'SCRIPT'`` (also ``-lc``, ``-e -c``): the commands of SCRIPT."""
    for i, word in enumerate(args):
        text = word.text
        if text == "--" or not text.startswith(("-", "+")):
            return  # a script file or stdin: not visible here
        if text.startswith("-") and not text.startswith("--") and "c" in text[1:]:
            script = next((w for w in args[i + 1:] if not w.text.startswith(("-", "+"))), None)
            if script is not None:
                yield from _line(script.text, [script], depth)
            return


def _find_exec(args: list[Word], depth: int) -> Iterator[Command]:
    """The commands of ``find ... -exec CMD ... ;`` (and -execdir, -ok, -okdir)."""
    i = 0
    while i < len(args):
        if args[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((j for j in range(i + 1, len(args)) if args[j].text in (";", "+")),
                       len(args))
            if end > i + 1:
                yield from _unwrap(args[i + 1:end], depth)
            i = end
        i += 1


def _env_split(args: list[Word], depth: int) -> Iterator[Command]:
    """``env -S 'CMD ARGS'`` runs the split string (plus what follows) as a command."""
    for i, word in enumerate(args):
        if word.text in ("-S", "--split-string") and i + 1 < len(args):
            text, rest = args[i + 1].text, args[i + 2:]
        elif word.text.startswith("-S") and len(word.text) > 2:
            text, rest = word.text[2:], args[i + 1:]
        else:
            continue
        try:
            split = [Word(w, args[i].dynamic) for w in shlex.split(text)]
        except ValueError as exc:
            raise Unreadable(f"env -S: {exc}") from None
        inner = _after_options(split + rest, frozenset(), 0, assignments=True)
        if inner:
            yield from _unwrap(inner, depth)
        return
