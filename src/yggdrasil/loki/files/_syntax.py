"""Cheap syntax checks after a write, and the gate that warns or rejects.

``.py``, ``.json``, ``.toml``, ``.yaml``/``.yml`` are parsed after every write and edit.
With ``warn`` (the default) a file that no longer parses is written and the observation
ends with a ``WARNING:`` line; with ``reject`` the change is refused (ERROR with the
parser's line and message) when it would break a file that parsed before (or a new file):
a file that was already broken can still be edited step by step towards parsing.
"""

from __future__ import annotations

import json
import tomllib
import warnings
from collections.abc import Callable
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

    yaml.safe_load(text)


_CHECKS: dict[str, Callable[[str], object]] = {
    ".py": _python,
    ".json": json.loads,
    ".toml": tomllib.loads,
    ".yaml": _yaml,
    ".yml": _yaml,
}


def syntax_problem(rel: str, text: str) -> str | None:
    """A one-line parse error for formats that are cheap to check, else None."""
    suffix = rel[rel.rfind(".") :].lower() if "." in rel else ""
    check = _CHECKS.get(suffix)
    if check is None:
        return None
    try:
        check(text)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except json.JSONDecodeError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except Exception as exc:  # tomllib / yaml errors carry the position in their message
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


class SyntaxGate:
    """What a change that breaks a file's syntax gets: a warning, or a refusal."""

    def __init__(self, on_error: OnSyntaxError = "warn") -> None:
        if on_error not in ("warn", "reject"):
            raise ValueError(f"on_syntax_error must be 'warn' or 'reject', not {on_error!r}")
        self.reject = on_error == "reject"

    def check(self, rel: str, before: str | None, after: str) -> str:
        """A ``WARNING:`` line ('' when it parses); raises ToolError when rejecting.

        ``before`` is the text before the change (None for a new file)."""
        problem = syntax_problem(rel, after)
        if problem is None:
            return ""
        broke = before is None or syntax_problem(rel, before) is None
        if self.reject and broke:
            raise ToolError(f"{rel} would no longer parse ({problem}); nothing was changed "
                            "(this toolbox rejects changes that break a file's syntax)")
        if not broke:
            return f"WARNING: {rel} does not parse: {problem} (nor did it before this change)"
        return f"WARNING: {rel} no longer parses: {problem}"
