"""Command rules: allow, ask or deny a command line by the leading words of each command.

``rules=[("deny", "git push"), ("ask", "rm -rf"), ("allow", "pytest")]`` is matched
against every simple command a line would run, found by a real shell parser (bashlex, a
port of bash's own grammar, never a regex: see ``_cmdline`` for what it looks into and
the wrappers it looks through). A program is named by its file name (``/usr/bin/git`` is
``git``), quotes removed (``'git'``, ``\\git``).

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

Where rules are checked: on the line, before anything starts (this parser: an early,
friendly refusal with no process and a clear message), and again where it counts, when
each program starts (``_guard``: seccomp user notification stops every ``execve`` of the
command and of everything it starts at any depth: scripts, ``make``, ``xargs``, ``python
-c 'subprocess.run(...)'``, background jobs and what ``job_input`` feeds them).
At exec time the program is named by the file its path reaches and its real argv, after
every expansion (``_execnames``); ``default`` is for the commands of the line, and a
program no rule matches starts. Where seccomp user notification is missing, only the
line is checked, and the status says so. What a program does without starting another
one (git aliases aside, which are asked about) is the sandbox's to confine.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import Refused, ToolError
from ..files import ConfirmAction, answer_of
from ..sandbox import Exec
from ._cmdline import Unreadable, Word, simple_commands
from ._execnames import Twins, command_text, exec_commands, git_smuggles, shown

RuleAction = Literal["allow", "ask", "deny"]
RULE_ACTIONS: tuple[RuleAction, ...] = ("allow", "ask", "deny")
_SEVERITY = {"allow": 0, "ask": 1, "deny": 2}


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
    _twins: Twins | None = field(default=None, init=False, repr=False, compare=False)

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
        except Unreadable as exc:
            return Verdict("ask", why=str(exc))
        worst = Verdict("allow")
        for words, wraps in commands:
            got = self._one(words, wraps)
            if _SEVERITY[got.action] > _SEVERITY[worst.action]:
                worst = got
        return worst

    def exec_verdict(self, ex: Exec) -> Verdict:
        """The answer for a program about to start (any depth): the first rule matching any
        command it counts as (``_execnames``); no rule: allowed (``default`` is for the
        commands of the line). A git command that may run another subcommand than it names
        (an alias, configuration on its command line) is asked about when rules name git
        subcommands."""
        tools = {r.words[0] for r in self.rules}
        if self._twins is None:
            self._twins = Twins(tools)
        commands = exec_commands(ex, tools, self._twins)
        got = next((Verdict(r.action, r, shown(ex, words)) for r in self.rules
                    for words in commands if _matches(r, words)), None)
        if got is None:
            got = Verdict("allow", None, shown(ex, commands[0]))
        if got.action == "allow" and any(
                r.words[0] == "git" and len(r.words) > 1 and r.action != "allow"
                for r in self.rules):
            why = next((w for words in commands if words[0].text == "git"
                        for w in [git_smuggles(words)] if w), "")
            if why:
                return Verdict("ask", None, got.command, why)
        return got

    def asked(self, line: str) -> set[str]:
        """The commands of ``line`` an ``ask`` rule matches, as ``exec_verdict`` shows them
        (a confirmed line is not asked about again when they start)."""
        try:
            commands = list(simple_commands(line))
        except Unreadable:
            return set()
        return {command_text([os.path.basename(words[0].text), *(w.text for w in words[1:])])
                for words, wraps in commands if self._one(words, wraps).action == "ask"}

    def describe(self) -> str:
        """One line for the toolbox status."""
        listed = "; ".join(f"{r.action} {r.text!r}" for r in self.rules) or "none"
        return (f"Command rules (first match wins, by each command's leading words; run_python "
                f"counts as 'python'): {listed}; other commands: {self.default}.")

    def check(self, line: str, confirm: Callable[[str], Any] | None, *,
              action: str = "") -> None:
        """Raise for a line the rules refuse: ToolError for deny, Refused when an ``ask``
        is declined (or there is no ``confirm`` to ask). ``action`` is what ``confirm`` is
        asked (default ``run <line>``)."""
        if not self:
            return
        verdict = self.verdict(line)
        rule = str(verdict.rule) if verdict.rule is not None else f"rules_default={self.default}"
        if verdict.action == "deny":
            raise ToolError(self._denied(verdict), category="denied", rule=rule)
        if verdict.action == "ask":
            action = action or f"run {line}"
            if confirm is None:
                why = f"the rule {verdict.rule} asks first" if verdict.rule else (
                    verdict.why or "commands no rule allows are asked about")
                raise Refused("run", line, f"run {line} needs the user's confirmation ({why}), "
                              "and nobody can be asked here (no confirm); a rule that allows "
                              "it would let it run", rule=rule)
            key = (f"commands the rule {verdict.rule.action}:{verdict.rule.text!r} matches"
                   if verdict.rule is not None else action)
            if answer_of(confirm(ConfirmAction(action, key=key))) == "no":
                raise Refused("run", line, rule=rule)

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
