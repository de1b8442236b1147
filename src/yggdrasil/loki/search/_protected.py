"""Protected globs compiled for both engines: a ``files.Protection`` and ripgrep overrides.

The Python walk asks the :class:`~yggdrasil.loki.files.Protection` about each entry.
ripgrep is told with ``-g '!GLOB'`` overrides, which it checks before hidden and ignore
rules and logs in ``--debug`` (so both engines skip and count the same entries). An
override can only exclude, so an exception line (``!.env.example`` after ``.env.*``) is
folded into the lines before it: ``.env.*`` minus ``example`` becomes globs that match
every other name (``.env.[!/est]*``, ``.env.e[!/x]*``, ..., ``.env.example?*``). That is
exact for exceptions that are plain file names cut from ``*``-globs on names
(``PREFIX*SUFFIX``); a list with other exceptions has no ripgrep form, and search then
uses the Python engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..files import Protection
from ._globs import GlobError, IgnoreFile, IgnoreRule, glob_regex, parse_ignore_line, star_parts

_SPECIAL = frozenset("*?[]{}\\!/")


def protection(globs: Sequence[str]) -> Protection:
    """The ``Protection`` for gitignore-style ``globs``; ValueError names a bad one."""
    for glob in globs:
        if not isinstance(glob, str) or "\n" in glob or "\r" in glob:
            raise ValueError(f"protect glob {glob!r} must be one line of text")
        rule = parse_ignore_line(glob)
        if rule is None:
            continue
        try:
            glob_regex(rule.actual, literal_separator=True)
        except GlobError as exc:
            raise ValueError(f"protect glob {glob!r} is not a valid glob: {exc}") from None
    return Protection(tuple(globs), Rules(IgnoreFile("\n".join(globs))))


_MISS = object()
_MEMO_CAP = 100_000


class Rules:
    """The compiled lines, answering from a cache by name when every line matches names
    at any depth (``*.pem``, ``.aws/``: then the name alone decides), as the defaults do."""

    def __init__(self, lines: IgnoreFile) -> None:
        self.lines = lines
        self.by_name = all(r.actual.startswith("**/") and "/" not in r.actual[3:]
                           for r in lines.rules)
        self._memo: dict[tuple[str, bool], tuple[str, bool] | None] = {}
        self.ends, self.starts = _quick(lines.rules) if self.by_name else ((), ())

    def might_protect(self, name: str) -> bool:
        """False when no protecting line can match the name ``name`` (with ``by_name``):
        each such line is plain text and ``*``, and its name ends with the line's last
        text or starts with its first (``*.pem``, ``id_rsa*``). Two calls into C per
        name, where :meth:`decisive` is a call into RE2; True: ask :meth:`decisive`."""
        return self.ends is None or name.endswith(self.ends) or name.startswith(self.starts)

    def decisive(self, rel: str, is_dir: bool) -> tuple[str, bool] | None:
        if not self.by_name:
            return self.lines.decisive(rel, is_dir)
        key = (rel.rpartition("/")[2], is_dir)
        if not self.might_protect(key[0]):
            return None  # (a name no line protects: no call into RE2, no memo of it)
        hit = self._memo.get(key, _MISS)
        if hit is _MISS:
            if len(self._memo) > _MEMO_CAP:
                self._memo.clear()
            hit = self._memo[key] = self.lines.decisive(key[0], is_dir)
        return hit  # type: ignore[return-value]


def _quick(rules: Sequence[IgnoreRule]) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """(ends, starts) for :meth:`Rules.might_protect`; ends None: no quick answer."""
    ends: list[str] = []
    starts: list[str] = []
    for rule in rules:
        if rule.whitelist:
            continue  # an exception only ever unprotects
        parts = star_parts(rule.actual.removeprefix("**/"))
        if parts is None or len(parts) != 1:
            return None, ()
        pieces = parts[0]
        if pieces[-1]:
            ends.append(pieces[-1])
        elif pieces[0]:
            starts.append(pieces[0])
        else:
            return None, ()  # '*' or '*text*': any name may match
    return tuple(ends), tuple(starts)


@dataclass
class _Line:
    rule: IgnoreRule
    excepted: set[str] = field(default_factory=set)  # names cut out of a PREFIX*SUFFIX line
    dropped: bool = False


def rg_overrides(protect: Protection | None) -> list[str] | None:
    """``-g`` values that make ripgrep skip exactly the protected entries; None when the
    list has exceptions they cannot express (then the Python engine searches)."""
    if not protect:
        return []
    lines: list[_Line] = []
    for text in protect.globs:
        rule = parse_ignore_line(text)
        if rule is None:
            continue
        if not rule.whitelist:
            lines.append(_Line(rule))
            continue
        name = _plain_name(rule)
        if name is None or not all(_cut(line, name) for line in lines):
            return None
    return [f"!{glob}" for line in lines if not line.dropped for glob in _expand(line)]


def _plain_name(rule: IgnoreRule) -> str | None:
    """The file name an exception line names, when it is a plain name at any depth."""
    body = rule.actual.removeprefix("**/")
    if rule.actual == body or rule.only_dir or not body or _SPECIAL & set(body):
        return None
    return body


def _body(rule: IgnoreRule) -> str | None:
    """The name glob of a line matching names at any depth; None for paths."""
    body = rule.actual.removeprefix("**/")
    return None if rule.actual == body or "/" in body else body


def _cut(line: _Line, name: str) -> bool:
    """Take ``name`` out of what ``line`` protects; False when that has no glob form."""
    body = _body(line.rule)
    if body is None:
        return not _may_match_name(line.rule, name)
    if not _SPECIAL & set(body):
        line.dropped = line.dropped or body == name
        return True
    if body.count("*") != 1 or _SPECIAL & (set(body) - {"*"}):
        return not IgnoreFile(line.rule.original).match(name, False)  # no effect is fine
    prefix, suffix = body.split("*")
    if len(name) >= len(prefix) + len(suffix) and name.startswith(prefix) and name.endswith(suffix):
        line.excepted.add(name[len(prefix): len(name) - len(suffix)])
    return True


def _may_match_name(rule: IgnoreRule, name: str) -> bool:
    """Whether a path line could match a file called ``name`` (its last part is tested)."""
    last = rule.actual.rsplit("/", 1)[-1]
    return last in ("**", "*") or bool(IgnoreFile(last).match(name, False))


def _expand(line: _Line) -> list[str]:
    """The line's globs with its exceptions cut out. Written as ``**/...`` so that the
    ``/`` excluded from each class does not anchor the line to the root."""
    if not line.excepted:
        return [line.rule.original]
    body = _body(line.rule)
    assert body is not None
    prefix, suffix = body.split("*")
    tail = "/" if line.rule.only_dir else ""
    return [f"**/{prefix}{middle}{suffix}{tail}" for middle in _complement(line.excepted, "")]


def _complement(excepted: set[str], start: str) -> list[str]:
    """Globs (for the ``*`` of a line) matching every name with prefix ``start`` except
    ``excepted``: ``start`` itself, ``start`` + a char that leads to no exception + any,
    and the same below each char that does."""
    out = [] if start in excepted else [_literal(start)]
    nexts = sorted({e[len(start)] for e in excepted if len(e) > len(start) and e.startswith(start)})
    if nexts:
        out.append(f"{_literal(start)}[!/{_class(nexts)}]*")
    else:
        out.append(f"{_literal(start)}?*")
    for c in nexts:
        out += _complement(excepted, start + c)
    return out


def _literal(text: str) -> str:
    return "".join(f"\\{c}" if c in _SPECIAL else c for c in text)


def _class(chars: list[str]) -> str:
    """A class body in globset's syntax: no escapes; '-' last is a plain '-'."""
    return "".join(sorted(chars, key=lambda c: c == "-"))
