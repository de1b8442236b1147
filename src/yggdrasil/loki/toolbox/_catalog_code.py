"""The code-navigation tools (``code/``) and read_file's ``symbol=``, in the model's words.

read_file stays the one reader: ``symbol=`` only turns a definition's name into a line
range (from the code index), then the ordinary ``Files.read_file`` reads that window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from annotated_types import Ge, MaxLen

from ..code import KINDS, MAX_BUDGET, MAX_NAME, MIN_BUDGET, Code
from ..files import Files
from ..results import FileRead
from ._tool import Tool

__all__ = ["code_tools", "read_file_tool"]

_PATH = "relative to the root (absolute paths inside it work too)"


def read_file_tool(files: Files, code: Code) -> Tool:
    return Tool("read_file", "Read a text file, one '<n>\\t<text>' line per source line; "
                "symbol= reads exactly one definition.",
                {"path": f"file, {_PATH}",
                 "start": "first line to show, 1-based (default 1)",
                 "end": "last line to show, inclusive (default 0: a window of up to 2000 lines)",
                 "symbol": "read just this definition, e.g. 'main' or 'Greeter.greet', with its "
                           "decorators and doc comment (start and end are then ignored)"},
                _read_with_symbol(files, code))


def _read_with_symbol(files: Files, code: Code) -> Callable[..., FileRead]:
    def read_file(path: str, start: Annotated[int, Ge(1)] = 1, end: Annotated[int, Ge(0)] = 0,
                  symbol: Annotated[str, MaxLen(MAX_NAME)] = "") -> FileRead:
        if not symbol.strip():
            return files.read_file(path, start, end)
        first, last, note = code.symbol_lines(path, symbol)
        read = files.read_file(path, first, last)
        return read.model_copy(update={"symbol": symbol, "note": note})

    return read_file


def code_tools(code: Code) -> list[Tool]:
    return [
        Tool("outline", "List what a source file defines, nested, in file order: one "
             "'kind name(signature)  L<start>-<end>' line per class, method, function, "
             "constant...; a folder gives each file's outline.",
             {"path": f"source file or folder, {_PATH}; default the root"}, code.outline,
             title="Outline a source file"),
        Tool("find_symbol", "Find where a name is defined across the tree: 'path:line: kind "
             "name(signature)', best matches first. Skips what grep skips, and says how many.",
             {"name": "a name (main), a dotted name (Greeter.greet) or a glob (test_*); "
                      "exact case first, else ignoring case",
              "kind": f"only definitions of this kind: {', '.join(KINDS[:4])}, function "
                      "(also methods), method, constant, ... (default any; class also "
                      "covers struct, interface, enum...; def, fn, const are synonyms)",
              "path": f"file or folder to search, {_PATH}; default the root",
              "include_ignored": "also search ignored and hidden files (default false; "
                                 "binary files and .git never)"},
             code.find_symbol, title="Find where a name is defined"),
        Tool("repo_map", "An overview of a repository: its most referenced definitions (a "
             "PageRank over which files use which names), grouped by file, within a budget.",
             {"path": f"folder to map, {_PATH}; default the root",
              "budget": f"size of the map in characters, {MIN_BUDGET}-{MAX_BUDGET} "
                        "(default 8000, about 2000 tokens)"},
             code.repo_map, title="Map the repository"),
    ]
