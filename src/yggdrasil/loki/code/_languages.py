"""Which grammar reads a file, and which nodes of each grammar are definitions.

A language is a tree-sitter grammar from ``tree-sitter-language-pack`` (0.13 bundles its
grammars in the wheel, so nothing is downloaded at run time) plus the node types that
define something. Each type maps to a kind; ``""`` means the kind depends on the node
and ``_nodes`` decides it (or drops the node). A file's language comes from its
extension, or for a file without one from its ``#!`` line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["LANGUAGES", "Language", "by_grammar", "extension_of", "language_for",
           "language_of_script"]


@dataclass(frozen=True)
class Language:
    """A grammar, the node types that define something, and where definitions can be.

    ``defs`` maps a node type to its kind ('' : ``_nodes`` decides from the node, or
    drops it). ``containers`` are the node types whose children are looked at: the
    file, bodies of classes, namespaces and functions, and statements that hold other
    statements. Expressions are never entered, which keeps the walk short (a Python
    file's statements, not its millions of expression nodes) and bounded on a file
    nested 100,000 levels deep in an expression.
    """

    name: str  # the grammar's name in tree-sitter-language-pack
    defs: Mapping[str, str]
    containers: frozenset[str]
    extensions: tuple[str, ...] = ()
    file_names: tuple[str, ...] = ()
    wrappers: frozenset[str] = field(default_factory=frozenset)  # hold a def and its decorations
    top_only: frozenset[str] = field(default_factory=frozenset)  # defs only at the file's top


def _set(*names: str) -> frozenset[str]:
    return frozenset(names) | {"ERROR"}  # a syntax error may hold definitions: look inside


_PY = _set("module", "block", "class_definition", "function_definition", "decorated_definition",
           "if_statement", "elif_clause", "else_clause", "for_statement", "while_statement",
           "try_statement", "except_clause", "except_group_clause", "finally_clause",
           "with_statement", "match_statement", "case_clause")
_JS_DEFS = {"function_declaration": "function", "generator_function_declaration": "function",
            "class_declaration": "class", "method_definition": "method",
            "variable_declarator": "", "assignment_expression": "", "field_definition": ""}
_JS = _set("program", "statement_block", "export_statement", "class_declaration", "class",
           "class_body", "function_declaration", "generator_function_declaration",
           "function_expression", "arrow_function", "generator_function", "method_definition",
           "lexical_declaration", "variable_declaration", "variable_declarator", "object",
           "expression_statement", "assignment_expression", "if_statement", "else_clause",
           "for_statement", "for_in_statement", "while_statement", "do_statement",
           "try_statement", "catch_clause", "finally_clause", "switch_statement",
           "switch_body", "switch_case", "switch_default", "labeled_statement")
_TS_DEFS = {**_JS_DEFS, "public_field_definition": "", "abstract_class_declaration": "class",
            "interface_declaration": "interface", "type_alias_declaration": "type",
            "enum_declaration": "enum", "internal_module": "namespace", "module": "namespace",
            "method_signature": "method", "abstract_method_signature": "method",
            "function_signature": "function"}
_TS = _JS | {"abstract_class_declaration", "interface_declaration", "interface_body",
             "object_type", "internal_module", "module", "ambient_declaration"}
_C_DEFS = {"function_definition": "function", "type_definition": "type", "preproc_def": "macro",
           "preproc_function_def": "macro", "struct_specifier": "", "union_specifier": "",
           "enum_specifier": "", "declaration": ""}
_C = _set("translation_unit", "preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif",
          "preproc_elifdef", "linkage_specification", "declaration_list", "type_definition",
          "declaration")
_CPP_DEFS = {**_C_DEFS, "class_specifier": "", "field_declaration": "",
             "namespace_definition": "namespace", "alias_declaration": "type"}
_CPP = _C | {"namespace_definition", "class_specifier", "struct_specifier", "union_specifier",
             "field_declaration_list", "template_declaration"}

LANGUAGES: tuple[Language, ...] = (
    Language("python", {"function_definition": "function", "class_definition": "class",
                        "assignment": ""}, _PY, (".py", ".pyi", ".pyw"),
             wrappers=frozenset({"decorated_definition"}), top_only=frozenset({"assignment"})),
    Language("javascript", _JS_DEFS, _JS, (".js", ".mjs", ".cjs", ".jsx"),
             wrappers=frozenset({"export_statement"})),
    Language("typescript", _TS_DEFS, _TS, (".ts", ".mts", ".cts"),
             wrappers=frozenset({"export_statement", "ambient_declaration"})),
    Language("tsx", _TS_DEFS, _TS, (".tsx",),
             wrappers=frozenset({"export_statement", "ambient_declaration"})),
    Language("go", {"function_declaration": "function", "method_declaration": "method",
                    "method_elem": "method",
                    "type_spec": "", "type_alias": "type", "const_spec": ""},
             _set("source_file", "type_declaration", "const_declaration", "type_spec",
                  "interface_type"), (".go",)),
    Language("rust", {"function_item": "function", "function_signature_item": "function",
                      "struct_item": "struct", "enum_item": "enum", "union_item": "union",
                      "trait_item": "trait", "impl_item": "impl", "mod_item": "module",
                      "const_item": "constant", "static_item": "constant",
                      "type_item": "type", "macro_definition": "macro"},
             _set("source_file", "mod_item", "declaration_list", "impl_item", "trait_item",
                  "function_item", "block", "foreign_mod_item"), (".rs",)),
    Language("java", {"class_declaration": "class", "interface_declaration": "interface",
                      "enum_declaration": "enum", "record_declaration": "record",
                      "annotation_type_declaration": "interface",
                      "method_declaration": "method", "constructor_declaration": "method",
                      "compact_constructor_declaration": "method", "field_declaration": ""},
             _set("program", "class_declaration", "class_body", "interface_declaration",
                  "interface_body", "enum_declaration", "enum_body", "enum_body_declarations",
                  "record_declaration", "annotation_type_declaration", "annotation_type_body"),
             (".java",)),
    Language("c", _C_DEFS, _C, (".c",)),
    # .h goes to C++: its grammar reads C headers too, and C++ headers are common.
    Language("cpp", _CPP_DEFS, _CPP, (".h", ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp",
                                      ".hxx", ".h++", ".ipp", ".tpp", ".inl"),
             wrappers=frozenset({"template_declaration"})),
    Language("csharp", {"class_declaration": "class", "struct_declaration": "struct",
                        "interface_declaration": "interface", "enum_declaration": "enum",
                        "record_declaration": "record", "method_declaration": "method",
                        "constructor_declaration": "method", "destructor_declaration": "method",
                        "property_declaration": "property", "delegate_declaration": "type",
                        "namespace_declaration": "namespace",
                        "file_scoped_namespace_declaration": "namespace"},
             _set("compilation_unit", "namespace_declaration", "declaration_list",
                  "file_scoped_namespace_declaration", "class_declaration", "struct_declaration",
                  "interface_declaration", "record_declaration"), (".cs",)),
    Language("ruby", {"class": "class", "module": "module", "method": "function",
                      "singleton_method": "method", "assignment": ""},
             _set("program", "module", "class", "singleton_class", "body_statement"),
             (".rb", ".rake", ".gemspec", ".ru"), ("Rakefile", "Gemfile", "Guardfile")),
    Language("php", {"class_declaration": "class", "interface_declaration": "interface",
                     "trait_declaration": "trait", "enum_declaration": "enum",
                     "function_definition": "function", "method_declaration": "method",
                     "namespace_definition": "namespace", "const_element": "constant"},
             _set("program", "namespace_definition", "compound_statement", "class_declaration",
                  "interface_declaration", "trait_declaration", "enum_declaration",
                  "declaration_list", "enum_declaration_list", "const_declaration",
                  "if_statement", "else_clause", "colon_block"), (".php", ".phtml")),
    Language("kotlin", {"class_declaration": "", "object_declaration": "object",
                        "function_declaration": "function", "type_alias": "type",
                        "property_declaration": ""},
             _set("source_file", "class_declaration", "object_declaration", "class_body",
                  "enum_class_body", "companion_object"), (".kt", ".kts"),
             top_only=frozenset({"property_declaration"})),
    Language("swift", {"class_declaration": "", "protocol_declaration": "protocol",
                       "function_declaration": "function",
                       "protocol_function_declaration": "method", "init_declaration": "method",
                       "typealias_declaration": "type", "property_declaration": ""},
             _set("source_file", "class_declaration", "protocol_declaration", "class_body",
                  "protocol_body", "enum_class_body"), (".swift",),
             top_only=frozenset({"property_declaration"})),
    Language("scala", {"class_definition": "class", "object_definition": "object",
                       "trait_definition": "trait", "enum_definition": "enum",
                       "function_definition": "function", "function_declaration": "function",
                       "type_definition": "type", "val_definition": ""},
             _set("compilation_unit", "package_clause", "class_definition", "object_definition",
                  "trait_definition", "enum_definition", "template_body", "enum_body"),
             (".scala", ".sc"), top_only=frozenset({"val_definition"})),
    Language("bash", {"function_definition": "function"},
             _set("program", "function_definition", "compound_statement", "if_statement",
                  "elif_clause", "else_clause"),
             (".sh", ".bash", ".zsh", ".ksh", ".bats"), (".bashrc", ".bash_profile", ".profile")),
    Language("lua", {"function_declaration": "function", "assignment_statement": ""},
             _set("chunk", "function_declaration", "block", "do_statement", "if_statement",
                  "elseif_statement", "else_statement"), (".lua",)),
)

_BY_EXTENSION = {ext: lang for lang in LANGUAGES for ext in lang.extensions}
_BY_NAME = {name: lang for lang in LANGUAGES for name in lang.file_names}
_BY_GRAMMAR = {lang.name: lang for lang in LANGUAGES}
_INTERPRETERS = {"python": "python", "bash": "bash", "sh": "bash", "zsh": "bash", "ksh": "bash",
                 "dash": "bash", "node": "javascript", "ruby": "ruby", "lua": "lua", "php": "php"}


def language_for(name: str) -> Language | None:
    """The language of a file name, from its extension (None: no grammar for it)."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    dot = name.rfind(".")
    return _BY_EXTENSION.get(name[dot:].lower()) if dot > 0 else None


def by_grammar(name: str) -> Language | None:
    return _BY_GRAMMAR.get(name)


def language_of_script(head: bytes) -> Language | None:
    """The language of a file without an extension, from its first line's ``#!``."""
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if words and words[0].endswith("/env"):
        words = [w for w in words[1:] if not w.startswith("-")]
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1].lower().rstrip("0123456789.")
    grammar = _INTERPRETERS.get(program)
    return _BY_GRAMMAR[grammar] if grammar else None


def extension_of(name: str) -> str:
    """'.md' for 'README.md'; '(none)' for a name without one, for the skipped-files note."""
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else "(none)"
