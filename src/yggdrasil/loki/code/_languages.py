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
    name: str  # the grammar's name in tree-sitter-language-pack
    defs: Mapping[str, str]  # node type -> kind ("" = decided per node by ``_nodes``)
    extensions: tuple[str, ...] = ()
    file_names: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()  # more candidates, narrowed by context, captured as @def
    wrappers: frozenset[str] = field(default_factory=frozenset)  # hold a def and its decorations

    def query(self) -> str:
        """A tree-sitter query capturing every candidate definition as ``@def``."""
        plain = "[" + " ".join(f"({t})" for t in self.defs) + "] @def"
        return "\n".join([plain, *self.patterns])


_FUNCTION_VALUE = "[(arrow_function) (function_expression) (generator_function)]"
_JS = {"function_declaration": "function", "generator_function_declaration": "function",
       "class_declaration": "class", "method_definition": "method"}
_JS_PATTERNS = (
    f"(variable_declarator value: {_FUNCTION_VALUE}) @def",
    "(program (lexical_declaration (variable_declarator) @def))",
    "(program (export_statement (lexical_declaration (variable_declarator) @def)))",
    f"(assignment_expression left: (member_expression) right: {_FUNCTION_VALUE}) @def",
)
_TS = {
    **_JS, "abstract_class_declaration": "class", "interface_declaration": "interface",
    "type_alias_declaration": "type", "enum_declaration": "enum", "internal_module": "namespace",
    "module": "namespace", "method_signature": "method", "abstract_method_signature": "method",
    "function_signature": "function",
}
_TS_PATTERNS = (*_JS_PATTERNS, f"(public_field_definition value: {_FUNCTION_VALUE}) @def")
_C = {"function_definition": "function", "type_definition": "type", "preproc_def": "macro",
      "preproc_function_def": "macro"}
# Prototypes: declarations outside function bodies (kept only if they declare a function).
_C_PATTERNS = (
    "(struct_specifier body: (_)) @def", "(union_specifier body: (_)) @def",
    "(enum_specifier body: (_)) @def",
    *(f"({parent} (declaration) @def)" for parent in (
        "translation_unit", "preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif",
        "declaration_list", "linkage_specification")),
)
_CPP = {**_C, "namespace_definition": "namespace", "alias_declaration": "type"}
_CPP_PATTERNS = (*_C_PATTERNS, "(class_specifier body: (_)) @def",
                 "(field_declaration_list [(field_declaration) (declaration)] @def)")

LANGUAGES: tuple[Language, ...] = (
    Language("python", {"function_definition": "function", "class_definition": "class"},
             (".py", ".pyi", ".pyw"),
             patterns=("(module (assignment left: (identifier)) @def)",),
             wrappers=frozenset({"decorated_definition"})),
    Language("javascript", _JS, (".js", ".mjs", ".cjs", ".jsx"), patterns=(
        *_JS_PATTERNS, f"(field_definition value: {_FUNCTION_VALUE}) @def"),
        wrappers=frozenset({"export_statement"})),
    Language("typescript", _TS, (".ts", ".mts", ".cts"), patterns=_TS_PATTERNS,
             wrappers=frozenset({"export_statement", "ambient_declaration"})),
    Language("tsx", _TS, (".tsx",), patterns=_TS_PATTERNS,
             wrappers=frozenset({"export_statement", "ambient_declaration"})),
    Language("go", {"function_declaration": "function", "method_declaration": "method",
                    "type_spec": "", "type_alias": "type"}, (".go",),
             patterns=("(source_file (const_declaration (const_spec) @def))",)),
    Language("rust", {"function_item": "function", "function_signature_item": "function",
                      "struct_item": "struct", "enum_item": "enum", "union_item": "union",
                      "trait_item": "trait", "impl_item": "impl", "mod_item": "module",
                      "const_item": "constant", "static_item": "constant",
                      "type_item": "type", "macro_definition": "macro"}, (".rs",)),
    Language("java", {"class_declaration": "class", "interface_declaration": "interface",
                      "enum_declaration": "enum", "record_declaration": "record",
                      "annotation_type_declaration": "interface",
                      "method_declaration": "method", "constructor_declaration": "method",
                      "compact_constructor_declaration": "method", "field_declaration": ""},
             (".java",)),
    Language("c", _C, (".c",), patterns=_C_PATTERNS),
    # .h goes to C++: its grammar reads C headers too, and C++ headers are common.
    Language("cpp", _CPP, (".h", ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++",
                           ".ipp", ".tpp", ".inl"), patterns=_CPP_PATTERNS,
             wrappers=frozenset({"template_declaration"})),
    Language("csharp", {"class_declaration": "class", "struct_declaration": "struct",
                        "interface_declaration": "interface", "enum_declaration": "enum",
                        "record_declaration": "record", "method_declaration": "method",
                        "constructor_declaration": "method", "destructor_declaration": "method",
                        "property_declaration": "property", "delegate_declaration": "type",
                        "namespace_declaration": "namespace",
                        "file_scoped_namespace_declaration": "namespace"}, (".cs",)),
    Language("ruby", {"class": "class", "module": "module", "method": "function",
                      "singleton_method": "method"},
             (".rb", ".rake", ".gemspec", ".ru"), ("Rakefile", "Gemfile", "Guardfile"),
             patterns=("(assignment left: (constant)) @def",)),
    Language("php", {"class_declaration": "class", "interface_declaration": "interface",
                     "trait_declaration": "trait", "enum_declaration": "enum",
                     "function_definition": "function", "method_declaration": "method",
                     "namespace_definition": "namespace", "const_element": "constant"},
             (".php", ".phtml")),
    Language("kotlin", {"class_declaration": "", "object_declaration": "object",
                        "function_declaration": "function", "type_alias": "type"},
             (".kt", ".kts"), patterns=("(source_file (property_declaration) @def)",)),
    Language("swift", {"class_declaration": "", "protocol_declaration": "protocol",
                       "function_declaration": "function",
                       "protocol_function_declaration": "method", "init_declaration": "method",
                       "typealias_declaration": "type"}, (".swift",),
             patterns=("(source_file (property_declaration) @def)",)),
    Language("scala", {"class_definition": "class", "object_definition": "object",
                       "trait_definition": "trait", "enum_definition": "enum",
                       "function_definition": "function", "function_declaration": "function",
                       "type_definition": "type"}, (".scala", ".sc"),
             patterns=("(compilation_unit (val_definition) @def)",)),
    Language("bash", {"function_definition": "function"},
             (".sh", ".bash", ".zsh", ".ksh", ".bats"), (".bashrc", ".bash_profile", ".profile")),
    Language("lua", {"function_declaration": "function"}, (".lua",), patterns=(
        "(assignment_statement (expression_list value: (function_definition))) @def",)),
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
