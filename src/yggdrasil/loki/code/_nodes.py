"""Reading a definition node: the common rule, and the helpers the exceptions share.

Most nodes follow one rule (:func:`plain`): the name is the ``name`` field (or the name
inside C's declarators), the body is the ``body`` field, and the signature is the
source between the two (``(a, b) -> int``, ``(Base)``, `` extends Base``), on one line.
The per-language exceptions are in ``_rules``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["CONTAINERS", "FUNCTION_VALUES", "UPPER", "Described", "Node", "at_top", "body_of",
           "child_of_type", "function_value", "has_function_declarator", "has_token", "plain",
           "signature", "split_qualified", "text_of"]

Node = Any  # tree_sitter.Node; typed loosely so importing this module needs no tree-sitter

# A function directly inside one of these is a method.
CONTAINERS = frozenset({"class", "struct", "interface", "trait", "impl", "object", "enum",
                        "record", "protocol", "extension", "union", "actor"})
_BODY_TYPES = frozenset({"class_body", "enum_class_body", "function_body", "protocol_body",
                         "block", "compound_statement", "declaration_list", "statement_block",
                         "field_declaration_list", "template_body", "body_statement"})
_DECLARATOR_NAMES = frozenset({"identifier", "field_identifier", "type_identifier",
                               "qualified_identifier", "destructor_name", "operator_name",
                               "primitive_type"})
_QUALIFIED = frozenset({"qualified_identifier", "scope_resolution", "dot_index_expression",
                        "method_index_expression", "member_expression", "scoped_identifier"})
FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "generator_function",
                              "function_definition"})
UPPER = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")
MAX_SIGNATURE = 200
MAX_VALUE = 80  # a constant's "signature" is its value: shorter
_VALUE_KINDS = frozenset({"constant", "type", "macro"})


@dataclass(slots=True)
class Described:
    kind: str
    name: str
    name_node: Node  # its line is the definition's line; the signature starts after it
    scope: str = ""  # a container named in the definition itself: Go receiver, C++ A::f
    body: Node | None = None
    signature: str | None = None  # None: the source between name and body
    params: Node | None = None  # where the signature starts when not right after the name


# -- the common rule ------------------------------------------------------------------


def plain(node: Node, kind: str, src: bytes, name_node: Node | None = None
           ) -> Described | None:
    name_node = name_node or node.child_by_field_name("name") or declared_name(node)
    if name_node is None or not kind:
        return None
    text = text_of(name_node, src)
    scope = ""
    if name_node.type in _QUALIFIED and kind not in ("namespace", "module"):
        scope, text = split_qualified(text)
        if name_node.type == "qualified_identifier" and kind == "function" and scope:
            kind = "method"  # C++: void Shape::area() {...}
    return Described(kind, text, name_node, scope, body_of(node))


def body_of(node: Node) -> Node | None:
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    for child in reversed(node.named_children):
        if child.type in _BODY_TYPES:
            return child
    last = node.children[-1] if node.child_count else None
    return last if last is not None and last.type == "end" else None  # Ruby, Lua: no body


def declared_name(node: Node) -> Node | None:
    """C/C++: the name inside ``declarator`` chains (pointer, function, parenthesized)."""
    current = node.child_by_field_name("declarator")
    for _ in range(16):  # declarators nest only a few levels in real code
        if current is None or current.type in _DECLARATOR_NAMES:
            return current
        inner = current.child_by_field_name("declarator")
        if inner is None:
            inner = next((c for c in current.named_children if c.type in _DECLARATOR_NAMES
                          or c.type.endswith("declarator")), None)
        current = inner
    return None


def has_function_declarator(node: Node) -> bool:
    current = node.child_by_field_name("declarator")
    for _ in range(16):
        if current is None:
            return False
        if current.type == "function_declarator":
            return True
        current = current.child_by_field_name("declarator")
    return False


def split_qualified(text: str) -> tuple[str, str]:
    parts = [p for p in re.split(r"::|[.:\\]", _TEMPLATE_ARGS.sub("", text)) if p]
    if not parts:
        return "", text
    scope = [p for p in parts[:-1] if p != "prototype"]
    return ".".join(scope), parts[-1]


def signature(node: Node, found: Described, src: bytes) -> str:
    """The source between the name and the body, on one line: '(a, b) -> int'."""
    start = found.params.start_byte if found.params is not None else found.name_node.end_byte
    end = found.body.start_byte if found.body is not None else node.end_byte
    for child in node.children:  # a comment before the body is not the signature
        if start <= child.start_byte < end and child.type.endswith("comment"):
            end = child.start_byte
            break
    if end <= start:
        return ""
    limit = MAX_VALUE if found.kind in _VALUE_KINDS else MAX_SIGNATURE
    raw = src[start : min(end, start + limit * 8)]  # a few lines more than shown, not a body
    text = clean_signature(raw.decode("utf-8", "replace"), limit)
    return text if found.kind in _VALUE_KINDS else text.removeprefix("= ")


def clean_signature(text: str, limit: int = MAX_SIGNATURE) -> str:
    text = " ".join(text.split())
    if "( " in text or "[ " in text:
        text = re.sub(r"([(\[]) ", r"\1", text)
    if " )" in text or " ]" in text:
        text = re.sub(r",? ([)\]])", r"\1", text)
    while text and (text.endswith(("{", ":", "=", ";", "=>")) and not text.endswith("::")):
        text = text[:-2].rstrip() if text.endswith("=>") else text[:-1].rstrip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def text_of(node: Node, src: bytes) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", "replace")


def at_top(node: Node) -> bool:
    return node.parent is not None and node.parent.type in ("source_file", "compilation_unit")


def child_of_type(node: Node, *types: str) -> Node | None:
    return next((c for c in node.named_children if c.type in types), None)


def has_token(node: Node, *words: str) -> bool:
    return any(not c.is_named and c.type in words for c in node.children)


def function_value(kind: str, name: str, name_node: Node, scope: str, value: Node) -> Described:
    """``f = (a) => ...``: the signature is the value's, from its parameters to its body."""
    params = (value.child_by_field_name("parameters")
              or value.child_by_field_name("parameter") or value)
    return Described(kind, name, name_node, scope, body_of(value), params=params)
