"""What one definition node defines: its kind, name, explicit scope and signature.

The walk in ``_extract`` hands over every node of a type ``_languages`` lists;
:func:`describe` reads each one, or drops it (a C declaration that declares no function,
a JavaScript ``const`` inside a function, a Python assignment inside a class).
Most nodes follow one rule: the name is the ``name`` field, the body is the ``body``
field, and the signature is the source between the two (``(a, b) -> int``, ``(Base)``,
`` extends Base``). The rest are the per-language exceptions below.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CONTAINERS", "Described", "describe"]

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
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "generator_function",
                              "function_definition"})
_UPPER = re.compile(r"[A-Z][A-Z0-9_]*\Z")
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


def describe(lang: str, kinds: Mapping[str, str], node: Node, src: bytes) -> Described | None:
    """The definition ``node`` makes (``src`` is the parsed source), or None if it makes none."""
    rule = _RULES.get((lang, node.type)) or _RULES.get(("*", node.type))
    kind = kinds.get(node.type, "")
    found = rule(node, kind, src) if rule else _plain(node, kind, src)
    if found is None or not found.name:
        return None
    if found.signature is None:
        found.signature = signature(node, found, src)
    return found


# -- the common rule ------------------------------------------------------------------


def _plain(node: Node, kind: str, src: bytes, name_node: Node | None = None
           ) -> Described | None:
    name_node = name_node or node.child_by_field_name("name") or _declared_name(node)
    if name_node is None or not kind:
        return None
    text = _text(name_node, src)
    scope = ""
    if name_node.type in _QUALIFIED and kind not in ("namespace", "module"):
        scope, text = _split_qualified(text)
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


def _declared_name(node: Node) -> Node | None:
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


def _has_function_declarator(node: Node) -> bool:
    current = node.child_by_field_name("declarator")
    for _ in range(16):
        if current is None:
            return False
        if current.type == "function_declarator":
            return True
        current = current.child_by_field_name("declarator")
    return False


def _split_qualified(text: str) -> tuple[str, str]:
    parts = [p for p in re.split(r"::|[.:\\]", _TEMPLATE_ARGS.sub("", text)) if p]
    if not parts:
        return "", text
    scope = [p for p in parts[:-1] if p != "prototype"]
    return ".".join(scope), parts[-1]


def signature(node: Node, found: Described, src: bytes) -> str:
    """The source between the name and the body, on one line: '(a, b) -> int'."""
    start = found.params.start_byte if found.params is not None else found.name_node.end_byte
    end = found.body.start_byte if found.body is not None else node.end_byte
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


def _text(node: Node, src: bytes) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _at_top(node: Node) -> bool:
    return node.parent is not None and node.parent.type in ("source_file", "compilation_unit")


def _child_of_type(node: Node, *types: str) -> Node | None:
    return next((c for c in node.named_children if c.type in types), None)


def _has_token(node: Node, *words: str) -> bool:
    return any(not c.is_named and c.type in words for c in node.children)


# -- per-language exceptions ----------------------------------------------------------


def _rust_macro(node: Node, kind: str, src: bytes) -> Described | None:
    found = _plain(node, "macro", src)
    if found is not None:
        found.signature = ""  # its rules are a body, not a signature
    return found


def _python_constant(node: Node, kind: str, src: bytes) -> Described | None:
    if node.parent is None or node.parent.type != "module":
        return None  # only module-level names are the module's constants
    left = node.child_by_field_name("left")
    if left is None or not _UPPER.match(_text(left, src)):
        return None
    return Described("constant", _text(left, src), left)


def _js_variable(node: Node, kind: str, src: bytes) -> Described | None:
    value = node.child_by_field_name("value")
    name = node.child_by_field_name("name")
    if name is None or name.type != "identifier":
        return None  # destructuring: const {a, b} = ...
    if value is not None and value.type in _FUNCTION_VALUES:
        return _function_value("function", _text(name, src), name, "", value)
    declaration = node.parent
    keyword = declaration.child_by_field_name("kind") if declaration is not None else None
    if keyword is None or keyword.type != "const":
        return None  # let/var: not a constant of the module
    holder = declaration.parent
    exported = holder is not None and holder.type == "export_statement"
    if exported:
        holder = holder.parent
    if holder is None or holder.type != "program":
        return None  # a const inside a function or block
    if not exported and not _UPPER.match(_text(name, src)):
        return None  # a script's local value (const cart = new Cart()), not its API
    return Described("constant", _text(name, src), name)


def _js_assignment(node: Node, kind: str, src: bytes) -> Described | None:
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    prop = left.child_by_field_name("property") if left is not None else None
    if prop is None or right is None or right.type not in _FUNCTION_VALUES:
        return None
    scope, _ = _split_qualified(_text(left, src))
    return _function_value("function", _text(prop, src), prop, scope, right)


def _js_field(node: Node, kind: str, src: bytes) -> Described | None:
    name = node.child_by_field_name("property") or node.child_by_field_name("name")
    value = node.child_by_field_name("value")
    if name is None or value is None or value.type not in _FUNCTION_VALUES:
        return None  # a plain field, not a method
    return _function_value("method", _text(name, src), name, "", value)


def _go_type(node: Node, kind: str, src: bytes) -> Described | None:
    name, shape = node.child_by_field_name("name"), node.child_by_field_name("type")
    if name is None:
        return None
    kinds = {"struct_type": "struct", "interface_type": "interface"}
    if shape is not None and shape.type in kinds:
        return Described(kinds[shape.type], _text(name, src), name, body=shape, signature="")
    return Described("type", _text(name, src), name)


def _go_method(node: Node, kind: str, src: bytes) -> Described | None:
    found = _plain(node, "method", src)
    receiver = node.child_by_field_name("receiver")
    if found is not None and receiver is not None:
        types = [t for t in _walk_named(receiver, 4) if t.type == "type_identifier"]
        found.scope = _text(types[0], src) if types else ""
    return found


def _walk_named(node: Node, depth: int) -> list[Node]:
    out = [node]
    if depth > 0:
        for child in node.named_children:
            out += _walk_named(child, depth - 1)
    return out


def _go_constant(node: Node, kind: str, src: bytes) -> Described | None:
    block = node.parent
    if block is None or block.parent is None or block.parent.type != "source_file":
        return None
    return _plain(node, "constant", src)


def _rust_impl(node: Node, kind: str, src: bytes) -> Described | None:
    target = node.child_by_field_name("type")
    while target is not None and target.child_by_field_name("type") is not None:
        target = target.child_by_field_name("type")  # generic_type -> its base type
    if target is None:
        return None
    trait = node.child_by_field_name("trait")
    sig = f"({_text(trait, src)})" if trait is not None else ""
    found = _plain(node, "impl", src, target)
    if found is not None:
        found.signature = sig
    return found


def _java_field(node: Node, kind: str, src: bytes) -> Described | None:
    modifiers = _child_of_type(node, "modifiers")
    words = _text(modifiers, src).split() if modifiers is not None else []
    if "static" not in words or "final" not in words:
        return None
    declarator = node.child_by_field_name("declarator")
    name = declarator.child_by_field_name("name") if declarator is not None else None
    if name is None:
        return None
    return Described("constant", _text(name, src), name)


def _c_record(node: Node, kind: str, src: bytes) -> Described | None:
    if node.child_by_field_name("body") is None:
        return None  # 'struct node *next': a use, not a definition
    return _plain(node, node.type.split("_")[0], src)  # struct / union / enum / class


def _c_declaration(node: Node, kind: str, src: bytes) -> Described | None:
    if not _has_function_declarator(node):
        return None
    in_class = node.parent is not None and node.parent.type == "field_declaration_list"
    return _plain(node, "method" if in_class else "prototype", src)


def _c_typedef(node: Node, kind: str, src: bytes) -> Described | None:
    found = _plain(node, "type", src)
    if found is not None:
        found.signature = ""
    return found


def _ruby_constant(node: Node, kind: str, src: bytes) -> Described | None:
    parent = node.parent
    if parent is not None and parent.type == "body_statement":
        parent = parent.parent
    if parent is None or parent.type not in ("program", "class", "module"):
        return None
    left = node.child_by_field_name("left")
    return Described("constant", _text(left, src), left) if left is not None else None


def _php_constant(node: Node, kind: str, src: bytes) -> Described | None:
    name = _child_of_type(node, "name")
    return Described("constant", _text(name, src), name) if name is not None else None


def _kotlin_class(node: Node, kind: str, src: bytes) -> Described | None:
    modifiers = _child_of_type(node, "modifiers")
    if _has_token(node, "interface"):
        kind = "interface"
    elif _has_token(node, "enum") or _child_of_type(node, "enum_class_body") is not None or (
            modifiers is not None and "enum" in _text(modifiers, src).split()):
        kind = "enum"
    else:
        kind = "class"
    return _plain(node, kind, src, _child_of_type(node, "type_identifier"))


def _kotlin_function(node: Node, kind: str, src: bytes) -> Described | None:
    found = _plain(node, "function", src, _child_of_type(node, "simple_identifier"))
    receiver = node.child_by_field_name("receiver") or _child_of_type(node, "receiver_type")
    if found is not None and receiver is not None:
        found.scope = _text(receiver, src)
    return found


def _kotlin_object(node: Node, kind: str, src: bytes) -> Described | None:
    return _plain(node, "object", src, _child_of_type(node, "type_identifier"))


def _kotlin_alias(node: Node, kind: str, src: bytes) -> Described | None:
    return _plain(node, "type", src, _child_of_type(node, "type_identifier"))


def _kotlin_property(node: Node, kind: str, src: bytes) -> Described | None:
    if not _at_top(node):
        return None
    modifiers = _child_of_type(node, "modifiers")
    if modifiers is None or "const" not in _text(modifiers, src).split():
        return None
    variable = _child_of_type(node, "variable_declaration")
    name = _child_of_type(variable, "simple_identifier") if variable is not None else None
    return Described("constant", _text(name, src), name) if name is not None else None


def _swift_class(node: Node, kind: str, src: bytes) -> Described | None:
    words = ("class", "struct", "enum", "extension", "actor")
    keyword = next((c.type for c in node.children if not c.is_named and c.type in words), "class")
    found = _plain(node, keyword, src)
    if found is not None and found.name_node.type == "user_type":
        found.name = _text(found.name_node, src)  # extension Point: the extended type
    return found


def _swift_init(node: Node, kind: str, src: bytes) -> Described | None:
    keyword = next((c for c in node.children if c.type == "init"), None)
    if keyword is None:
        return None
    return Described("method", "init", keyword, body=body_of(node))


def _swift_property(node: Node, kind: str, src: bytes) -> Described | None:
    if not _at_top(node):
        return None
    binding = _child_of_type(node, "value_binding_pattern")
    pattern = node.child_by_field_name("name")
    name = pattern.child_by_field_name("bound_identifier") if pattern is not None else None
    if binding is None or _text(binding, src) != "let" or name is None:
        return None
    return Described("constant", _text(name, src), name)


def _scala_value(node: Node, kind: str, src: bytes) -> Described | None:
    if not _at_top(node):
        return None
    pattern = node.child_by_field_name("pattern")
    if pattern is None or pattern.type != "identifier":
        return None
    return Described("constant", _text(pattern, src), pattern)


def _lua_assignment(node: Node, kind: str, src: bytes) -> Described | None:
    variables = _child_of_type(node, "variable_list")
    values = _child_of_type(node, "expression_list")
    target = variables.child_by_field_name("name") if variables is not None else None
    value = values.child_by_field_name("value") if values is not None else None
    if target is None or value is None:
        return None
    if value.type != "function_definition":
        return None
    scope, name = _split_qualified(_text(target, src))
    return _function_value("function", name, target, scope, value)


def _function_value(kind: str, name: str, name_node: Node, scope: str, value: Node) -> Described:
    """``f = (a) => ...``: the signature is the value's, from its parameters to its body."""
    params = (value.child_by_field_name("parameters")
              or value.child_by_field_name("parameter") or value)
    return Described(kind, name, name_node, scope, body_of(value), params=params)


_Rule = Callable[[Node, str, bytes], "Described | None"]
_RULES: dict[tuple[str, str], _Rule] = {
    ("python", "assignment"): _python_constant,
    ("*", "variable_declarator"): _js_variable,
    ("*", "assignment_expression"): _js_assignment,
    ("*", "field_definition"): _js_field,
    ("*", "public_field_definition"): _js_field,
    ("go", "type_spec"): _go_type,
    ("go", "method_declaration"): _go_method,
    ("go", "const_spec"): _go_constant,
    ("rust", "impl_item"): _rust_impl,
    ("rust", "macro_definition"): _rust_macro,
    ("java", "field_declaration"): _java_field,
    ("c", "struct_specifier"): _c_record, ("cpp", "struct_specifier"): _c_record,
    ("c", "union_specifier"): _c_record, ("cpp", "union_specifier"): _c_record,
    ("c", "enum_specifier"): _c_record, ("cpp", "enum_specifier"): _c_record,
    ("cpp", "class_specifier"): _c_record,
    ("c", "declaration"): _c_declaration, ("cpp", "declaration"): _c_declaration,
    ("cpp", "field_declaration"): _c_declaration,
    ("c", "type_definition"): _c_typedef, ("cpp", "type_definition"): _c_typedef,
    ("ruby", "assignment"): _ruby_constant,
    ("php", "const_element"): _php_constant,
    ("kotlin", "class_declaration"): _kotlin_class,
    ("kotlin", "function_declaration"): _kotlin_function,
    ("kotlin", "object_declaration"): _kotlin_object,
    ("kotlin", "type_alias"): _kotlin_alias,
    ("kotlin", "property_declaration"): _kotlin_property,
    ("swift", "class_declaration"): _swift_class,
    ("swift", "init_declaration"): _swift_init,
    ("swift", "property_declaration"): _swift_property,
    ("scala", "val_definition"): _scala_value,
    ("lua", "assignment_statement"): _lua_assignment,
}
