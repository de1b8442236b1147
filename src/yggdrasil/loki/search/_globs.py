"""Globs and ignore files, read the way ripgrep reads them.

The pure-Python search must skip exactly what ``rg`` skips, so this is a port of the
parts of ripgrep's ``globset`` and ``ignore`` crates (14.1.0) that decide it: the glob
syntax (``*``, ``?``, ``**``, ``[...]``, ``{a,b}``, ``\\`` escapes) and gitignore lines
(``!`` whitelists, ``/`` anchoring, trailing ``/`` for folders only, last match wins).
Globs are matched by RE2 (``_linear``), in time linear in the name, like globset.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, cast

from ._linear import LinearError, LinearPattern, compile_linear


class GlobError(ValueError):
    """A glob ripgrep would refuse; the message says why."""


class _Token(NamedTuple):
    kind: str  # lit, any, star, rprefix, rsuffix, rzom, class, alt
    text: str = ""  # the literal, or the class body already in regex form
    alts: tuple[list[_Token], ...] = ()


def _class_char(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else c


class _GlobParser:
    """globset's parser: tokens are pushed on the innermost alternative."""

    def __init__(self, glob: str) -> None:
        self.glob = glob
        self.i = 0
        self.prev: str | None = None
        self.cur: str | None = None
        self.stack: list[list[_Token]] = [[]]

    def bump(self) -> str | None:
        self.prev = self.cur
        self.cur = self.glob[self.i] if self.i < len(self.glob) else None
        self.i += 1
        return self.cur

    def peek(self) -> str | None:
        return self.glob[self.i] if self.i < len(self.glob) else None

    def push(self, kind: str, text: str = "") -> None:
        self.stack[-1].append(_Token(kind, text))

    def parse(self) -> list[_Token]:
        while (c := self.bump()) is not None:
            if c == "?":
                self.push("any")
            elif c == "*":
                self.star()
            elif c == "[":
                self.char_class()
            elif c == "{":
                if len(self.stack) > 1:
                    raise GlobError(f"glob {self.glob!r}: nested {{...}} groups are not allowed")
                self.stack.append([])
            elif c == "}":
                alts: list[list[_Token]] = []
                while len(self.stack) >= 2:
                    alts.append(self.stack.pop())
                self.stack[-1].append(_Token("alt", alts=tuple(alts)))
            elif c == "," and len(self.stack) > 1:
                self.stack.append([])
            elif c == "\\":
                if (nxt := self.bump()) is None:
                    raise GlobError(f"glob {self.glob!r} ends with a dangling backslash")
                self.push("lit", nxt)
            else:
                self.push("lit", c)
        if len(self.stack) > 1:
            raise GlobError(f"glob {self.glob!r}: unclosed {{...}} group (missing '}}')")
        return self.stack[0]

    def star(self) -> None:
        prev = self.prev
        if self.peek() != "*":
            self.push("star")
            return
        self.bump()
        if not self.stack[-1]:
            if self.peek() not in (None, "/"):
                self.push("star")
            else:
                self.push("rprefix")
                self.bump()
            return
        if prev != "/" and (len(self.stack) <= 1 or prev not in (",", "{")):
            self.push("star")
            return
        nxt = self.peek()
        if nxt is None or (nxt in ",}" and len(self.stack) >= 2):
            is_suffix = True
        elif nxt == "/":
            self.bump()
            is_suffix = False
        else:
            self.push("star")
            return
        last = self.stack[-1].pop()
        if last.kind in ("rprefix", "rsuffix"):
            self.stack[-1].append(last)
        else:
            self.push("rsuffix" if is_suffix else "rzom")

    def char_class(self) -> None:
        negated = self.peek() in ("!", "^")
        if negated:
            self.bump()
        ranges: list[list[str]] = []
        first, in_range = True, False
        while True:
            c = self.bump()
            if c is None:
                raise GlobError(f"glob {self.glob!r}: unclosed character class (missing ']')")
            if c == "]" and not first:
                break
            if c == "-" and not first:
                if in_range:
                    self._extend_range(ranges[-1], "-")
                    in_range = False
                else:
                    in_range = True
            elif in_range:
                self._extend_range(ranges[-1], c)
                in_range = False
            else:
                ranges.append([c, c])
            first = False
        if in_range:
            ranges.append(["-", "-"])
        body = "".join(
            _class_char(a) if a == b else f"{_class_char(a)}-{_class_char(b)}" for a, b in ranges
        )
        self.push("class", ("^" if negated else "") + body)

    def _extend_range(self, rng: list[str], c: str) -> None:
        if c < rng[0]:
            raise GlobError(f"glob {self.glob!r}: invalid range {rng[0]}-{c}")
        rng[1] = c


def _emit(tokens: list[_Token], sep: bool) -> str:
    out: list[str] = []
    for tok in tokens:
        if tok.kind == "lit":
            out.append(re.escape(tok.text))
        elif tok.kind == "any":
            out.append("[^/]" if sep else ".")
        elif tok.kind == "star":
            out.append("[^/]*" if sep else ".*")
        elif tok.kind == "rprefix":
            out.append("(?:/?|.*/)")
        elif tok.kind == "rsuffix":
            out.append("/.*")
        elif tok.kind == "rzom":
            out.append("(?:/|/.*/)")
        elif tok.kind == "class":
            out.append(f"[{tok.text}]")
        else:
            parts = [p for p in (_emit(alt, sep) for alt in tok.alts) if p]
            if parts:
                out.append(f"(?:{'|'.join(parts)})")
    return "".join(out)


def glob_regex(glob: str, *, literal_separator: bool) -> str:
    """The regex (no capturing groups, to be fully matched) that globset builds for ``glob``.

    With ``literal_separator``, ``*``, ``?`` never match ``/``; ``**`` as a whole path
    component matches any number of folders.
    """
    tokens = _GlobParser(glob).parse()
    if [t.kind for t in tokens] == ["rprefix"]:
        return ".*"
    return _emit(tokens, literal_separator)


# -- gitignore files ------------------------------------------------------------------


@dataclass(frozen=True)
class IgnoreRule:
    original: str
    actual: str  # the glob after gitignore's rewrites, matched against the relative path
    whitelist: bool
    only_dir: bool


def parse_ignore_line(line: str) -> IgnoreRule | None:
    """One gitignore line as ripgrep reads it; None for blanks and comments."""
    original = line
    if line.startswith("#"):
        return None
    if not line.endswith("\\ "):
        line = line.rstrip()
    if not line:
        return None
    whitelist = anchored = False
    if line.startswith(("\\!", "\\#")):
        line = line[1:]
        anchored = line.startswith("/")
    else:
        if line.startswith("!"):
            whitelist, line = True, line[1:]
        if line.startswith("/"):
            anchored, line = True, line[1:]
    only_dir = line.endswith("/")
    if only_dir:
        line = line[:-1]
        if line.endswith("\\"):
            line = line[:-1]
    actual = line
    if not anchored and "/" not in line and not (actual.startswith("**/") or actual == "**"):
        actual = f"**/{actual}"
    if actual.endswith("/**"):
        actual += "/*"
    return IgnoreRule(original, actual, whitelist, only_dir)


class IgnoreFile:
    """The rules of one ignore file; ``match`` says ignore (True), whitelist (False) or None."""

    def __init__(self, text: str) -> None:
        self.rules: list[IgnoreRule] = []
        patterns: list[str] = []
        for i, line in enumerate(text.split("\n")):
            line = line.removesuffix("\r")
            rule = parse_ignore_line(line.removeprefix("\ufeff") if i == 0 else line)
            if rule is None:
                continue
            try:
                patterns.append(glob_regex(rule.actual, literal_separator=True))
            except GlobError:
                continue  # ripgrep warns about the line and goes on without it
            self.rules.append(rule)
        # Reversed: the first alternative that matches is the last matching line.
        order = list(reversed(range(len(self.rules))))
        self._all = _alternation([patterns[i] for i in order])
        self._files = [i for i in order if not self.rules[i].only_dir]
        self._files_rx = _alternation([patterns[i] for i in self._files])
        self._order = order

    def __bool__(self) -> bool:
        return bool(self.rules)

    def match(self, rel: str, is_dir: bool) -> bool | None:
        rule = self.rule(rel, is_dir)
        return None if rule is None else not rule.whitelist

    def rule(self, rel: str, is_dir: bool) -> IgnoreRule | None:
        """The line that decides ``rel`` (the last one matching it), or None."""
        rx, order = (self._all, self._order) if is_dir else (self._files_rx, self._files)
        m = rx.fullmatch(rel) if rx is not None else None
        if m is None or m.lastindex is None:
            return None
        return self.rules[order[m.lastindex - 1]]

    def decisive(self, rel: str, is_dir: bool) -> tuple[str, bool] | None:
        """(the deciding line as written, True unless it is a ``!`` whitelist): the
        ``files.GlobRules`` a ``Protection`` asks."""
        rule = self.rule(rel, is_dir)
        return None if rule is None else (rule.original, not rule.whitelist)


def _alternation(patterns: list[str]) -> LinearPattern | None:
    if not patterns:
        return None
    return compile_linear("|".join(f"({p})" for p in patterns))


def glob_matcher(glob: str, *, literal_separator: bool, any_folder: bool = False) -> LinearPattern:
    """``glob`` compiled to match a whole name or path in linear time (RE2): a glob with
    many stars never backtracks. ``any_folder`` also lets it match after any ``.../``."""
    rx = glob_regex(glob, literal_separator=literal_separator)
    try:
        return compile_linear(f"(?:.*/)?(?:{rx})" if any_folder else rx)
    except LinearError as exc:
        raise GlobError(f"glob {glob!r} cannot be matched: {exc}") from None


def glob_test(glob: str, *, any_folder: bool = False) -> Callable[[str], object]:
    """A test of a whole root-relative path (truthy: it matches), ``*`` and ``?`` never
    crossing ``/``, as :func:`glob_matcher` with ``literal_separator`` (it raises the same
    GlobError). find tests every path of the tree, and a call into RE2 costs ~3 us, so
    the common globs, of plain text and ``*`` only (``*.py``, ``test_*``,
    ``src/*/conf*.yml``), are matched otherwise, in linear time too: ``*SUFFIX`` by
    ``str.endswith``; with at most one ``*`` per folder by Python's ``re`` (a star that
    cannot leave its folder, alone in it, backtracks over that folder's name at most);
    with more, by string operations folder by folder. Any other glob is matched by RE2."""
    rx = glob_matcher(glob, literal_separator=True, any_folder=any_folder)
    parts = star_parts(glob)
    if parts is None:
        return cast("Callable[[str], object]", rx.fullmatch)
    if any_folder and parts[0][:1] == [""] and len(parts) == len(parts[0]) == 1 + 1:
        return operator.methodcaller("endswith", parts[0][1])  # *SUFFIX (no '/' in it)
    if all(len(pieces) <= 2 for pieces in parts):
        regex = glob_regex(glob, literal_separator=True)
        return re.compile(f"(?:.*/)?(?:{regex})" if any_folder else regex, re.DOTALL).fullmatch
    if any_folder and len(parts) == 1:  # a name glob: the path's last part is matched
        return lambda rel: _stars_match(parts[0], rel.rpartition("/")[2])
    if any_folder:
        return cast("Callable[[str], object]", rx.fullmatch)
    last = len(parts) - 1

    def test(rel: str) -> bool:
        return rel.count("/") == last and all(
            _stars_match(part, name) for part, name in zip(parts, rel.split("/"), strict=True))
    return test


def glob_literal(glob: str) -> str:
    """The longest run of plain text in ``glob`` outside any ``{...}`` group: every path
    the glob matches holds it ("" when there is none)."""
    runs, run = [], ""
    for tok in _GlobParser(glob).parse():
        if tok.kind == "lit":
            run += tok.text
        else:
            runs.append(run)
            run = ""
    return max([*runs, run], key=len)


def star_parts(glob: str) -> list[list[str]] | None:
    """For a glob of literal characters and single-folder ``*`` only: per folder, the
    texts between its stars; None for any other glob."""
    parts: list[list[str]] = [[""]]
    for tok in _GlobParser(glob).parse():
        if tok.kind == "star":
            parts[-1].append("")
        elif tok.kind != "lit":
            return None
        elif tok.text == "/":
            parts.append([""])
        else:
            parts[-1][-1] += tok.text
    return parts


def _stars_match(pieces: list[str], name: str) -> bool:
    """Whether ``name`` is ``pieces`` joined by stars (each any text): the first piece
    starts it, the last ends it, the others are found in order between (leftmost is
    right when every wildcard is ``*``)."""
    if len(pieces) == 1:
        return name == pieces[0]
    first, last = pieces[0], pieces[-1]
    end = len(name) - len(last)
    if end < len(first) or not name.startswith(first) or not name.endswith(last):
        return False
    at = len(first)
    for piece in pieces[1:-1]:
        at = name.find(piece, at, end)
        if at < 0:
            return False
        at += len(piece)
    return True


def rebase_ignore_text(text: str, base: str) -> list[str]:
    """Lines of an ignore file in folder ``base`` rewritten to match from the root.

    Used for the ignore files above a search's start folder, which ripgrep is handed
    as one extra ignore file (see ``_search.parent_rules``).
    """
    out = []
    for line in IgnoreFile(text).rules:
        actual = f"{base}/{line.actual}" if base else line.actual
        out.append(f"{'!' if line.whitelist else ''}/{actual}{'/' if line.only_dir else ''}")
    return out
