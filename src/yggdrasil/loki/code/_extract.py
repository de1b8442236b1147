"""Parse one file with tree-sitter and list what it defines, nested, in file order.

The grammars come from ``tree-sitter-language-pack`` (the ``code`` extra), imported on
first use only. A file always gives an answer: tree-sitter recovers from syntax errors,
so a broken file still yields the definitions it can see, plus the lines of the first
errors. No step recurses on the tree, and tree-sitter queries are not used: on a tree
nested tens of thousands of levels deep they take minutes, and with a progress callback
they crash the process. Instead a walk with an explicit list visits only the containers
of definitions, and nesting comes from byte ranges (a definition belongs to the nearest
one that contains it). Bounds: a large file the grammar is slow on is parsed only up to
a prefix; a walk visits at most ``_MAX_NODES`` nodes; definitions nested deeper than ``MAX_DEPTH``
and those past ``MAX_SYMBOLS`` are counted, not kept.
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import cache
from itertools import islice, repeat
from typing import Any, NamedTuple, overload

from ..results import definition_header
from ._languages import Language, language_for
from ._nodes import CONTAINERS
from ._rules import describe

__all__ = ["MAX_DEPTH", "MAX_SYMBOLS", "Outline", "Symbol", "Symbols", "extract",
           "grammars_available", "identifiers", "shallow", "syntax_error"]

MAX_DEPTH = 32  # nesting levels kept; deeper definitions are counted
MAX_SYMBOLS = 10_000  # definitions kept per file
_PARSE_WHOLE = 256 << 10  # files up to this size are parsed at once (at most ~2 s)
_PROBE = 64 << 10  # a larger file is first parsed on this prefix...
_PROBE_SECONDS = 0.1  # ...and only the prefix is kept when that took longer (< 640 KB/s)
_MAX_NODES = 2_000_000  # nodes one file's walk visits at most
_MAX_ERRORS = 3  # syntax-error lines reported per file
_GATE_LIMIT = 1 << 20  # characters: a larger file is not checked after a write (2 parses each)
# Identifier-like words; bytes >= 0x80 are UTF-8 letters of non-ASCII names (café).
_IDENT = re.compile(rb"[A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*")
_LEAF_KINDS = frozenset({"constant", "type", "macro", "prototype"})  # own no members
_DOC_TYPES = frozenset({"comment", "line_comment", "block_comment", "doc_comment",
                        "attribute_item", "inner_attribute_item", "annotation", "decorator"})


class Symbol(NamedTuple):
    """One definition, as shown; made on demand from its file's :class:`Outline`."""

    kind: str  # function, method, class, struct, interface, enum, constant, ...
    name: str
    scope: str  # dotted names of the definitions around it ('' at the top)
    signature: str  # the source between the name and the body, on one line
    line: int  # 1-based line of the name
    end: int  # last line of the definition
    first: int  # first line with its decorators, attributes and doc comments
    depth: int  # 0 at the top of the file

    @property
    def qualified(self) -> str:
        return f"{self.scope}.{self.name}" if self.scope else self.name

    def header(self, *, qualified: bool = False) -> str:
        """'kind name(signature)' as outline shows it ('kind Owner.name(...)' qualified)."""
        return definition_header(self.kind, self.name, self.scope, self.signature, qualified)


_COLUMNS = 5  # of Outline.ids: kind, name, scope, signature (string numbers), depth
_KIND, _NAME, _SCOPE, _SIGNATURE, _DEPTH = range(_COLUMNS)
_LINE, _END, _FIRST = range(3)  # of Outline.spans
_WHERE = {"kind": (False, _KIND), "name": (False, _NAME), "scope": (False, _SCOPE),
          "signature": (False, _SIGNATURE), "depth": (False, _DEPTH),
          "line": (True, _LINE), "end": (True, _END), "first": (True, _FIRST)}
Tables = tuple[list[str], list[str]]  # an outline's kinds and names; scopes and signatures
_MAX_STRINGS = 0xFFFF  # string numbers are 16 bits (a file keeps at most 3 x MAX_SYMBOLS + kinds)


@dataclass(frozen=True, slots=True)
class Outline:
    """What one parsed file defines, packed: a large tree holds a million definitions, so
    no object per definition is kept (a :class:`Symbol` is made when one is read). The
    distinct kinds and names are one string, each framed by NUL (a name is found with one
    ``find``); the distinct scopes and signatures, read only to show a definition or match
    an owner, are one zlib-compressed string; per definition, five 16-bit numbers (the
    numbers of its strings, its depth) and three for its lines (16-bit when the file's
    lines fit, else 32), column by column: 16-22 bytes a definition besides its distinct
    strings."""

    language: str
    lines: int
    strings: str  # '\0' + each distinct kind and name + '\0'
    starts: array[int]  # where each string starts in ``strings``, then len + 1 ('H' or 'I')
    more: bytes  # the distinct scopes and signatures, '\0'-separated, UTF-8, compressed
    ids: array[int]  # 'H': the _COLUMNS columns, one after the other
    spans: array[int]  # line, end and first, column after column ('H' or 'I')
    errors: tuple[int, ...] = ()  # first lines where the parser met a syntax error
    dropped: int = 0  # definitions not kept (too deep or past MAX_SYMBOLS)
    cut: int = 0  # the line where parsing stopped (a slow grammar), 0 when it did not

    @classmethod
    def of(cls, language: str, lines: int, symbols: Iterable[Symbol],
           errors: tuple[int, ...] = (), dropped: int = 0, cut: int = 0) -> Outline:
        """Pack ``symbols``. Raises ValueError when a string holds NUL or there are more
        distinct strings than 16 bits number (neither comes from a parse)."""
        numbers: dict[str, int] = {}
        others: dict[str, int] = {}
        columns: list[list[int]] = [[] for _ in range(_COLUMNS)]
        spans: list[list[int]] = [[], [], []]
        for s in symbols:
            columns[_KIND].append(numbers.setdefault(s.kind, len(numbers)))
            columns[_NAME].append(numbers.setdefault(s.name, len(numbers)))
            columns[_SCOPE].append(others.setdefault(s.scope, len(others)))
            columns[_SIGNATURE].append(others.setdefault(s.signature, len(others)))
            columns[_DEPTH].append(s.depth)
            spans[_LINE].append(s.line)
            spans[_END].append(s.end)
            spans[_FIRST].append(s.first)
        table, more = "\0".join(numbers), "\0".join(others)
        if table.count("\0") != max(0, len(numbers) - 1) or len(numbers) > _MAX_STRINGS \
                or more.count("\0") != max(0, len(others) - 1) or len(others) > _MAX_STRINGS:
            raise ValueError("a definition's strings hold NUL, or too many to number")
        starts = [1]
        for text in numbers:
            starts.append(starts[-1] + len(text) + 1)
        return cls(language, lines, f"\0{table}\0" if numbers else "\0", _numbers(starts),
                   zlib.compress(more.encode("utf-8", "surrogatepass")) if others else b"",
                   array("H", [n for column in columns for n in column]),
                   _numbers([n for column in spans for n in column]),
                   tuple(errors), dropped, cut)

    def __len__(self) -> int:
        return len(self.spans) // 3

    @property
    def symbols(self) -> Symbols:
        return Symbols(self)

    def held(self) -> int:
        """About how many bytes it keeps alive."""
        return (len(self.strings) + self.starts.itemsize * len(self.starts) + len(self.more)
                + 2 * len(self.ids) + self.spans.itemsize * len(self.spans) + 400)

    def table(self) -> list[str]:
        """Every distinct kind and name, by number."""
        return self.strings[1:-1].split("\0") if len(self.starts) > 1 else []

    def tables(self) -> Tables:
        """The kinds and names by number, and the scopes and signatures by number."""
        more = zlib.decompress(self.more).decode("utf-8", "surrogatepass") if self.more else ""
        return self.table(), more.split("\0")

    def number(self, text: str) -> int | None:
        """The number of the string ``text``; None when no definition holds it."""
        at = self.strings.find(f"\0{text}\0")
        return None if at < 0 else bisect_left(self.starts, at + 1)

    def column(self, field: str) -> array[int]:
        """One field of every definition: a string's number (kind, name, scope, signature)
        or the number itself (depth, line, end, first)."""
        spans, at = _WHERE[field]
        n = len(self)
        return (self.spans if spans else self.ids)[at * n:(at + 1) * n]

    def named(self, name: str) -> list[int]:
        """The positions of the definitions named exactly ``name``, in file order."""
        number = self.number(name)
        if number is None:
            return []
        ids, n = self.ids, len(self)
        start, stop = _NAME * n, (_NAME + 1) * n  # the name column
        found: list[int] = []
        with suppress(ValueError):
            at = ids.index(number, start, stop)
            while True:
                found.append(at - start)
                at = ids.index(number, at + 1, stop)
        return found

    def facts(self, where: Iterable[int]) -> Iterator[tuple[int, str, int, int]]:
        """(position, kind, depth, line) of the definitions at ``where`` (no Symbol made)."""
        n, ids, spans, strings, starts = len(self), self.ids, self.spans, self.strings, \
            self.starts
        depths = _DEPTH * n
        for j in where:
            kind = ids[j]
            yield j, strings[starts[kind]:starts[kind + 1] - 1], ids[depths + j], spans[j]

    def named_any(self, names: Iterable[str]) -> list[int]:
        """The positions of the definitions with any of these ``names``, in file order."""
        found: list[int] = []
        for name in names:
            found += self.named(name)
        return sorted(found)

    def least(self, j: int) -> int:
        """The length of the kind and name of definition ``j``."""
        n, ids, starts = len(self), self.ids, self.starts
        kind, name = ids[j], ids[n + j]
        return starts[kind + 1] - starts[kind] + starts[name + 1] - starts[name] - 2

    def names(self) -> set[str]:
        """The distinct names it defines."""
        table = self.table()
        return {table[k] for k in set(self.column("name"))}

    def kinds(self) -> list[str]:
        table = self.table()
        return [table[k] for k in self.column("kind")]

    def depths(self) -> array[int]:
        return self.column("depth")

    def symbol(self, j: int, tables: Tables | None = None) -> Symbol:
        n = len(self)
        if not 0 <= j < n:
            raise IndexError(j)
        ids, spans = self.ids, self.spans
        if tables is None:
            tables = self.tables()
        table, more = tables
        return Symbol(table[ids[j]], table[ids[n + j]], more[ids[2 * n + j]],
                      more[ids[3 * n + j]], spans[j], spans[n + j], spans[2 * n + j],
                      ids[4 * n + j])


def _numbers(values: list[int]) -> array[int]:
    """16-bit numbers when they fit (most files' lines and string offsets), else 32-bit."""
    return array("H" if max(values, default=0) <= 0xFFFF else "I", values)


class Symbols(Sequence[Symbol]):
    """An outline's definitions in file order, each made when read."""

    __slots__ = ("outline",)

    def __init__(self, outline: Outline) -> None:
        self.outline = outline

    def __len__(self) -> int:
        return len(self.outline)

    @overload
    def __getitem__(self, at: int) -> Symbol: ...

    @overload
    def __getitem__(self, at: slice) -> list[Symbol]: ...

    def __getitem__(self, at: int | slice) -> Symbol | list[Symbol]:
        if isinstance(at, slice):
            tables = self.outline.tables()
            return [self.outline.symbol(j, tables) for j in range(len(self))[at]]
        return self.outline.symbol(at + len(self) if at < 0 else at)

    def __iter__(self) -> Iterator[Symbol]:
        o = self.outline
        n = len(o)
        if not n:
            return
        (table, more), ids, spans = o.tables(), o.ids, o.spans
        columns = [ids[k * n:(k + 1) * n] for k in range(_COLUMNS)]
        lines = [spans[k * n:(k + 1) * n] for k in range(3)]
        for kind, name, scope, signature, depth, line, end, first in zip(
                *columns, *lines, strict=True):
            yield Symbol(table[kind], table[name], more[scope], more[signature], line, end,
                         first, depth)


_CALLABLES = frozenset({"function", "method"})


def shallow(outline: Outline) -> list[bool]:
    """For each definition: is it part of the file's API, i.e. not inside a function and
    inside at most one type (namespaces and modules do not count)? A method is; a
    function's local helper, or a class nested in a class, is not."""
    flags: list[bool] = []
    open_: list[tuple[int, str]] = []  # (depth, kind) of the definitions around this one
    for depth, kind in zip(outline.depths(), outline.kinds(), strict=True):
        while open_ and open_[-1][0] >= depth:
            open_.pop()
        flags.append(not any(k in _CALLABLES for _, k in open_)
                     and sum(k in CONTAINERS for _, k in open_) <= 1)
        open_.append((depth, kind))
    return flags


class _Grammars(threading.local):
    """tree-sitter parsers are not thread-safe: one per grammar per thread."""

    def __init__(self) -> None:
        self.parsers: dict[str, Any] = {}


_local = _Grammars()


@cache
def grammars_available() -> bool:
    try:
        import tree_sitter  # noqa: F401
        import tree_sitter_language_pack  # noqa: F401
    except ImportError:
        return False
    return True


def _parser(lang: Language) -> Any:
    parser = _local.parsers.get(lang.name)
    if parser is None:
        from tree_sitter_language_pack import get_parser

        parser = _local.parsers[lang.name] = get_parser(lang.name)  # type: ignore[arg-type]
    return parser


def extract(lang: Language, src: bytes) -> Outline:
    """Parse ``src`` (UTF-8 bytes) as ``lang`` and list its definitions."""
    tree, cut = _parse(lang, src)
    root = tree.root_node
    nodes = sorted(_candidates(lang, root), key=lambda n: (n.start_byte, -n.end_byte))
    symbols, dropped = _nest(lang, nodes, src)
    errors = _error_lines(root) if root.has_error else ()
    return Outline.of(lang.name, src.count(b"\n") + (not src.endswith(b"\n")), symbols,
                      errors, dropped, cut)


def _parse(lang: Language, src: bytes) -> tuple[Any, int]:
    """The syntax tree, and the line where parsing was cut (0: it was not).

    Some inputs make a grammar slow (``a<a<a<...`` costs C++'s grammar ~7 s per MB),
    and tree-sitter 0.26 has no timeout (its chunked-input mode, which could stop early,
    leaks every chunk). So a large file is first parsed on a ``_PROBE``-byte prefix; when
    that is slower than ``_PROBE_SECONDS``, the prefix's tree is the answer. Slower in this
    thread's CPU time: on a busy machine the wall clock judged ordinary files slow.
    """
    parser = _parser(lang)
    if len(src) <= _PARSE_WHOLE:
        return parser.parse(src), 0
    started = time.thread_time()
    prefix = parser.parse(src[:_PROBE])
    if time.thread_time() - started > _PROBE_SECONDS:
        return prefix, src.count(b"\n", 0, _PROBE) + 1
    return parser.parse(src), 0


def _candidates(lang: Language, root: Any) -> list[Any]:
    """The nodes that may define something: every node of a ``defs`` type among the
    children of the root and of ``containers`` (walked with a list, not recursion;
    expressions, where nothing is defined, are never entered). Types in ``top_only``
    (a Python module's constants) count only as the root's own children."""
    found: list[Any] = []
    pending: list[Any] = []
    for node in root.named_children:
        if node.type in lang.defs:
            found.append(node)
        if node.type in lang.containers:
            pending.append(node)
    inner = {t for t in lang.defs if t not in lang.top_only}
    visited = 0
    while pending and visited < _MAX_NODES:
        children = pending.pop().named_children
        visited += len(children)
        for node in children:
            kind = node.type
            if kind in inner:
                found.append(node)
            if kind in lang.containers:
                pending.append(node)
    return found


def _nest(lang: Language, nodes: list[Any], src: bytes) -> tuple[list[Symbol], int]:
    kinds = dict(lang.defs)
    symbols: list[Symbol] = []
    stack: list[tuple[int, Symbol]] = []  # (end byte, symbol) of the open definitions
    dropped = 0
    for node in nodes:
        while stack and stack[-1][0] < node.end_byte:
            stack.pop()
        if len(stack) >= MAX_DEPTH or len(symbols) >= MAX_SYMBOLS:
            dropped += 1
            continue
        found = describe(lang.name, kinds, node, src)
        if found is None:
            continue
        parent = stack[-1][1] if stack else None
        kind = found.kind
        if kind == "function" and parent is not None and parent.kind in CONTAINERS:
            kind = "method"
        scope = ".".join(p for p in (parent.qualified if parent else "", found.scope) if p)
        line = found.name_node.start_point[0] + 1
        symbol = Symbol(kind, found.name, scope, found.signature or "", line,
                        _end_line(node, line), _first_line(lang, node), len(stack))
        symbols.append(symbol)
        if kind not in _LEAF_KINDS:
            stack.append((node.end_byte, symbol))
    return symbols, dropped


def _end_line(node: Any, line: int) -> int:
    row, column = node.end_point
    return max(line, row if column == 0 and row > node.start_point[0] else row + 1)


def _first_line(lang: Language, node: Any) -> int:
    """The first line of the definition with what belongs to it: decorators, an
    ``export``/``template<>`` wrapper, attributes and doc comments right above it."""
    top = node
    if top.type in ("variable_declarator", "type_spec", "const_spec") and top.parent is not None:
        top = top.parent  # the declaration that holds it
    while top.parent is not None and top.parent.type in lang.wrappers:
        top = top.parent
    first = top.start_point[0]
    before = top.prev_named_sibling
    while before is not None and before.type in _DOC_TYPES and before.end_point[0] >= first - 1:
        first = before.start_point[0]
        before = before.prev_named_sibling
    return first + 1


def identifiers(src: bytes) -> tuple[str, bytes]:
    """Every distinct identifier-like word of ``src``, in order of first use, as one string
    ('\\nname\\n...\\n', so a name is found with a substring test), and how often each
    was used (capped at 255). Comments and strings count: a mention is a use."""
    counts = Counter(_IDENT.findall(src))
    names = b"\n".join(counts).decode("utf-8", "replace")
    return f"\n{names}\n" if names else "\n", bytes(map(min, counts.values(), repeat(255)))


def _error_lines(root: Any) -> tuple[int, ...]:
    """Lines of the first syntax errors."""
    first = islice(_error_nodes(root), _MAX_ERRORS)
    return tuple(sorted({node.start_point[0] + 1 for node in first}))


def _error_nodes(root: Any) -> Iterator[Any]:
    """The ERROR and MISSING nodes in file order, descending only into subtrees that hold
    one, and looking at no more than 100,000 nodes (enough for the first errors of any
    real file)."""
    pending = [root]
    budget = 100_000
    while pending and budget > 0:
        budget -= 1
        node = pending.pop()
        if node.type == "ERROR" or node.is_missing:
            yield node
            continue
        pending.extend(c for c in reversed(node.children) if c.has_error or c.is_missing)


def syntax_error(name: str, text: str) -> str | None:
    """The first syntax error a grammar finds in ``text``, the content of a file called
    ``name``, as 'line N: ...'; None when it parses, when no grammar reads such a file,
    when tree-sitter is not installed, or when the file is too slow to parse whole (the
    syntax gate then says nothing rather than guess)."""
    lang = language_for(name.rpartition("/")[2])
    if lang is None or len(text) > _GATE_LIMIT or not grammars_available():
        return None
    src = text.encode("utf-8", "replace")  # a lone surrogate is one byte of noise here
    tree, cut = _parse(lang, src)
    if cut or not tree.root_node.has_error:
        return None
    node = next(_error_nodes(tree.root_node), None)
    if node is None:
        return None
    line = node.start_point[0] + 1
    if node.is_missing:
        return f"line {line}: missing {node.type!r} ({lang.name} grammar)"
    near = src[node.start_byte : node.start_byte + 40].split(b"\n", 1)[0].strip()
    shown = near.decode("utf-8", "replace")
    return f"line {line}: syntax error near {shown!r} ({lang.name} grammar)"
