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
from typing import Any, Unpack

from .checkpoints import CheckpointLimits, Checkpoints, checkpoint_folder
from .code import cache_hidden, syntax_error
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
from .netproxy import AddressPolicy, AllowedHosts, NetProxy, ProxyRules
from .sandbox import guard_imports
from .sandbox import landlock_status as sandbox_status
from .search import protection
from .settings import Settings, ToolboxKeywords, config_dir, with_keywords
from .shell import CommandRules, JobLimits, Shell, parse_rules, writable_paths
from .tables import TableReader
from .toolbox import (
    McpServer,
    Observation,
    Tool,
    Toolbox,
    ToolResult,
    edit_tools,
    job_tools,
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
    read_only: bool = False,
    allow_shell: bool = False,
    allow_web: bool = False,
    confirm: Callable[[str], Any] | None = None,
    settings: Settings | None = None,
    **keywords: Unpack[ToolboxKeywords],
) -> Toolbox:
    """Build the default toolbox rooted at ``root``.

    ``settings`` (a :class:`~yggdrasil.loki.settings.Settings`, e.g. from
    ``load_settings(root)``: the user's and the project's files) configures everything
    below; each keyword that is given sets its field over it (``sandbox`` is
    ``settings.fence.sandbox``, ``max_jobs`` is ``settings.jobs.max_jobs``...; the four
    documented ones, ``read_only``, ``allow_web`` and ``confirm``, when they are not left
    at their defaults).

    The read tools (list_dir, read_file, find, grep, outline, find_symbol, repo_map,
    read_table, query_table) are always present.
    write_file, edit_file, run_python and run are added unless ``read_only``.
    ``allow_shell`` is kept for back-compat and no longer gates ``run``. Network tools
    (web_*) are added only with ``allow_web``. ``confirm(action)`` is asked before
    overwriting or editing an existing file outside the system temp dir (and for commands
    and MCP tools an ``ask`` rule matches); it answers True/False or ``"yes"``, ``"no"``,
    ``"always"``: "always" allows the same question's key (this verb on this path, this
    rule, this tool) for the rest of the toolbox's life without asking again.
    ``allow_private_hosts`` lets the web tools reach private, loopback and link-local
    addresses (an intranet, a local test server); cloud metadata addresses stay refused.

    Commands (run, run_python) are fenced by Landlock where the kernel has it, and each
    runs in namespaces of its own where user namespaces work (nothing it starts outlives
    it; private /tmp, /dev/shm and /run/user/<uid>; no setuid/setgid bits):
    ``sandbox="auto"`` fences with what this machine offers, ``"require"`` refuses
    commands (ERROR observation) unless every layer is there, ``"off"`` never fences.
    ``network=False`` gives commands a network namespace with loopback only, and blocks
    TCP connect/bind with Landlock (ABI 4+) as well. ``network=["pypi.org",
    "*.github.com"]`` lets them reach those hosts over HTTP(S) and nothing else: a network
    namespace whose only way out is the toolbox's proxy (``HTTP_PROXY``/``HTTPS_PROXY``),
    which checks each host and the address it resolves to (the web tools' address
    policy; ``allow_private_hosts`` opens private addresses, ``hosts`` maps names to
    addresses instead of DNS: for tests with local servers). ``git_writable=False`` (the default)
    keeps ``.git/config`` and ``.git/hooks`` read-only for commands. ``writable`` adds folders
    commands may write besides the root and their scratch TMPDIR; ``hidden`` lists paths a
    fenced command cannot read (None: well-known credential stores such as ~/.ssh and
    ~/.aws; ``()`` hides nothing). A fenced command connects only to UNIX sockets in the
    root, its TMPDIR, ``writable`` folders and its private /tmp (a tmux server, ssh-agent
    or docker socket elsewhere is out of reach); ``unix_sockets`` names more sockets or
    folders of sockets it may reach. Commands get the environment without secret-looking
    variables; ``env`` adds variables as given.
    ``Toolbox.status`` (the end of ``spec()``) says which of these hold.

    ``on_syntax_error``: after a write, edit or patch, a file that no longer parses (.py,
    .json, .toml, .yaml by their parsers, the code-navigation languages by their grammar)
    is written with a WARNING (``"warn"``) or refused, the file untouched (``"reject"``). apply_patch and undo_edit come with the write tools.
    ``code_cache=True`` keeps the code index (outline, find_symbol, repo_map) on disk under
    the user's cache folder, never inside the root; None reads ``LOKI_CODE_CACHE=1``. That
    folder is hidden from commands whatever ``hidden`` says, and files protected by default
    (``secrets.*``, ``.env``...) are never written to it, even with ``protect=()``.

    ``run``/``run_python`` with ``background=true`` start background jobs, followed with
    job_output, job_input, job_stop and jobs: at most ``max_jobs`` running at once (0:
    none), each stopped after ``job_lifetime`` seconds, keeping at most ``job_buffer``
    bytes per stream of output not yet read (its head and tail). Jobs run under the same
    fence as ``run`` and stop with the toolbox: ``close()``, ``with ... as box:``, or the
    interpreter's exit.

    ``protect``: globs (gitignore syntax, matched against root-relative paths) of files
    that may hold secrets: no tool reads, lists, searches, edits, overwrites, moves or
    deletes them (``list_dir`` shows they exist, marked ``[protected]``; find and grep
    skip and count them), and commands see them as unreadable. ``DEFAULT_PROTECTED``
    (.env, keys, credentials...) by default; a list replaces it, ``DEFAULT_PROTECTED +
    (...)`` adds to it, ``()`` turns protection off.

    ``rules``: ``[("deny", "git push"), ("ask", "rm -rf"), ("allow", "pytest")]`` match each
    command a ``run`` line would run (pipelines, lists, subshells, ``$(...)``, ``bash -c``,
    wrappers such as ``env``/``sudo``/``xargs`` looked into) by its leading words; the first
    matching rule decides, ``rules_default`` decides the rest; deny is an ERROR naming the
    rule, ask calls ``confirm("run <command>")`` (declined, or no ``confirm``: REFUSED).
    ``run_python`` counts as the command ``python``. Where the kernel offers seccomp user
    notification, every program a command starts, at any depth (scripts, make, xargs,
    python's subprocess, background jobs), is checked again when it starts: a denied one's
    exec fails with EPERM and the observation says ``loki rules: refused '<command>'
    (rule deny '<rule>')``; an asked one waits for ``confirm``.

    ``before_call(tool, args)`` and ``after_call(tool, args, observation)`` are hooks
    around every call: a string from ``before_call`` refuses the call with that message, a
    string from ``after_call`` replaces the observation; an exception in a hook is an ERROR
    observation.

    ``checkpoints`` (default True): after every call that may change files, a checkpoint
    of what it changed is kept outside the root (the state folder), what commands and jobs
    changed too; ``Toolbox.checkpoints()`` lists them and ``Toolbox.rewind(step)`` puts
    the files back as after one. ``rewind_tool=True`` gives the model a ``rewind`` tool.

    ``mcp_servers``: MCP servers whose tools to add (``McpServer`` or mappings of its
    fields, see ``Toolbox.add_mcp``), named ``<server>__<tool>``. They run outside the
    fence; ``rules`` (and ``rules_default``) decide their calls by tool name, e.g.
    ``("deny", "db__drop_table")``, and the hooks apply to them.
    """
    del allow_shell  # back-compat only: run is present whenever the toolbox may write
    given = {k: v for k, v in (("read_only", read_only), ("allow_web", allow_web),
                               ("confirm", confirm)) if v}
    s = with_keywords(settings, {**given, **keywords})
    fence, policy = s.fence, s.policy
    confirm = Approvals(policy.confirm) if policy.confirm is not None else None  # "always"
    where = Root.at(root, protect=protection(policy.protect), git_writable=fence.git_writable)
    guard_imports(where.path)  # what commands write in the root never runs in this process
    box = Toolbox(before_call=policy.before_call, after_call=policy.after_call, root=where)
    box.settings = s
    command_rules = CommandRules(parse_rules(policy.rules), policy.rules_default)
    box.gate = lambda name: command_rules.check(name, confirm,
                                                action=f"call {name} (an MCP server's tool)")
    keeper, note = _checkpoints(where, s)
    journal = Journal(where, box.record,
                      StoreCopies(keeper.store, s.checkpoints.max_file) if keeper else None)
    box.journal = journal
    if keeper is not None:
        box.checkpointing = keeper.start(journal)
        box.own(keeper)
    files = Files(where, confirm=confirm, on_change=journal.after_write,
                  before_change=journal.before_write, on_remove=journal.after_remove,
                  syntax=SyntaxGate(s.editing.on_syntax_error, grammar=syntax_error))
    tables = TableReader(where)  # one fenced table worker per toolbox, started on first use
    tools = read_tools(where, files, tables, code_cache=s.code.cache)
    if not s.read_only:
        network = fence.network
        proxy = None if isinstance(network, bool) else NetProxy(ProxyRules(
            AllowedHosts(network), AddressPolicy(allow_private=fence.allow_private_hosts),
            dict(fence.hosts)))
        shell = Shell(where, journal, sandbox=fence.sandbox, network=network is True,
                      proxy=proxy, writable=writable_paths(fence.writable), env=fence.env,
                      unix_sockets=writable_paths(fence.unix_sockets, "unix_sockets path"),
                      hidden=(*fence.hidden, str(config_dir(os.environ)),  # loki's own settings,
                              *cache_hidden(where.path),  # its code cache and checkpoints
                              *([str(keeper.folder)] if keeper else [])),
                      git_writable=fence.git_writable,
                      limits=JobLimits(s.jobs.max_jobs, s.jobs.lifetime, s.jobs.buffer),
                      rules=command_rules, confirm=confirm,
                      before_command=keeper.wait_baseline if keeper else None)
        tools += write_tools(files, shell) + edit_tools(files, box) + job_tools(shell)
        if keeper is not None and s.checkpoints.rewind_tool:
            tools.append(rewind_tool(box))
        box.attach(shell.jobs)
        box.own(shell, *([proxy] if proxy is not None else []))
        box.status, box.fence = shell.status(), shell.summary()
    if s.web.enabled:
        tools += web_tools(where, files, read_only=s.read_only,
                           private=fence.allow_private_hosts, tables=tables)
    notes = [box.status, where.protect.describe() if where.protect else "", note]
    if not tables.worker.abi:  # say plainly that table files are parsed without a fence
        notes.append(tables.status())
    box.status = "\n".join(n for n in notes if n)
    box.own(tables)
    for tool in tools:
        box.add(tool)
    try:
        for server in s.mcp_servers.values():
            box.add_mcp(server)
    except BaseException:
        box.close()  # the servers started so far, and the rest the toolbox holds
        raise
    return box


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
