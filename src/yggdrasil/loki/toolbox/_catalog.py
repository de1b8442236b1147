"""The built-in tools: each hand's functions wired into Tools with what the model reads.

The descriptions and per-argument lines here are what a model learns the tools from
(``Toolbox.spec()``, native tool schemas, MCP); the behaviour lives in the hands.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..code import Code
from ..diagnostics import Diagnostician
from ..files import Files, Root
from ..media import MediaReader
from ..search import Search
from ..shell import Shell
from ..tables import TableReader
from ..web import AddressPolicy, Web
from ._catalog_code import code_tools, read_file_tool
from ._catalog_media import edit_notebook_tool, with_media
from ._diagnosed import diagnosed, diagnostics_tool
from ._tool import Tool

__all__ = ["job_tools", "read_tools", "web_tools", "write_tools"]

_PATH = "relative to the root (absolute paths inside it work too)"


def read_tools(root: Root, files: Files, tables: TableReader | None = None, *,
               code_cache: bool | None = None, code_key: Path | None = None,
               doctor: Diagnostician | None = None, media: MediaReader | None = None,
               ) -> list[Tool]:
    search = Search(root, spill=files.spill)
    tables = tables or TableReader(root)
    code = Code(root, cache=code_cache, cache_key=code_key)
    return [
        Tool("list_dir", "List a folder: 'name/' for a folder, 'name  (<size>b)' for a file.",
             {"path": f"folder, {_PATH}; default the root"}, files.list_dir,
             title="List a folder"),
        with_media(read_file_tool(files, code), files, media),
        Tool("find", "Find files by glob, e.g. '*.py' or 'src/**/test_*.py'; one path per line. "
             "Skips .git, hidden files and what .gitignore/.ignore exclude, and says how many.",
             {"pattern": "glob: without '/' it matches file names at any depth; with '/' the "
                         "root-relative path ('*' stays in one folder, '**' crosses folders)",
              "path": f"folder to search, {_PATH}; default the root",
              "include_ignored": "also list ignored and hidden files (default false; .git never)"},
             search.find, title="Find files"),
        Tool("grep", "Search file contents for a regex; prints 'path:line: text'. Skips .git, "
             "hidden, ignored (.gitignore/.ignore) and binary files, and says how many.",
             {"pattern": "regular expression (ripgrep/Rust syntax; no look-around or "
                         "backreferences), matched line by line",
              "path": f"file or folder to search, {_PATH}; default the root; or the id of "
                      "a cut output (output://...)",
              "glob": "only files whose name matches this glob, e.g. '*.py' or '*.{js,ts}'",
              "ignore_case": "match case-insensitively (default false)",
              "include_ignored": "also search ignored and hidden files (default false; "
                                 "binary files and .git never)"},
             search.grep, title="Search file contents"),
        *code_tools(code),
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
        *([diagnostics_tool(root, doctor)] if doctor is not None else []),
    ]


def write_tools(files: Files, shell: Shell, doctor: Diagnostician | None = None,
                media: MediaReader | None = None) -> list[Tool]:
    checked = _checked(doctor)
    return [
        *([edit_notebook_tool(files, media, checked)] if media is not None else []),
        Tool("write_file", "Create or overwrite a file with the given text; makes parent folders.",
             {"path": f"file, {_PATH}", "content": "the whole new content of the file"},
             checked(files.write_file), mutates=True, idempotent=True),
        _edit_file(files, checked),
        Tool("run_python", "Run Python source in the root (src/ is importable); "
             "prints exit code, stdout and stderr.",
             {"code": "Python source to run", "timeout": "seconds before it is killed (default 60)",
              "background": _BACKGROUND},
             shell.run_python, mutates=True, title="Run Python code"),
        Tool("run", "Run a shell command in the root; prints exit code, stdout and stderr.",
             {"command": "shell command line", "timeout": "seconds before it is killed (default 60)",
              "background": _BACKGROUND},
             shell.run, mutates=True, title="Run a shell command"),
    ]


def _checked(doctor: Diagnostician | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A file tool's function, wrapped so its result says what its changes introduced."""
    if doctor is None:
        return lambda fn: fn
    return lambda fn: diagnosed(fn, doctor)


def _edit_file(files: Files, checked: Callable[[Callable[..., Any]], Callable[..., Any]],
               ) -> Tool:
    return Tool(
        "edit_file", "Replace `old` with `new` in a file: one place (unless replace_all), or "
        "several edits at once with `edits`. Slips in `old` (indentation, tabs/spaces, "
        "trailing spaces, line endings, curly quotes) are forgiven when it still matches one "
        "place; the answer shows the diff of what changed.",
        {"path": f"file, {_PATH}",
         "old": "text to replace, copied from the file (whole lines when unsure of the "
                "indentation); must match one place",
         "new": "replacement text",
         "replace_all": "replace every occurrence instead of exactly one (default false)",
         "edits": 'several edits in one call, applied in order, all or nothing: '
                  '[{"old": "...", "new": "...", "replace_all": false}, ...]'},
        checked(files.edit_file), mutates=True)


_BACKGROUND = ("true: start it as a background job (a server, a watcher, a long build) and "
               "return at once with its id and first second of output; timeout does not "
               "apply (default false)")


def job_tools(shell: Shell) -> list[Tool]:
    """The tools that follow background jobs (started by run/run_python background=true)."""
    jobs = shell.jobs
    job = "the job's id, from 'started job <id>'"
    return [
        Tool("job_output", "What a background job printed since the last read, then "
             "'job <id> running' or its exit code, and the files it changed so far.",
             {"job": job, "wait": "seconds to wait for new output or the end, 0-60 (default 0)"},
             jobs.output, title="Read a job's output",
             idempotent=False),  # a read consumes what it shows: a retry would not show it
        Tool("job_input", "Write a line to a background job's stdin (answer a prompt, drive "
             "a REPL); shows what it printed in reply.",
             {"job": job, "text": "what to send; a newline is added unless it ends with one",
              "eof": "then close its stdin (end of input; default false)"},
             jobs.send, mutates=True, title="Write to a job's stdin"),
        Tool("job_stop", "Stop a background job (SIGINT, then SIGTERM, then SIGKILL, with "
             "everything it started) and show its last output and exit code.",
             {"job": job}, jobs.stop, mutates=True, title="Stop a job"),
        Tool("jobs", "List this run's background jobs: id, state, age, output size, command.",
             {}, jobs.listing, title="List background jobs"),
    ]


def web_tools(root: Root, files: Files, *, read_only: bool, private: bool,
              tables: TableReader | None = None, media: MediaReader | None = None,
              ) -> list[Tool]:
    tables = tables or TableReader(root)  # web_table's previews run in its fenced worker
    web = Web(root, files, read_only=read_only, policy=AddressPolicy(allow_private=private),
              preview_table=tables.preview_bytes,
              show_image=media.picture if media is not None else None)  # and pictures in its
    save = {} if read_only else {
        "save": f"also write the downloaded file here, {_PATH} (default: do not save)"}
    return [
        Tool("web_fetch", "Fetch an http(s) URL: a page's main text, title and links; "
             "plain text and JSON as sent; other content by type and size.",
             {"url": "http:// or https:// URL"}, web.web_fetch, open_world=True),
        Tool("web_table", "Preview a remote table (CSV/TSV, Parquet, JSON, XLSX) like "
             "read_table: shape, column types, first rows.",
             {"url": "http:// or https:// URL of the table file",
              "fmt": "table format when the URL does not show it: csv, tsv, parquet, "
              "json, ndjson, xlsx (default: from the extension or content type)",
              **save},
             web.web_table, mutates=not read_only, open_world=True),
        Tool("web_image", "Look at a remote image: it is shown as a picture (downscaled to "
             "fit), with its content type, byte size and pixel size.",
             {"url": "http:// or https:// URL of the image", **save},
             web.web_image, mutates=not read_only, open_world=True),
    ]
