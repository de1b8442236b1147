"""Loki tools: the file/shell capabilities the agent acts through.

A :class:`Tool` is one thing the loop can do with its hands; a :class:`Toolbox` holds the
tools plus ``changed``, the root-relative files a run created, edited or deleted.
:func:`filesystem_toolbox` assembles the default toolbox, every path confined to a root.
This module only wires: ``Tool`` and ``Toolbox`` live in ``toolbox/`` with the built-in
tool catalog; paths in ``files/`` (``Root``), search in ``search/``, code navigation in
``code/``, commands in
``shell/`` over ``sandbox/``, tables in ``tables/`` over ``yggdrasil.io``, the web in ``web/``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .checkpoints import CheckpointLimits, Checkpoints, checkpoint_folder
from .code import CACHE_KEY, cache_hidden, cache_wanted, syntax_error
from .diagnostics import default_servers
from .files import (
    DEFAULT_PROTECTED,
    Approvals,
    Files,
    Journal,
    Root,
    StoreCopies,
    StoreError,
    SyntaxGate,
)
from .media import MediaLimits, MediaReader
from .sandbox import guard_imports
from .sandbox import landlock_status as sandbox_status
from .search import protection
from .settings import Settings, config_dir, user_file, with_keywords
from .shell import CommandRules, JobLimits, Shell, parse_rules
from .tables import TableReader
from .toolbox import (
    McpServer,
    Observation,
    Tool,
    Toolbox,
    ToolResult,
    diagnostician,
    edit_tools,
    hooks,
    job_tools,
    outputs_of,
    read_tools,
    rewind_tool,
    web_tools,
    write_tools,
)

__all__ = ["DEFAULT_PROTECTED", "McpServer", "Observation", "Tool", "ToolResult", "Toolbox",
           "filesystem_toolbox", "sandbox_status"]


def filesystem_toolbox(
    root: str | Path = ".",
    *,
    read_only: bool | None = None,
    allow_shell: bool = False,
    allow_web: bool | None = None,
    confirm: Callable[[str], Any] | None = None,
    settings: Settings | None = None,
    **keywords: Any,
) -> Toolbox:
    """Build the default toolbox rooted at ``root``.

    The read tools (list_dir, read_file, find, grep, outline, find_symbol, repo_map,
    read_table, query_table, diagnostics) are always present. write_file, edit_file, apply_patch,
    undo_edit, run_python and run (with background jobs) are added unless ``read_only``.
    ``allow_shell`` is kept for back-compat and no longer gates ``run``. Network tools
    (web_*) are added only with ``allow_web``. ``confirm(action)`` is asked before
    overwriting or editing an existing file outside the system temp dir (and for commands
    and MCP tools an ``ask`` rule matches); it answers True/False or ``"yes"``, ``"no"``,
    ``"always"``: "always" allows the same question's key (this verb on this path, this
    rule, this tool) for the rest of the toolbox's life without asking again.

    ``settings`` (a :class:`~yggdrasil.loki.settings.Settings`, e.g. from
    ``load_settings(root)``: the user's and the project's files) configures everything
    else: how commands are fenced (Landlock, namespaces, network, writable folders,
    hidden paths), protected files, command rules, hooks, background jobs, the syntax
    gate, the code cache and MCP servers whose tools join the toolbox. Each other keyword
    sets one field over it, and a keyword given (``read_only=False`` too) wins over the
    settings (``sandbox`` is ``settings.fence.sandbox``); every setting, its keyword, flag
    and variable are in the settings table of docs/configuration.md
    (``yggdrasil.loki.settings.settings_table()``).
    An unknown keyword is a TypeError naming the closest; a bad value a ValueError naming
    the keyword. ``Toolbox.status`` (the end of ``spec()``) says which fence holds.
    """
    del allow_shell  # back-compat only: run is present whenever the toolbox may write
    given = {k: v for k, v in (("read_only", read_only), ("allow_web", allow_web),
                               ("confirm", confirm)) if v is not None}
    return _assemble(root, with_keywords(settings, {**given, **keywords}))


def _code_key(own: Path, s: Settings, shell: Shell | None) -> tuple[Path | None, str]:
    """The key file the code cache is signed with, when the cache is wanted and no command
    of this toolbox can read or write it; else None and why (the cache is then off)."""
    if not cache_wanted(s.code.cache):
        return None, ""
    key = own / CACHE_KEY
    try:
        own.mkdir(parents=True, exist_ok=True, mode=0o700)  # before any command: hidden
    except OSError as exc:
        return None, f"The code cache is off: {exc}"
    if shell is not None and not shell.hides(own):
        return None, (f"The code cache is off: commands could read its key in {own} "
                      "(no fence, or it lies in the root or a writable folder)")
    return key, ""


def _assemble(root: str | Path, s: Settings) -> Toolbox:
    """The toolbox ``s`` describes: the one place settings become hands."""
    policy = s.policy
    confirm = Approvals(policy.confirm) if policy.confirm is not None else None  # "always"
    own = config_dir(os.environ)  # loki's own settings: no tool writes them, commands never see them
    where = Root.at(root, protect=protection(policy.protect),
                    locks_git=not s.fence.git_writable, sealed=(own, user_file(os.environ)))
    guard_imports(where.path)  # what commands write in the root never runs in this process
    rules = CommandRules(parse_rules(policy.rules), policy.rules_default)
    keeper, kept_note = _checkpoints(where, s)
    journal = Journal(where, copies=StoreCopies(keeper.store, s.checkpoints.max_file)
                      if keeper else None)  # the originals undo keeps: the checkpoints' too
    outputs = outputs_of(s.outputs, where.path)
    hidden = (str(own), *cache_hidden(where.path),  # and its code cache, kept outputs
              *([str(outputs.spill.base)] if outputs.spill else []),
              *([str(keeper.folder)] if keeper else []))  # and the checkpoints
    shell = None if s.read_only else Shell.fenced(
        where, journal, s.fence, limits=JobLimits(**s.jobs.model_dump()), rules=rules,
        confirm=confirm, hidden=hidden, outputs=outputs)
    if shell is not None and keeper is not None:
        shell.before_command = keeper.wait_baseline  # commands are kept against its baseline
    doctor = diagnostician(s.diagnostics, where, _reader(where, s, shell, hidden),
                           default_servers)
    files = Files(where, confirm=confirm, spill=outputs.spill, **hooks(journal, doctor),
                  syntax=SyntaxGate(s.editing.on_syntax_error, grammar=syntax_error))
    tables = TableReader(where)  # one fenced table worker per toolbox, started on first use
    media = MediaReader(where, MediaLimits(max_width=s.media.image_width,  # and one media worker
                                           max_height=s.media.image_height,
                                           pdf_pages=s.media.pdf_pages))
    key, key_note = _code_key(own, s, shell)
    notes = [shell.status() if shell else "", key_note,
             where.protect.describe() if where.protect else "",
             doctor.describe(edits=not s.read_only) if doctor is not None else "", kept_note]
    if not tables.worker.abi:  # say plainly that table files are parsed without a fence
        notes.append(tables.status())
    if not media.worker.abi:  # and images, PDFs, notebooks, documents
        notes.append(media.status())
    box = Toolbox(
        before_call=policy.before_call, after_call=policy.after_call, root=where, settings=s,
        journal=journal, fence=shell.summary() if shell else "",
        checkpointing=keeper.start(journal) if keeper else None,
        gate=lambda name: rules.check(name, confirm, action=f"call {name} (an MCP server's tool)"),
        notes="\n".join(n for n in notes if n), parts=[shell.jobs] if shell else [],
        resources=[*([shell] if shell else []), *([shell.proxy] if shell and shell.proxy else []),
                   tables, media, *([keeper] if keeper else []),
                   *([outputs.spill] if outputs.spill else [])], outputs=outputs,
        diagnostician=doctor)
    tools = read_tools(where, files, tables, code_cache=s.code.cache, code_key=key,
                       doctor=doctor, media=media)
    if shell is not None:
        tools += (write_tools(files, shell, doctor, media) + edit_tools(files, box, doctor)
                  + job_tools(shell))
        if keeper is not None and s.checkpoints.rewind_tool:
            tools.append(rewind_tool(box))
    if s.web.enabled:
        tools += web_tools(where, files, read_only=s.read_only,
                           private=s.fence.allow_private_hosts, tables=tables, media=media)
    for tool in tools:
        box.add(tool)
    try:
        for server in s.mcp_servers.values():
            box.add_mcp(server)
    except BaseException:
        box.close()  # the servers started so far, and the rest the toolbox holds
        raise
    return box


def _reader(where: Root, s: Settings, shell: Shell | None, hidden: tuple[str, ...],
            ) -> Callable[[list[str], Path, Any], tuple[list[str], dict[str, str], bool]]:
    """How a language server is fenced: as a reader of the root, by the toolbox's shell
    (a read-only toolbox makes one for that when a server first starts)."""
    made: list[Shell] = [shell] if shell is not None else []

    def reader(argv: list[str], scratch: Path, reads: Any) -> tuple[list[str], dict[str, str],
                                                                    bool]:
        if not made:
            made.append(Shell(where, sandbox=s.fence.sandbox, network=False,
                              hidden=(*s.fence.hidden, *hidden), env=s.fence.env))
        return made[0].reader_argv(argv, scratch, reads)

    return reader


def _checkpoints(root: Root, settings: Settings) -> tuple[Checkpoints | None, str]:
    """The toolbox's checkpoints (None: off, or the store is out of reach), and a status
    line when they were asked for and cannot be kept."""
    if settings.read_only or not settings.checkpoints.enabled:
        return None, ""
    folder = checkpoint_folder().resolve()
    if folder == root.path or folder.is_relative_to(root.path):
        return None, (f"Checkpoints are off: their folder {folder} lies inside the root, where "
                      "commands could change them (set LOKI_STATE_DIR elsewhere).")
    c = settings.checkpoints
    limits = CheckpointLimits(c.max_file, c.max_bytes, c.max_age_days * 86400)
    try:
        return Checkpoints(root, folder, limits=limits), ""
    except StoreError as exc:
        return None, f"Checkpoints are off: {exc}."
