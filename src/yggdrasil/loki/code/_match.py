"""What ``find_symbol`` and ``read_file(symbol=...)`` look for: a name, a dotted path
(``Greeter.greet``, also ``Greeter::greet`` or ``Greeter#greet``) or a glob (``test_*``),
optionally of one kind; and which files may hold it, from their words alone.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..errors import ToolError
from ._extract import Symbol

__all__ = ["KINDS", "KindName", "NameQuery", "kinds_for"]

KINDS = ("class", "struct", "interface", "trait", "enum", "union", "record", "object",
         "protocol", "extension", "actor", "impl", "type", "module", "namespace", "function",
         "method", "prototype", "property", "constant", "macro")
_CLASSES = frozenset({"class", "struct", "interface", "trait", "enum", "union", "record",
                      "object", "protocol", "extension", "actor"})
_GROUPS = {
    "class": _CLASSES,
    "type": _CLASSES | {"type", "impl"},
    "function": frozenset({"function", "method", "prototype"}),
    "module": frozenset({"module", "namespace"}),
}
_ALIASES = {"def": "function", "func": "function", "fn": "function", "fun": "function",
            "procedure": "function", "sub": "function", "const": "constant", "var": "constant",
            "typedef": "type", "alias": "type", "package": "module", "mod": "module",
            "namespace": "module"}
if TYPE_CHECKING:
    KindName = str
else:  # what kind= takes, and so the schema's enum: a kind or a synonym of one
    KindName = Literal[tuple(dict.fromkeys((*KINDS, *_ALIASES)))]
_SEPARATORS = re.compile(r"::|[.#]")
_WORD = re.compile(r"[A-Za-z0-9_\x80-\U0010ffff]+")
_GLOB_CHARS = frozenset("*?[")
MAX_NAME = 200


def kinds_for(kind: str | None) -> frozenset[str] | None:
    """The kinds a ``kind=`` filter keeps (None: all); forgiving of plurals and synonyms.

    The schema lists ``KindName`` as an enum and the toolbox forgives case and plurals
    before checking it; this check stays as forgiving for a caller that skips the schema.
    """
    word = (kind or "").strip().lower()
    if not word:
        return None
    word = _ALIASES.get(word, word)
    if word not in KINDS and word.endswith("s") and word[:-1] in KINDS:
        word = word[:-1]
    if word.endswith("es") and word[:-2] in KINDS:
        word = word[:-2]
    if word not in KINDS:
        raise ToolError(f"kind {kind!r} is not one of: {', '.join(KINDS)} (or empty for any)")
    return _GROUPS.get(word, frozenset({word}))


@dataclass(frozen=True)
class NameQuery:
    """A parsed ``name`` argument; ``match`` says how well a definition fits it."""

    text: str
    parts: tuple[str, ...]  # 'Greeter.greet' -> ('Greeter', 'greet')
    kinds: frozenset[str] | None
    is_glob: bool

    @classmethod
    def parse(cls, name: str, kind: str | None = None) -> NameQuery:
        text = name.strip()
        if not text:
            raise ToolError("name is empty; give a name (main), a dotted name (Greeter.greet) "
                            "or a glob (test_*)")
        if len(text) > MAX_NAME:
            raise ToolError(f"name is {len(text)} characters long; a name is at most {MAX_NAME}")
        parts = tuple(p for p in _SEPARATORS.split(text) if p) or (text,)
        return cls(text, parts, kinds_for(kind), _is_glob(text))

    @property
    def word(self) -> str:
        """The word ``in_bytes`` looks for ('' : any file may hold it)."""
        return _needle(self.parts[-1], self.is_glob)

    def in_names(self, names: str) -> bool:
        """Whether a parsed file may define it: its last part must be one of its words."""
        return _word_regex(self.parts[-1], self.is_glob).search(names) is not None

    def in_bytes(self, data: bytes) -> bool:
        """The same test on a file's bytes, looser and quick: its longest run of letters
        (of the glob's literal text) occurs in the file, ignoring case."""
        needle = self.word
        if needle.isascii():
            return needle.encode("ascii") in data.lower()
        return needle in data.decode("utf-8", "replace").lower()  # É folds only as text

    def match(self, symbol: Symbol) -> int | None:
        """0 for a match, 1 for a match ignoring case, None for none; kind must fit."""
        if self.kinds is not None and symbol.kind not in self.kinds:
            return None
        names = (*_SEPARATORS.split(symbol.scope), symbol.name) if symbol.scope else (symbol.name,)
        if len(names) < len(self.parts):
            return None
        tail = names[len(names) - len(self.parts):]
        if all(_fits(want, have, self.is_glob, False) for want, have in zip(self.parts, tail, strict=True)):
            return 0
        if all(_fits(want, have, self.is_glob, True) for want, have in zip(self.parts, tail, strict=True)):
            return 1
        return None


def _is_glob(text: str) -> bool:
    """'*' and '[...]' make a glob; so does '?', except at the end of a name: Ruby's
    ``empty?`` is a name."""
    return "*" in text or "[" in text or "?" in text.rstrip("?")


def _fits(want: str, have: str, glob: bool, fold: bool) -> bool:
    if fold:
        want, have = want.lower(), have.lower()
    return fnmatch.fnmatchcase(have, want) if glob else want == have


def _needle(part: str, glob: bool) -> str:
    text = re.sub(r"\[[^\]]*\]?|[*?]", " ", part) if glob else part
    words = _WORD.findall(text)
    return max(words, key=len).lower() if words else ""


_regexes: dict[tuple[str, bool], re.Pattern[str]] = {}


def _word_regex(part: str, glob: bool) -> re.Pattern[str]:
    """A line regex over an entry's names ('\\nword\\n...'), ignoring case: a superset
    of the files that can define ``part``. A name with other characters (Ruby's
    ``empty?``, C++'s ``operator==``) needs its longest word; a glob, its pattern."""
    key = (part, glob)
    found = _regexes.get(key)
    if found is None:
        if glob and all(c in _GLOB_CHARS or c == "]" or _WORD.fullmatch(c) for c in part):
            body = fnmatch.translate(part).removeprefix("(?s:").removesuffix(")\\Z")
            found = re.compile(f"^(?:{body})$", re.IGNORECASE | re.MULTILINE)
        else:
            words = _WORD.findall(part.replace("*", " ").replace("?", " "))
            word = max(words, key=len) if words else ""
            found = re.compile(f"^{re.escape(word)}$" if word else "", re.I | re.M)
        if len(_regexes) > 1000:
            _regexes.clear()
        _regexes[key] = found
    return found
