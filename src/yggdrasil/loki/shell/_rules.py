"""Command rules: allow, ask or deny a command line by the leading words of each command.

``rules=[("deny", "git push"), ("ask", "rm -rf"), ("allow", "pytest")]`` is matched
against every simple command a line would run, found by a real shell parser (bashlex, a
port of bash's own grammar), never by a regex: the commands of pipelines, ``&&``/``||``/
``;`` lists and newlines, subshells and ``{ ...; }`` groups, ``if``/``for``/``while``
bodies, function bodies, ``$(...)``, backquotes and ``<(...)`` anywhere (arguments,
assignments, redirections), and the command lines inside ``bash -c '...'`` (any shell),
``eval ...``, ``env -S '...'``, ``watch '...'``. Wrappers are looked through to the command
they run: ``env VAR=1``, ``sudo -u x``, ``doas``, ``command``, ``builtin``, ``exec``,
``nohup``, ``setsid``, ``time``, ``nice``, ``ionice``, ``stdbuf``, ``timeout 5``,
``xargs -n1``, ``flock FILE``, ``chrt``, ``taskset``, ``strace``, ``find ... -exec``. A
program is named by its file name (``/usr/bin/git`` is ``git``), quotes removed (``'git'``,
``\\git``).

How a rule matches (its first word is the program):

- ``deny`` and ``ask`` rules lean to matching: the rule's other plain words must be the
  command's first plain words, where any option may or may not take the word after it as
  its value (``git -C x push`` and ``git --no-pager push`` are ``git push``; ``git log
  --grep push`` is not); an option word of the rule (``-rf``) matches when the command has
  those letters among its short options (``-fr``, ``-r -f``) or that long option; a word
  that is only known when the line runs (``$CMD``, ``$(...)``) matches any rule word.
- ``allow`` rules match only the command's exact leading words (``git status`` allows
  ``git status -s``, not ``git -c x=y status`` nor ``git $SUB``).

Each command takes the first rule that matches (else ``default``); the line takes the
strictest answer among its commands: deny, then ask, then allow. A line that cannot be
parsed (bash syntax bashlex lacks: ``case``, ``[[ ]]``, ``$(( ))``, a here-document with
a quoted delimiter), a program only known when it runs (``$EDITOR file``, ``$(which git)``)
and a here-document that runs ``$(...)`` count as matching ``ask``.

What rules cannot see: what a program does once it runs (a script, ``make``, ``python
-c 'os.system(...)'``, git aliases). They state the user's intent to the model; the
sandbox is what confines it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import Refused, ToolError

RuleAction = Literal["allow", "ask", "deny"]
RULE_ACTIONS: tuple[RuleAction, ...] = ("allow", "ask", "deny")
_SEVERITY = {"allow": 0, "ask": 1, "deny": 2}
_MAX_LINE = 64_000  # characters parsed; a longer line is asked about
_MAX_DEPTH = 8  # command lines inside command lines (bash -c "eval '...'")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish"})


@dataclass(frozen=True)
class Rule:
    action: RuleAction
    words: tuple[str, ...]

    @property
    def text(self) -> str:
        return shlex.join(self.words)

    def __str__(self) -> str:
        return f"({self.action!r}, {self.text!r})"


@dataclass(frozen=True)
class Word:
    text: str
    dynamic: bool = False  # holds an expansion: its value is only known when it runs


@dataclass(frozen=True)
class Verdict:
    """What a command line gets: ``action``, the ``rule`` that decided (None: the default
    or ``why``), the command it decided on, and why it is asked when no rule said so."""

    action: RuleAction
    rule: Rule | None = None
    command: str = ""
    why: str = ""


def parse_rules(rules: Iterable[Sequence[str]]) -> tuple[Rule, ...]:
    """``(action, words)`` pairs checked: ValueError says what is allowed."""
    parsed = []
    for item in rules:
        if isinstance(item, str) or len(item) != 2:
            raise ValueError(f"a rule is (action, command words), e.g. ('deny', 'git push'); "
                             f"got {item!r}")
        action, text = item
        if action not in RULE_ACTIONS:
            raise ValueError(f"rule action {action!r} must be one of {', '.join(RULE_ACTIONS)}")
        try:
            words = tuple(shlex.split(text))
        except ValueError as exc:
            raise ValueError(f"rule {text!r}: {exc}") from None
        if not words:
            raise ValueError(f"rule ({action!r}, {text!r}) names no command")
        parsed.append(Rule(action, (os.path.basename(words[0]), *words[1:])))
    return tuple(parsed)


@dataclass
class CommandRules:
    """The rules of a toolbox and the action for commands no rule matches."""

    rules: tuple[Rule, ...] = ()
    default: RuleAction = "allow"

    def __post_init__(self) -> None:
        if self.default not in RULE_ACTIONS:
            raise ValueError(f"the default rule action must be one of {', '.join(RULE_ACTIONS)}, "
                             f"not {self.default!r}")

    def __bool__(self) -> bool:
        return bool(self.rules) or self.default != "allow"

    def verdict(self, line: str) -> Verdict:
        """The strictest answer over every command ``line`` would run."""
        try:
            commands = list(simple_commands(line))
        except _Unknown as exc:
            return Verdict("ask", why=str(exc))
        worst = Verdict("allow")
        for words, wraps in commands:
            got = self._one(words, wraps)
            if _SEVERITY[got.action] > _SEVERITY[worst.action]:
                worst = got
        return worst

    def describe(self) -> str:
        """One line for the toolbox status."""
        listed = "; ".join(f"{r.action} {r.text!r}" for r in self.rules) or "none"
        return (f"Command rules (first match wins, by each command's leading words; run_python "
                f"counts as 'python'): {listed}; other commands: {self.default}.")

    def check(self, line: str, confirm: Callable[[str], bool] | None, *,
              action: str = "") -> None:
        """Raise for a line the rules refuse: ToolError for deny, Refused when an ``ask``
        is declined (or there is no ``confirm`` to ask). ``action`` is what ``confirm`` is
        asked (default ``run <line>``)."""
        if not self:
            return
        verdict = self.verdict(line)
        if verdict.action == "deny":
            raise ToolError(self._denied(verdict))
        if verdict.action == "ask":
            action = action or f"run {line}"
            if confirm is None:
                why = f"the rule {verdict.rule} asks first" if verdict.rule else (
                    verdict.why or "commands no rule allows are asked about")
                raise Refused("run", f"{line} ({why}, and this toolbox has no confirm to ask)")
            if not confirm(action):
                raise Refused("run", line)

    def _denied(self, verdict: Verdict) -> str:
        allowed = [r.text for r in self.rules if r.action == "allow"]
        hint = f"; commands the rules allow: {', '.join(allowed)}" if allowed else ""
        if verdict.rule is not None:
            return (f"the command {verdict.command!r} is refused by the rule {verdict.rule} "
                    f"(the user's rules: filesystem_toolbox(rules=...) or loki --rule){hint}")
        return (f"the command {verdict.command!r} matches no rule and commands no rule "
                f"matches are refused (rules_default='deny'){hint}")

    def _one(self, words: list[Word], wraps: bool) -> Verdict:
        """A rule's answer, else the default; a wrapper that runs another command
        (``env X=1 pytest``) is judged by its own rules only: the default is for that one."""
        shown = " ".join(w.text for w in words)
        if words[0].dynamic:
            return Verdict("ask", command=shown, why=f"its program ({words[0].text}) is only "
                           "known when it runs")
        for rule in self.rules:
            if _matches(rule, words):
                return Verdict(rule.action, rule, shown)
        return Verdict("allow" if wraps else self.default, None, shown)


class _Unknown(Exception):
    """The line cannot be read well enough to decide: it is asked about."""


# -- the simple commands of a line ------------------------------------------------------


Command = tuple[list[Word], bool]  # its words; True when it only wraps another command


def simple_commands(line: str, depth: int = 0) -> Iterator[Command]:
    """The words of every command ``line`` would run, wrappers looked through."""
    import bashlex  # imported only when a toolbox has rules

    if depth > _MAX_DEPTH:
        raise _Unknown("command lines are nested too deeply to read")
    if len(line) > _MAX_LINE:
        raise _Unknown(f"the command line is longer than {_MAX_LINE} characters")
    if not line.strip():
        return
    try:
        trees = bashlex.parse(line)
    except RecursionError:
        raise _Unknown("the command line is nested too deeply to parse") from None
    except Exception as exc:  # bashlex's ParsingError, NotImplementedError, ...
        raise _Unknown(f"the shell parser cannot read it ({type(exc).__name__}: "
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
        raise _Unknown("a here-document runs $(...) or `...`")
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
    except _Unknown:
        return
    yield from found


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
            raise _Unknown(f"env -S: {exc}") from None
        inner = _after_options(split + rest, frozenset(), 0, assignments=True)
        if inner:
            yield from _unwrap(inner, depth)
        return


# -- matching ----------------------------------------------------------------------------


def _matches(rule: Rule, words: list[Word]) -> bool:
    if os.path.basename(words[0].text) != rule.words[0]:
        return False
    rest = words[1:]
    if rule.action == "allow":  # exact leading words only
        return len(rest) >= len(rule.words) - 1 and all(
            not w.dynamic and w.text == r for w, r in zip(rest, rule.words[1:], strict=False))
    flags = [r for r in rule.words[1:] if r.startswith("-") and len(r) > 1]
    plain = [r for r in rule.words[1:] if not (r.startswith("-") and len(r) > 1)]
    return all(_has_flag(rest, f) for f in flags) and _leads_with(rest, plain)


def _has_flag(words: list[Word], flag: str) -> bool:
    """The command has ``flag``: a long option (``--force``, ``--force=x``) or all the
    letters of a short cluster (``-rf``: ``-fr``, ``-r -f``, ``-Rfv``...)."""
    if any(w.dynamic for w in words):
        return True
    texts = [w.text for w in words[: _options_end(words)]]
    if flag.startswith("--"):
        return any(t == flag or t.startswith(flag + "=") for t in texts)
    shorts = {c for t in texts if t.startswith("-") and not t.startswith("--") for c in t[1:]}
    return set(flag[1:]) <= shorts


def _options_end(words: list[Word]) -> int:
    return next((i for i, w in enumerate(words) if w.text == "--"), len(words))


def _leads_with(words: list[Word], plain: list[str]) -> bool:
    """``plain`` are the command's first non-option words, each option taking the word
    after it as its value or not (both are tried)."""
    states = {(0, 0)}  # (index in words, rule words matched)
    while states:
        i, j = states.pop()
        if j == len(plain):
            return True
        if i >= len(words):
            continue
        w = words[i]
        if w.dynamic or w.text == plain[j]:
            states.add((i + 1, j + 1))
        if w.text == "--":  # everything after it is a plain word
            rest = words[i + 1: i + 1 + len(plain) - j]
            if len(rest) == len(plain) - j and all(
                    x.dynamic or x.text == p for x, p in zip(rest, plain[j:], strict=True)):
                return True
        elif w.text.startswith("-") and len(w.text) > 1:
            states.add((i + 1, j))
            if "=" not in w.text:
                states.add((i + 2, j))
    return False
