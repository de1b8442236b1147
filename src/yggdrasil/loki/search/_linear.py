"""Regexes matched in linear time: RE2 (google-re2), never a backtracking engine.

Globs (find's pattern, grep's glob, ignore files) and the Python engine's grep patterns
come from the model or from files in the root. Python's ``re`` backtracks: ``*a*a*a*a*a*b``
against a name of 120 ``a``s, or ``^(\\w+\\s?)+$`` against a long line, runs for hours.
RE2 (like ripgrep's Rust regex, which it inspired) never backtracks: time grows with the
text, not exponentially with the pattern, and patterns that need backtracking
(look-around, backreferences) are refused, as ripgrep refuses them.
"""

from __future__ import annotations

from typing import Any

import re2

LinearPattern = Any  # a compiled re2 pattern (re2 ships no type hints)


class LinearError(ValueError):
    """A pattern RE2 refuses; the message is RE2's reason."""


def compile_linear(pattern: str | bytes, *, ignore_case: bool = False) -> LinearPattern:
    """``pattern`` compiled by RE2 (UTF-8; a bytes pattern matches bytes). A str pattern
    also matches text that cannot be UTF-8 (a file name of stray bytes, which Python keeps
    as lone surrogates): those characters are matched as U+FFFD, which ``*`` matches."""
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.max_mem = 64 << 20  # a huge pattern fails to compile instead of growing
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else "RE2 refused it"
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise LinearError(str(detail)) from None
    return compiled if isinstance(pattern, bytes) else _AnyText(compiled)


class _AnyText:
    """A str pattern that takes any str: RE2 must encode the text as UTF-8, and a lone
    surrogate (a stray byte of a file name) cannot be; such text is matched with U+FFFD in
    its place (the common case costs one failed attempt only for such names)."""

    __slots__ = ("_rx",)

    def __init__(self, rx: Any) -> None:
        self._rx = rx

    def fullmatch(self, text: str) -> Any:
        return self._call(self._rx.fullmatch, text)

    def match(self, text: str) -> Any:
        return self._call(self._rx.match, text)

    def search(self, text: str) -> Any:
        return self._call(self._rx.search, text)

    @staticmethod
    def _call(method: Any, text: str) -> Any:
        try:
            return method(text)
        except UnicodeEncodeError:
            return method(text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
