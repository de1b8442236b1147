"""Loki tools: the file/shell capabilities the agent acts through.

A :class:`Tool` is one thing the loop can do with its hands; a :class:`Toolbox` holds the
tools plus ``changed``, the root-relative files a run created, edited or deleted.
:func:`filesystem_toolbox` assembles the default toolbox, every path confined to a root.
This module only wires: path logic lives in ``_root``, files in ``_files``, search in
``_search``, commands in ``_shell`` (sandbox, change tracking) over ``_proc``, undo in
``_journal``, tables in ``_tables`` over ``yggdrasil.io``, the web in ``web``.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._files import Files
from ._journal import Journal, Reverted
from ._observe import clip_text
from ._root import Root
from ._sandbox import landlock_status as sandbox_status  # noqa: F401  (re-exported for users)
from ._schema import bind_args, build_schema, parse_docstring
from ._search import Search
from ._shell import DEFAULT_HIDDEN, SandboxMode, Shell, writable_paths
from ._tables import TableReader
from .errors import ToolDefinitionError, ToolError

__all__ = ["Tool", "Toolbox", "filesystem_toolbox"]

log = logging.getLogger("yggdrasil.loki.tools")


@dataclass
class Tool:
    """One named capability the agent can invoke by emitting a JSON call.

    ``run`` takes the decoded args as keyword arguments and returns the observation;
    ``params`` maps each argument name to a one-line description for the prompt. The
    JSON Schema (``input_schema``) is derived once from ``run``'s type hints and defaults.
    """

    name: str
    description: str
    params: dict[str, str]
    run: Callable[..., str]
    mutates: bool = False
    input_schema: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ToolDefinitionError(f"tool name {self.name!r} must be a Python identifier")
        if not callable(self.run):
            raise ToolDefinitionError(f"tool {self.name!r}: run must be callable")
        self.input_schema = build_schema(self.name, self.params, self.run)

    @classmethod
    def from_function(
        cls, fn: Callable[..., str], *, name: str | None = None,
        description: str | None = None, params: dict[str, str] | None = None,
        mutates: bool = False,
    ) -> Tool:
        """A Tool from a plain function: name, description and params from its docstring.

        Params are read from an ``Args:`` section (``name: description`` lines); every
        argument without one gets its name as description.
        """
        doc = inspect.getdoc(fn) or ""
        summary, documented = parse_docstring(doc)
        if params is None:
            names = [k for k, p in inspect.signature(fn).parameters.items()
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            params = {k: documented.get(k, k) for k in names}
        return cls(name or fn.__name__, description or summary or fn.__name__, params, fn, mutates)

    def signature(self) -> str:
        props = self.input_schema["properties"]
        required = set(self.input_schema["required"])
        args = [k if k in required else f"{k}={json.dumps(props[k].get('default'))}"
                for k in self.params]
        return f"{self.name}({', '.join(args)})"

    def spec(self) -> str:
        mark = "  [changes files]" if self.mutates else ""
        lines = [f"{self.signature()}{mark}", f"  {self.description}"]
        lines += [f"  - {k}: {v}" for k, v in self.params.items()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "params": dict(self.params),
                "mutates": self.mutates, "input_schema": self.input_schema}


@dataclass
class Toolbox:
    """A named set of tools plus the run state the loop reports on.

    ``changed`` lists every root-relative file the run created, modified or deleted (by the
    write/edit tools and by commands), in first-touch order; ``changes`` maps each of them
    to its status against the start of the run: ``created``, ``modified``, ``deleted`` or
    ``transient`` (created and gone again). ``revert()`` undoes the run where it can.
    """

    tools: dict[str, Tool] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    status: str = field(default="", compare=False)
    journal: Journal | None = field(default=None, repr=False, compare=False)

    def add(self, tool: Tool) -> Tool:
        """Register a tool; a second tool with the same name is a definition error."""
        if tool.name in self.tools:
            raise ToolDefinitionError(f"a tool named {tool.name!r} is already in the toolbox")
        self.tools[tool.name] = tool
        return tool

    def tool(self, fn: Callable[..., str] | None = None, *, mutates: bool = False) -> Any:
        """Decorator form of ``add(Tool.from_function(fn))``."""
        def register(f: Callable[..., str]) -> Callable[..., str]:
            self.add(Tool.from_function(f, mutates=mutates))
            return f
        return register(fn) if fn is not None else register

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def record(self, path: str) -> None:
        """Note a root-relative path as changed (first touch only)."""
        if path not in self.changed:
            self.changed.append(path)

    @property
    def changes(self) -> dict[str, str]:
        """Each changed path's status against the start of the run, from the journal."""
        entries = self.journal.entries if self.journal is not None else {}
        return {p: entries[p].status if p in entries else "modified" for p in self.changed}

    def revert(self) -> Reverted:
        """Undo this run's file changes where the original is known; never raises per path.

        Files the write/edit tools changed get their original bytes and mode back. Files
        a command changed or deleted before a tool had kept a copy are listed in
        ``not_reverted`` with the reason. Files the run created (by any tool) are removed,
        with the folders made for them, only when nothing else is lost; otherwise they may
        hold the lost data and are kept (listed too). Reverted paths leave ``changed``.
        """
        if self.journal is None:
            return Reverted()
        before = set(self.journal.entries)
        done = self.journal.revert()
        gone = before - set(self.journal.entries)
        self.changed[:] = [p for p in self.changed if p not in gone]
        return done

    def spec(self) -> str:
        """The tool catalog as prompt text: one block per tool."""
        blocks = [tool.spec() for tool in self.tools.values()]
        if self.status:
            blocks.append(self.status)
        return "\n\n".join(blocks)

    def schemas(self) -> list[dict[str, Any]]:
        """Neutral tool schemas (name, description, input_schema) for native tool calling."""
        return [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in self.tools.values()]

    def to_dict(self) -> dict[str, Any]:
        return {"tools": [t.to_dict() for t in self.tools.values()],
                "changed": list(self.changed), "status": self.status,
                "changes": self.changes}

    def call(self, name: str, args: dict[str, Any]) -> str:
        """Run a tool by name; surface any error as a readable observation, never a raise."""
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            available = ", ".join(self.tools) or "none"
            return f"ERROR: unknown tool {name!r}; available tools: {available}"
        try:
            result = tool.run(**bind_args(name, tool.input_schema, args))
        except ToolError as exc:
            return exc.observation()
        except Exception as exc:
            log.debug("tool %s raised", name, exc_info=True)
            return f"ERROR: {name} failed: {type(exc).__name__}: {exc}"
        return clip_text(result if isinstance(result, str) else str(result))


def filesystem_toolbox(
    root: str | Path = ".",
    *,
    read_only: bool = False,
    allow_shell: bool = False,
    allow_web: bool = False,
    confirm: Callable[[str], bool] | None = None,
    allow_private_hosts: bool = False,
    sandbox: SandboxMode = "auto",
    network: bool = True,
    writable: Sequence[str | Path] = (),
    env: Mapping[str, str] | None = None,
    hidden: Sequence[str | Path] | None = None,
) -> Toolbox:
    """Build the default toolbox rooted at ``root``.

    The read tools (list_dir, read_file, find, grep, read_table, query_table) are always
    present.
    write_file, edit_file, run_python and run are added unless ``read_only``.
    ``allow_shell`` is kept for back-compat and no longer gates ``run``. Network tools
    (web_*) are added only with ``allow_web``. ``confirm(action) -> bool`` is asked before
    overwriting or editing an existing file outside the system temp dir.
    ``allow_private_hosts`` lets the web tools reach private, loopback and link-local
    addresses (an intranet, a local test server); cloud metadata addresses stay refused.

    Commands (run, run_python) are fenced by Landlock where the kernel has it:
    ``sandbox="auto"`` fences when it can and runs unfenced otherwise, ``"require"``
    refuses commands (ERROR observation) where it cannot, ``"off"`` never fences.
    ``network=False`` blocks TCP connect/bind (Landlock ABI 4+). ``writable`` adds folders
    commands may write besides the root and their scratch TMPDIR; ``hidden`` lists paths a
    fenced command cannot read (None: well-known credential stores such as ~/.ssh and
    ~/.aws; ``()`` hides nothing). Commands get the environment without secret-looking
    variables; ``env`` adds variables as given.
    ``Toolbox.status`` (the end of ``spec()``) says which of these hold.
    """
    del allow_shell  # back-compat only: run is present whenever the toolbox may write
    where = Root.at(root)
    box = Toolbox()
    journal = Journal(where, box.record)
    box.journal = journal
    files = Files(where, confirm=confirm, on_change=journal.after_write,
                  before_change=journal.before_write)
    tools = _read_tools(where, files)
    if not read_only:
        shell = Shell(where, journal, sandbox=sandbox, network=network,
                      writable=writable_paths(writable), env=env,
                      hidden=DEFAULT_HIDDEN if hidden is None else tuple(hidden))
        tools += _write_tools(files, shell)
        box.status = shell.status()
    if allow_web:
        tools += _web_tools(where, files, read_only=read_only, private=allow_private_hosts)
    for tool in tools:
        box.add(tool)
    return box


_PATH = "relative to the root (absolute paths inside it work too)"


def _read_tools(root: Root, files: Files) -> list[Tool]:
    search = Search(root)
    tables = TableReader(root)
    return [
        Tool("list_dir", "List a folder: 'name/' for a folder, 'name  (<size>b)' for a file.",
             {"path": f"folder, {_PATH}; default the root"}, files.list_dir),
        Tool("read_file", "Read a text file, one '<n>\\t<text>' line per source line.",
             {"path": f"file, {_PATH}",
              "start": "first line to show, 1-based (default 1)",
              "end": "last line to show, inclusive (default 0: a window of up to 2000 lines)"},
             files.read_file),
        Tool("find", "Find files by glob, e.g. '*.py' or 'src/**/test_*.py'; one path per line. "
             "Skips .git, hidden files and what .gitignore/.ignore exclude, and says how many.",
             {"pattern": "glob: without '/' it matches file names at any depth; with '/' the "
                         "root-relative path ('*' stays in one folder, '**' crosses folders)",
              "path": f"folder to search, {_PATH}; default the root",
              "include_ignored": "also list ignored and hidden files (default false; .git never)"},
             search.find),
        Tool("grep", "Search file contents for a regex; prints 'path:line: text'. Skips .git, "
             "hidden, ignored (.gitignore/.ignore) and binary files, and says how many.",
             {"pattern": "regular expression (ripgrep/Rust syntax; no look-around or "
                         "backreferences), matched line by line",
              "path": f"file or folder to search, {_PATH}; default the root",
              "glob": "only files whose name matches this glob, e.g. '*.py' or '*.{js,ts}'",
              "ignore_case": "match case-insensitively (default false)",
              "include_ignored": "also search ignored and hidden files (default false; "
                                 "binary files and .git never)"},
             search.grep),
        Tool("read_table", "Show a table file's shape, column types and first rows "
             "(CSV/TSV, Parquet, Arrow/Feather, JSON/NDJSON, XLSX; detected by content).",
             {"path": f"table file, {_PATH}",
              "rows": "how many rows to preview, 0-1000 (default 10)",
              "sheet": "XLSX sheet name or 0-based index (default the first sheet)"},
             tables.read_table),
        Tool("query_table", "Run SQL over table files, each named as a quoted path, e.g. "
             "SELECT city, avg(price) FROM 'sales.parquet' GROUP BY city. Files are scanned "
             "lazily; the result is cut at `rows`.",
             {"sql": "a SELECT query; name files in FROM / JOIN as quoted paths "
                     f"{_PATH}, e.g. FROM 'data/sales.csv'",
              "rows": "most result rows to show, 1-1000 (default 50)"},
             tables.query_table),
    ]


def _write_tools(files: Files, shell: Shell) -> list[Tool]:
    return [
        Tool("write_file", "Create or overwrite a file with the given text; makes parent folders.",
             {"path": f"file, {_PATH}", "content": "the whole new content of the file"},
             files.write_file, mutates=True),
        Tool("edit_file", "Replace one exact, unique occurrence of `old` with `new` in a file.",
             {"path": f"file, {_PATH}",
              "old": "exact text to replace, including whitespace; must occur once",
              "new": "replacement text",
              "replace_all": "replace every occurrence instead of exactly one (default false)"},
             files.edit_file, mutates=True),
        Tool("run_python", "Run Python source in the root (src/ is importable); "
             "prints exit code, stdout and stderr.",
             {"code": "Python source to run", "timeout": "seconds before it is killed (default 60)"},
             shell.run_python, mutates=True),
        Tool("run", "Run a shell command in the root; prints exit code, stdout and stderr.",
             {"command": "shell command line", "timeout": "seconds before it is killed (default 60)"},
             shell.run, mutates=True),
    ]


def _web_tools(root: Root, files: Files, *, read_only: bool, private: bool) -> list[Tool]:
    from ._web_policy import AddressPolicy
    from .web import Web

    web = Web(root, files, read_only=read_only, policy=AddressPolicy(allow_private=private))
    save = {} if read_only else {
        "save": f"also write the downloaded file here, {_PATH} (default: do not save)"}
    return [
        Tool("web_fetch", "Fetch an http(s) URL: a page's main text, title and links; "
             "plain text and JSON as sent; other content by type and size.",
             {"url": "http:// or https:// URL"}, web.web_fetch),
        Tool("web_table", "Preview a remote table (CSV/TSV, Parquet, JSON, XLSX) like "
             "read_table: shape, column types, first rows.",
             {"url": "http:// or https:// URL of the table file",
              "fmt": "table format when the URL does not show it: csv, tsv, parquet, "
              "json, ndjson, xlsx (default: from the extension or content type)",
              **save},
             web.web_table, mutates=not read_only),
        Tool("web_image", "Inspect a remote image: content type, byte size, pixel size.",
             {"url": "http:// or https:// URL of the image", **save},
             web.web_image, mutates=not read_only),
    ]
