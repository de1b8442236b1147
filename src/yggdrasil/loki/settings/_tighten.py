"""Which way is tighter: each setting's direction, judged by effect.

A project's file is written by whoever wrote the repository; until the user trusts it, it
may only make the settings stricter. Each field of ``Settings`` names its direction in its
declaration (``Setting(tighter=...)``), and the layering asks it three things about what an
untrusted layer asks for:

- ``admit(asked)``: the part of the layer's own value that may be taken at all (a protect
  list's negated globs and a rule list's allow rules are dropped, whatever they meet);
- ``tightens(old, new)``: whether the value it makes is as strict as the one below or
  stricter (otherwise the whole value is ignored);
- for the rules, where its rules go (``place``) and which of them stay once every layer
  has spoken (``Rules.settle``: an ask rule never shadows a default of deny).

A field with no safe direction (the engine's URL, MCP servers that run outside the fence,
variables for commands) is ``FIXED``: only the user, or a project the user trusts, sets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class Direction:
    """A field no untrusted layer may change (the base of every other direction)."""

    text = "ignored (only you, or a project you trust, set it)"
    dropped_as = ""  # what ``admit`` drops, in a warning ("allow rules")
    dropped_why = ""

    def describe(self) -> str:
        """What an untrusted project may do with the field, for the docs' table."""
        return self.text

    def admit(self, asked: Any) -> tuple[Any, list[str]]:
        """What of ``asked`` may be taken, and what was dropped (shown in a warning)."""
        return asked, []

    def tightens(self, old: Any, new: Any) -> bool:
        """True when ``new`` is as strict as ``old`` or stricter."""
        return bool(new == old)

    def place(self, below: list[Any], asked: list[Any]) -> list[Any] | None:
        """Where an untrusted layer's list items go among ``below`` (None: as the field's
        layering says)."""
        return None


class Free(Direction):
    """Any value is as safe as another (the tool-calling protocol)."""

    text = "taken as it is"

    def tightens(self, old: Any, new: Any) -> bool:
        return True


@dataclass(frozen=True)
class Ranked(Direction):
    """Choices from loosest to strictest (``off < auto < require``)."""

    order: tuple[str, ...]

    def describe(self) -> str:
        return "only stricter: " + " < ".join(f"`{o}`" for o in self.order)

    def tightens(self, old: Any, new: Any) -> bool:
        return self.order.index(new) >= self.order.index(old)


@dataclass(frozen=True)
class Switch(Direction):
    """A yes/no whose ``strict`` value is the tighter one."""

    strict: bool

    def describe(self) -> str:
        return f"only `{str(self.strict).lower()}`"

    def tightens(self, old: Any, new: Any) -> bool:
        return new == old or bool(new) == self.strict


class Fewer(Direction):
    """A limit: lower is stricter (jobs, step budget, message size)."""

    text = "only lower"

    def tightens(self, old: Any, new: Any) -> bool:
        return bool(new <= old)


class More(Direction):
    """A list of what is kept out: more entries are stricter (hidden paths)."""

    text = "only additions"

    def tightens(self, old: Any, new: Any) -> bool:
        return set(new) >= set(old)


class MoreGlobs(More):
    """Protected globs: additions only. A ``!`` line is an exception in gitignore syntax
    (the last matching line wins), so a negated glob from an untrusted layer would
    un-protect what the lines below protect: it is dropped, whatever it names."""

    text = "only additions; its `!` exceptions are dropped"
    dropped_as = "negated globs"
    dropped_why = ("an untrusted project may add protected globs, not exceptions ('!') that "
                   "would un-protect files")

    def admit(self, asked: Any) -> tuple[Any, list[str]]:
        if not isinstance(asked, (list, tuple)):
            return asked, []
        kept = [g for g in asked if not _negated(g)]
        return kept, [str(g) for g in asked if _negated(g)]


def _negated(glob: Any) -> bool:
    """Whether the gitignore line ``glob`` is an exception, read as the matcher reads it
    (a byte-order mark is dropped from a file's first line; ``\\!`` is a literal ``!``)."""
    if not isinstance(glob, str):
        return False
    from ..search import IgnoreFile

    rules = IgnoreFile(glob).rules  # one line: protection() refuses line breaks in a glob
    return any(rule.whitelist for rule in rules) or glob.lstrip("\ufeff").startswith("!")


class Hosts(Direction):
    """The network of commands: open > a host list > none; a host list tightens another
    only as a subset of it."""

    text = "only less: `false`, or a subset of your hosts"

    def tightens(self, old: Any, new: Any) -> bool:
        if new == old or new is False:
            return True
        if old is True:
            return not isinstance(new, bool)
        if isinstance(old, tuple) and isinstance(new, tuple):
            return set(new) <= set(old)
        return False


class Rules(Direction):
    """Command rules, first match wins. An untrusted layer's deny rules go before the
    rules below (they can only refuse more), its ask rules after them (a deny of the user's
    stands), and its allow rules are dropped. An ask rule decides only what no other rule
    matches, which the default would decide instead: where the default is deny, the ask
    would soften it, so it is dropped once every layer has spoken (``settle``)."""

    text = ("deny rules matched first, ask rules last (dropped where `rules_default` is "
            "`deny`), allow rules dropped")
    dropped_as = "allow rules"
    dropped_why = "an untrusted project may add deny and ask rules, not allow rules"

    def admit(self, asked: Any) -> tuple[Any, list[str]]:
        if not isinstance(asked, (list, tuple)):
            return asked, []
        kept = [r for r in asked if _action(r) != "allow"]
        return kept, [_words(r) for r in asked if _action(r) == "allow"]

    def tightens(self, old: Any, new: Any) -> bool:
        return True  # what admit and place let through only adds refusals

    def place(self, below: list[Any], asked: list[Any]) -> list[Any]:
        denies = [r for r in asked if _action(r) == "deny"]
        return [*denies, *below, *(r for r in asked if _action(r) != "deny")]

    @staticmethod
    def settle(rules: Sequence[Any], untrusted_tail: int, default: str) -> tuple[Any, list[str]]:
        """``rules`` without the untrusted ask rules at their end when the default they
        would shadow is deny; the rules dropped (as text)."""
        if default != "deny" or not untrusted_tail:
            return tuple(rules), []
        cut = len(rules) - untrusted_tail
        return tuple(rules[:cut]), [_words(r) for r in rules[cut:]]


def _action(rule: Any) -> Any:
    return rule[0] if isinstance(rule, (list, tuple)) and rule else None


def _words(rule: Any) -> str:
    return " ".join(map(str, rule[1:])) if isinstance(rule, (list, tuple)) else str(rule)


FIXED = Direction()
FREE = Free()
FEWER = Fewer()
MORE = More()
ON_IS_STRICTER = Switch(True)
OFF_IS_STRICTER = Switch(False)
