"""Cheap syntax checks after a write, and the gate that warns or rejects.

``.py``, ``.json`` (JSON with comments for the files that allow them: ``tsconfig.json``,
``.vscode/*.json``, ``*.jsonc``...), ``.toml``, ``.yaml``/``.yml`` (every document, any tag)
are parsed after every write and edit, and so is every language a tree-sitter grammar
of code navigation reads, through the ``grammar`` check the toolbox hands the gate. With ``warn`` (the default) a file that no longer parses is written and the observation
ends with a ``WARNING:`` line; with ``reject`` the change is refused (ERROR with the
parser's line and message) when it would break a file that parsed before (or a new file,
when its format's own parser says so; a grammar only warns about a new file): a file
that was already broken can still be edited step by step towards parsing.

A change to a Python file given with the lines it changed (apply_patch's spans) is first
checked piece by piece: each changed region widened to the ``def``/``class`` around it
(its lines dedented), compiled alone. When every piece compiles, the change cannot have
broken the file (a definition that compiles alone compiles in any body around it) and
the rest of the file is not parsed. When one does not and the same regions of the old
text all compile alone, the change broke the file there (that error is reported);
otherwise the whole file is parsed, as for any write. A boundary is only taken where the text before it has an even number of each
kind of triple quote (not inside a docstring), so a ``def`` line quoted in a string is
not one.
"""

from __future__ import annotations

import bisect
import json
import re
import tomllib
import warnings
from collections.abc import Callable, Sequence
from functools import cache
from typing import Literal

from ..errors import ToolError

__all__ = ["OnSyntaxError", "SyntaxGate", "syntax_problem"]

OnSyntaxError = Literal["warn", "reject"]


def _python(text: str) -> None:
    with warnings.catch_warnings():  # SyntaxWarnings would go to the agent's stderr
        warnings.simplefilter("ignore")
        compile(text, "<file>", "exec", dont_inherit=True)


def _yaml(text: str) -> None:
    import yaml  # a dependency; imported here so that importing the toolbox stays cheap

    for _ in yaml.load_all(text, Loader=_any_tags_loader()):  # every document of a stream
        pass


@cache
def _any_tags_loader() -> type:
    """PyYAML's safe loader, blind to what a tag means: ``!Ref x`` (CloudFormation) is
    valid YAML, and every tagged node loads as None."""
    import yaml

    class AnyTags(yaml.SafeLoader):
        pass

    AnyTags.add_multi_constructor("", lambda loader, suffix, node: None)
    return AnyTags


def _jsonc(text: str) -> None:
    """JSON with // and /* */ comments and trailing commas (tsconfig, VS Code settings)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':  # a string, escapes and all
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ValueError("a /* comment is never closed")
            out.append("\n" * text.count("\n", i, j) or " ")  # line numbers stay true
            i = j + 2
        else:
            out.append(c)
            i += 1
    json.loads(_TRAILING_COMMA.sub(r"\1", "".join(out)))


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_JSONC_NAMES = re.compile(r"(^|/)((ts|js)config[^/]*\.json|[^/]*\.jsonc|\.(vscode|devcontainer)/[^/]*\.json"
                          r"|devcontainer\.json|\.eslintrc\.json|\.babelrc|\.swcrc)$")

_CHECKS: dict[str, Callable[[str], object]] = {
    ".py": _python,
    ".json": json.loads,
    ".toml": tomllib.loads,
    ".yaml": _yaml,
    ".yml": _yaml,
}

Grammar = Callable[[str, str], "str | None"]  # (rel, text) -> 'line N: ...' or None


def _own_parser(rel: str) -> bool:
    """Whether ``rel`` is checked by its format's own parser (not a grammar)."""
    suffix = rel[rel.rfind(".") :].lower() if "." in rel else ""
    return bool(_JSONC_NAMES.search(rel)) or suffix in _CHECKS


def syntax_problem(rel: str, text: str, grammar: Grammar | None = None) -> str | None:
    """A one-line parse error ('line N: message'), else None: the formats above by their
    own parsers, other files by ``grammar`` when given (None where it has no grammar)."""
    suffix = rel[rel.rfind(".") :].lower() if "." in rel else ""
    check = _jsonc if _JSONC_NAMES.search(rel) else _CHECKS.get(suffix)
    if check is None:
        return grammar(rel, text) if grammar is not None else None
    try:
        check(text)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except json.JSONDecodeError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except Exception as exc:
        mark = getattr(exc, "problem_mark", None)  # yaml's position is on the exception
        problem = getattr(exc, "problem", None)
        if mark is not None and problem:
            return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
        # tomllib's message ends with its position: "Invalid value (at line 2, column 5)"
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


class SyntaxGate:
    """What a change that breaks a file's syntax gets: a warning, or a refusal."""

    def __init__(self, on_error: OnSyntaxError = "warn", grammar: Grammar | None = None) -> None:
        if on_error not in ("warn", "reject"):
            raise ValueError(f"on_syntax_error must be 'warn' or 'reject', not {on_error!r}")
        self.reject = on_error == "reject"
        self.grammar = grammar

    def check(self, rel: str, before: str | None, after: str,
              changed: Sequence[tuple[int, int, int, int]] | None = None,
              lines: tuple[list[str], list[str]] | None = None) -> str:
        """A ``WARNING:`` line ('' when it parses); raises ToolError when rejecting.

        ``before`` is the text before the change (None for a new file); ``changed``, when
        known, the line ranges (a0, a1, b0, b1): lines [a0, a1) of ``before`` became
        [b0, b1) of ``after``; ``lines``, when the caller has them, both texts split on
        "\\n" (``str.split``'s lists: not split again here)."""
        problem: str | None = None
        broke = True
        if before is not None and changed is not None and rel.endswith(".py"):
            # each text split once (or not at all), its lines shared by every step below
            old, new = (_Source(before, lines[0]), _Source(after, lines[1])) if lines else (
                _Source(before), _Source(after))
            changed = _can_break(old.lines, new.lines, changed)
            problem = _piece_problem(new, [(b0, b1) for _, _, b0, b1 in changed])
            if problem == "":
                return ""
            if problem is not None and _piece_problem(
                    old, [(a0, a1) for a0, a1, _, _ in changed]) != "":
                problem = None  # the old pieces do not compile alone either: ask the file
        if problem is None:
            problem = syntax_problem(rel, after, self.grammar)
            if problem is None:
                return ""
            broke = before is None or syntax_problem(rel, before, self.grammar) is None
        # A grammar approximates its language (macros, dialects): its word alone refuses
        # no new file, only a change that breaks a file it read cleanly before.
        trusted = before is not None or _own_parser(rel)
        if self.reject and broke and trusted:
            raise ToolError(f"{rel} would no longer parse ({problem}); nothing was changed "
                            "(this toolbox rejects changes that break a file's syntax)")
        if not broke:
            return f"WARNING: {rel} does not parse: {problem} (nor did it before this change)"
        return f"WARNING: {rel} no longer parses: {problem}"


_DEFINES = ("def ", "class ", "async def ")


def _can_break(old: list[str], new: list[str], changed: Sequence[tuple[int, int, int, int]],
               ) -> list[tuple[int, int, int, int]]:
    """The changes that could break a file's syntax: not those that only add, remove or
    change comment lines and blank lines, or append a comment to a line (the tokenizer
    skips them, in code, and inside a string they are text), unless a line there or
    just before ends with a backslash (a continued line). ``old`` and ``new``: the lines
    of the text before and after."""
    kept = []
    for a0, a1, b0, b1 in changed:
        was, now = old[max(a0 - 1, 0) : a1], new[max(b0 - 1, 0) : b1]
        if any(line.rstrip().endswith("\\") for line in was + now) or not _same_code(
                old[a0:a1], new[b0:b1]):
            kept.append((a0, a1, b0, b1))
    return kept


def _same_code(was: list[str], now: list[str]) -> bool:
    """Whether ``now`` is ``was`` but for comment and blank lines and comments appended."""
    old = [line for line in was if _code(line)]
    new = [line for line in now if _code(line)]
    return len(old) == len(new) and all(
        b == a or (b.startswith(a) and b[len(a):].lstrip().startswith("#") and b[len(a):][:1].isspace())
        for a, b in zip(old, new, strict=True))


def _piece_problem(source: _Source, changed: Sequence[tuple[int, int]]) -> str | None:
    """'' when every changed region of ``source``, widened to the definition around it,
    compiles alone; the first one's error ('line N: ...', in the file's numbers) when one
    does not; None when only the whole file can tell."""
    if not changed:
        return ""
    lines, code_at = source.lines, source.code_at
    pieces: list[tuple[int, int, int]] = []
    for b0, b1 in sorted(changed):
        lo, hi = (max(b0 - 1, 0), min(b0 + 1, len(lines))) if b0 == b1 else (b0, b1)
        piece = _piece(lines, code_at, lo, hi)
        if pieces and piece[0] < pieces[-1][1]:  # overlapping: one piece around both
            first = pieces.pop()
            piece = (min(first[0], piece[0]), max(first[1], piece[1]), min(first[2], piece[2]))
        pieces.append(piece)
    for start, end, indent in pieces:
        body = lines[start:end]
        if indent:
            # a code line indented, but less than the piece: only the whole file tells
            if any(line[:1].isspace() and not line[:indent].isspace() and _code(line)
                   for line in body):
                return None
            body = [line[indent:] if line[:indent].isspace() else line for line in body]
        code = "\n".join(body)
        if start and "__future__" in code:
            return None  # a future import is only valid at the top of the file
        try:
            _python(code)
            continue
        except (SyntaxError, ValueError):
            pass
        try:  # again below as many empty lines as precede it: the file's numbers in messages
            _python("\n" * start + code)
        except SyntaxError as exc:
            if "nonlocal" in str(exc.msg):
                return None  # its binding may be in a function around the piece
            return f"line {exc.lineno}: {exc.msg}"
        except ValueError:
            return None
    return ""


def _piece(lines: list[str], code_at: Callable[[int], bool], lo: int,
           hi: int) -> tuple[int, int, int]:
    """(first line, end line, indentation) of the definition around lines [lo, hi): from
    the nearest def/class at or above ``lo`` indented no deeper than any changed line, to
    the next one after ``hi`` indented no deeper than it (its decorators left out)."""
    # lines inside a docstring, comments and blank lines say nothing of the structure:
    # when only they changed, the definition right around them will do
    deepest = min((_indent(lines[i]) for i in range(lo, hi)
                   if _code(lines[i]) and code_at(i)), default=1 << 30)
    start = _definition(lines, range(min(lo, len(lines) - 1), -1, -1), deepest, code_at)
    indent = _indent(lines[start]) if start is not None else 0
    end = _definition(lines, range(hi, len(lines)), indent, code_at)
    if end is None:
        end = len(lines)
    else:
        while end > hi and lines[end - 1].strip().startswith("@"):
            end -= 1
    if not start:
        start, indent = 0, 0
    return start, end, indent


def _definition(lines: list[str], order: range, deepest: int,
                code_at: Callable[[int], bool]) -> int | None:
    """The first line, in ``order``, that starts a def/class indented at most ``deepest``
    outside every triple-quoted string."""
    for i in order:
        line = lines[i]
        if "def " in line or "class " in line:  # most lines: no copy made to look further
            stripped = line.lstrip()
            if (stripped.startswith(_DEFINES) and len(line) - len(stripped) <= deepest
                    and code_at(i)):
                return i
    return None


def _code(line: str) -> bool:
    """Neither blank nor only a comment (whose depth means nothing to the parser)."""
    stripped = line.lstrip()
    return bool(stripped) and not stripped.startswith("#")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


class _Source:
    """A text split into lines once, for every check of one change; where its triple
    quotes are is found only when a piece is looked for."""

    def __init__(self, text: str, lines: list[str] | None = None) -> None:
        self.text = text
        self.lines = text.split("\n") if lines is None else lines
        self._quotes: _Quotes | None = None

    def code_at(self, i: int) -> bool:
        """Whether line ``i`` starts outside every triple-quoted string."""
        if self._quotes is None:
            self._quotes = _Quotes(self.text)
        return self._quotes.outside(i)


class _Quotes:
    """Where the triple quotes of a text are, to tell whether a line starts inside a
    triple-quoted string: after an odd number of either kind (one wrapped in the other
    quote character, a one-item string of it, is not counted). Each kind is kept as the
    numbers of the lines its quotes are on, in order."""

    def __init__(self, text: str) -> None:
        self.marks = [self._lines_of(text, self._find(text, '"""', "'")),
                      self._lines_of(text, self._find(text, "'''", '"'))]

    @staticmethod
    def _find(text: str, quote: str, other: str) -> list[int]:
        found: list[int] = []
        for match in re.finditer(quote, text):  # from the end of each, as str.find would
            pos = match.start()
            before = text[pos - 1 : pos] if pos else ""
            before = text[pos - 2 : pos - 1] if before == "r" and pos > 1 else before
            if not (before == other and text.startswith(other, pos + 3)):
                found.append(pos)
        return found

    @staticmethod
    def _lines_of(text: str, offsets: list[int]) -> list[int]:
        """The line number of each offset (in order): the newlines before it."""
        lines: list[int] = []
        line = prev = 0
        for pos in offsets:
            line += text.count("\n", prev, pos)
            lines.append(line)
            prev = pos
        return lines

    def outside(self, line: int) -> bool:
        """Whether line ``line`` starts after an even number of each kind: a quote before
        the start of the line is on an earlier line."""
        return all(bisect.bisect_left(marks, line) % 2 == 0 for marks in self.marks)
