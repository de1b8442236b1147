"""Cheap syntax checks after a write, and the gate that warns or rejects.

``.py``, ``.json`` (JSON with comments for the files that allow them: ``tsconfig.json``,
``.vscode/*.json``, ``*.jsonc``...), ``.toml``, ``.yaml``/``.yml`` (every document, any tag)
are parsed after every write and edit, and so is every language a tree-sitter grammar
of code navigation reads, through the ``grammar`` check the toolbox hands the gate. With ``warn`` (the default) a file that no longer parses is written and the observation
ends with a ``WARNING:`` line; with ``reject`` the change is refused (ERROR with the
parser's line and message) when it would break a file that parsed before (or a new file,
when its format's own parser says so; a grammar only warns about a new file): a file
that was already broken can still be edited step by step towards parsing.
"""

from __future__ import annotations

import json
import re
import tomllib
import warnings
from collections.abc import Callable
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

    def check(self, rel: str, before: str | None, after: str) -> str:
        """A ``WARNING:`` line ('' when it parses); raises ToolError when rejecting.

        ``before`` is the text before the change (None for a new file)."""
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
