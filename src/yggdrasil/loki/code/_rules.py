"""What each definition node defines: :func:`describe`, and the per-language exceptions.

The walk in ``_extract`` hands over every node of a type ``_languages`` lists. Most
follow the common rule of ``_nodes`` (name field, body field, the source between them
as the signature); the functions here are the exceptions, and some drop a node that
defines nothing (a C declaration of no function, a JavaScript ``const`` inside a
function, a Python assignment inside a class).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ._nodes import (
    FUNCTION_VALUES,
    UPPER,
    Described,
    Node,
    at_top,
    body_of,
    child_of_type,
    function_value,
    has_function_declarator,
    has_token,
    plain,
    signature,
    split_qualified,
    text_of,
)

__all__ = ["describe"]


def describe(lang: str, kinds: Mapping[str, str], node: Node, src: bytes) -> Described | None:
    """The definition ``node`` makes (``src`` is the parsed source), or None if it makes none."""
    rule = _RULES.get((lang, node.type)) or _RULES.get(("*", node.type))
    kind = kinds.get(node.type, "")
    found = rule(node, kind, src) if rule else plain(node, kind, src)
    if found is None or not found.name:
        return None
    if found.signature is None:
        found.signature = signature(node, found, src)
    return found


def _rust_macro(node: Node, kind: str, src: bytes) -> Described | None:
    found = plain(node, "macro", src)
    if found is not None:
        found.signature = ""  # its rules are a body, not a signature
    return found


def _python_constant(node: Node, kind: str, src: bytes) -> Described | None:
    if node.parent is None or node.parent.type != "module":
        return None  # only module-level names are the module's constants
    left = node.child_by_field_name("left")
    if left is None or not UPPER.match(text_of(left, src)):
        return None
    return Described("constant", text_of(left, src), left)


def _js_variable(node: Node, kind: str, src: bytes) -> Described | None:
    value = node.child_by_field_name("value")
    name = node.child_by_field_name("name")
    if name is None or name.type != "identifier":
        return None  # destructuring: const {a, b} = ...
    if value is not None and value.type in FUNCTION_VALUES:
        return function_value("function", text_of(name, src), name, "", value)
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
    if not exported and not UPPER.match(text_of(name, src)):
        return None  # a script's local value (const cart = new Cart()), not its API
    return Described("constant", text_of(name, src), name)


def _js_assignment(node: Node, kind: str, src: bytes) -> Described | None:
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    prop = left.child_by_field_name("property") if left is not None else None
    if prop is None or right is None or right.type not in FUNCTION_VALUES:
        return None
    scope, _ = split_qualified(text_of(left, src))
    return function_value("function", text_of(prop, src), prop, scope, right)


def _js_field(node: Node, kind: str, src: bytes) -> Described | None:
    name = node.child_by_field_name("property") or node.child_by_field_name("name")
    value = node.child_by_field_name("value")
    if name is None or value is None or value.type not in FUNCTION_VALUES:
        return None  # a plain field, not a method
    return function_value("method", text_of(name, src), name, "", value)


def _go_type(node: Node, kind: str, src: bytes) -> Described | None:
    name, shape = node.child_by_field_name("name"), node.child_by_field_name("type")
    if name is None:
        return None
    kinds = {"struct_type": "struct", "interface_type": "interface"}
    if shape is not None and shape.type in kinds:
        return Described(kinds[shape.type], text_of(name, src), name, body=shape, signature="")
    return Described("type", text_of(name, src), name)


def _go_method(node: Node, kind: str, src: bytes) -> Described | None:
    found = plain(node, "method", src)
    receiver = node.child_by_field_name("receiver")
    if found is not None and receiver is not None:
        types = [t for t in _walk_named(receiver, 4) if t.type == "type_identifier"]
        found.scope = text_of(types[0], src) if types else ""
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
    return plain(node, "constant", src)


def _rust_impl(node: Node, kind: str, src: bytes) -> Described | None:
    target = node.child_by_field_name("type")
    while target is not None and target.child_by_field_name("type") is not None:
        target = target.child_by_field_name("type")  # generic_type -> its base type
    if target is None:
        return None
    trait = node.child_by_field_name("trait")
    sig = f"({text_of(trait, src)})" if trait is not None else ""
    found = plain(node, "impl", src, target)
    if found is not None:
        found.signature = sig
    return found


def _java_field(node: Node, kind: str, src: bytes) -> Described | None:
    modifiers = child_of_type(node, "modifiers")
    words = text_of(modifiers, src).split() if modifiers is not None else []
    if "static" not in words or "final" not in words:
        return None
    declarator = node.child_by_field_name("declarator")
    name = declarator.child_by_field_name("name") if declarator is not None else None
    if name is None:
        return None
    return Described("constant", text_of(name, src), name)


def _c_record(node: Node, kind: str, src: bytes) -> Described | None:
    if node.child_by_field_name("body") is None:
        return None  # 'struct node *next': a use, not a definition
    return plain(node, node.type.split("_")[0], src)  # struct / union / enum / class


def _c_declaration(node: Node, kind: str, src: bytes) -> Described | None:
    if not has_function_declarator(node):
        return None
    in_class = node.parent is not None and node.parent.type == "field_declaration_list"
    return plain(node, "method" if in_class else "prototype", src)


def _c_typedef(node: Node, kind: str, src: bytes) -> Described | None:
    found = plain(node, "type", src)
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
    return Described("constant", text_of(left, src), left) if left is not None else None


def _php_constant(node: Node, kind: str, src: bytes) -> Described | None:
    name = child_of_type(node, "name")
    return Described("constant", text_of(name, src), name) if name is not None else None


def _kotlin_class(node: Node, kind: str, src: bytes) -> Described | None:
    modifiers = child_of_type(node, "modifiers")
    if has_token(node, "interface"):
        kind = "interface"
    elif has_token(node, "enum") or child_of_type(node, "enum_class_body") is not None or (
            modifiers is not None and "enum" in text_of(modifiers, src).split()):
        kind = "enum"
    else:
        kind = "class"
    return plain(node, kind, src, child_of_type(node, "type_identifier"))


def _kotlin_function(node: Node, kind: str, src: bytes) -> Described | None:
    found = plain(node, "function", src, child_of_type(node, "simple_identifier"))
    receiver = node.child_by_field_name("receiver") or child_of_type(node, "receiver_type")
    if found is not None and receiver is not None:
        found.scope = text_of(receiver, src)
    return found


def _kotlin_object(node: Node, kind: str, src: bytes) -> Described | None:
    return plain(node, "object", src, child_of_type(node, "type_identifier"))


def _kotlin_alias(node: Node, kind: str, src: bytes) -> Described | None:
    return plain(node, "type", src, child_of_type(node, "type_identifier"))


def _kotlin_property(node: Node, kind: str, src: bytes) -> Described | None:
    if not at_top(node):
        return None
    modifiers = child_of_type(node, "modifiers")
    if modifiers is None or "const" not in text_of(modifiers, src).split():
        return None
    variable = child_of_type(node, "variable_declaration")
    name = child_of_type(variable, "simple_identifier") if variable is not None else None
    return Described("constant", text_of(name, src), name) if name is not None else None


def _swift_class(node: Node, kind: str, src: bytes) -> Described | None:
    words = ("class", "struct", "enum", "extension", "actor")
    keyword = next((c.type for c in node.children if not c.is_named and c.type in words), "class")
    found = plain(node, keyword, src)
    if found is not None and found.name_node.type == "user_type":
        found.name = text_of(found.name_node, src)  # extension Point: the extended type
    return found


def _swift_init(node: Node, kind: str, src: bytes) -> Described | None:
    keyword = next((c for c in node.children if c.type == "init"), None)
    if keyword is None:
        return None
    return Described("method", "init", keyword, body=body_of(node))


def _swift_property(node: Node, kind: str, src: bytes) -> Described | None:
    if not at_top(node):
        return None
    binding = child_of_type(node, "value_binding_pattern")
    pattern = node.child_by_field_name("name")
    name = pattern.child_by_field_name("bound_identifier") if pattern is not None else None
    if binding is None or text_of(binding, src) != "let" or name is None:
        return None
    return Described("constant", text_of(name, src), name)


def _scala_value(node: Node, kind: str, src: bytes) -> Described | None:
    if not at_top(node):
        return None
    pattern = node.child_by_field_name("pattern")
    if pattern is None or pattern.type != "identifier":
        return None
    return Described("constant", text_of(pattern, src), pattern)


def _lua_assignment(node: Node, kind: str, src: bytes) -> Described | None:
    variables = child_of_type(node, "variable_list")
    values = child_of_type(node, "expression_list")
    target = variables.child_by_field_name("name") if variables is not None else None
    value = values.child_by_field_name("value") if values is not None else None
    if target is None or value is None:
        return None
    if value.type != "function_definition":
        return None
    scope, name = split_qualified(text_of(target, src))
    return function_value("function", name, target, scope, value)


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
