"""A Toolbox: the tools of one run, how the model calls them, and what the run changed."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import InitVar, dataclass, field, replace
from typing import Any, Protocol

from ..checkpoints import Checkpoints
from ..diagnostics import Diagnostician
from ..errors import LokiError, ToolDefinitionError, ToolError
from ..files import Journal, Reverted, Root
from ..outputs import Outputs
from ..results import (
    CheckpointList,
    ErrorResult,
    RewindResult,
    TextPart,
    ToolResult,
    did_you_mean,
    hook_refusal,
    retexted,
    tool_result,
)
from ..sandbox import cancel_scope
from ._calls import RunningCalls
from ._flavors import FLAVORS, Flavor, reshape
from ._mcp import McpServer, connect
from ._schema import bind_args
from ._tool import Tool

__all__ = ["AfterCall", "Attached", "BeforeCall", "Toolbox"]

log = logging.getLogger("yggdrasil.loki.tools")

MAX_RUN_DIFF = 1_000_000  # characters of Toolbox.diff(), the cut said
_CLOSE_WAIT = 30.0  # seconds close() waits for cancelled calls to wind up

# before_call(tool, args) -> None to go on, or a message that refuses the call;
# after_call(tool, args, observation) -> None to keep it, or the observation to show instead.
BeforeCall = Callable[[str, Any], "str | None"]
AfterCall = Callable[[str, Any, str], "str | None"]


class Attached(Protocol):
    """What a toolbox owns across calls (background jobs): see ``Toolbox.attach``."""

    lock: Callable[..., AbstractContextManager[bool]]

    def settle(self, exclude: Collection[str] = ()) -> None: ...

    def status(self) -> str: ...

    def close(self) -> None: ...


class Closeable(Protocol):
    def close(self) -> None: ...


class _ChangedList(list[str]):
    """``Toolbox.changed``: a plain list to everyone, which notes when it is edited from
    outside ``record`` (then ``record`` re-indexes it once instead of trusting its index)."""

    edited = True


def _marking(name: str) -> Callable[..., Any]:
    """list.<name>, marking the list as edited first."""
    def method(self: _ChangedList, *args: Any, **kwargs: Any) -> Any:
        self.edited = True
        return getattr(list, name)(self, *args, **kwargs)
    method.__name__ = name
    return method


for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "extend",
              "insert", "pop", "remove", "clear", "sort", "reverse"):
    setattr(_ChangedList, _name, _marking(_name))


@dataclass
class Toolbox:
    """A named set of tools plus the run state the loop reports on.

    ``changed`` lists every root-relative file the run created, modified or deleted (by the
    write/edit tools and by commands), in first-touch order; ``changes`` maps each of them
    to its status against the start of the run: ``created``, ``modified``, ``deleted`` or
    ``transient`` (created and gone again). ``revert()`` undoes the run where it can.

    ``call``/``run`` may be used from several threads at once: calls to tools that may
    change files (``mutates``) run one at a time, each with its change tracking, so every
    change report is exact; read tools run alongside them and each other. ``cancel()``
    stops what is running (a command's whole process tree) and what is waiting to run.

    A toolbox has a lifetime: ``close()`` (or leaving ``with filesystem_toolbox(...) as
    box:``) also stops every background job; the interpreter's exit does too.

    ``before_call(tool, args)`` runs before every call of a known tool: a string refuses
    the call (the model reads ``REFUSED: <message>``); ``after_call(tool, args,
    observation)`` runs after it: a string replaces the observation (run a formatter after
    each edit and append what it said). Both run in the call's turn (a mutating call's
    lock held, so a hook may call the box's tools and their changes count for the call);
    an exception in either is an ``ERROR:`` observation, never raised.

    ``checkpointing``: with checkpoints on (``filesystem_toolbox``'s default), a checkpoint
    of the files is taken after every call that may change them (``ToolResult.checkpoint``
    is its number); ``checkpoints()`` lists them and ``rewind(step)`` puts the files back
    as they were right after one, what commands changed too.

    ``root``: the ``Root`` its file tools are confined to (``filesystem_toolbox`` sets it;
    ``Loki.act`` runs there and reads AGENTS.md through it). ``add_mcp`` adds an MCP
    server's tools; ``gate(tool)`` may refuse their calls (the command rules).

    Built once, from what its maker made: ``journal`` (its ``record`` becomes this box's),
    ``settings`` it was built from, ``fence`` (how commands run, in one phrase), ``notes``
    (the start of ``status``), ``parts`` to attach and ``resources`` to own.
    """

    tools: dict[str, Tool] = field(default_factory=dict)
    changed: list[str] = field(default_factory=_ChangedList)
    journal: Journal | None = field(default=None, repr=False, compare=False)
    checkpointing: Checkpoints | None = field(default=None, repr=False, compare=False)
    # the settings.Settings it was built from (filesystem_toolbox), for surfaces that report them
    settings: Any = field(default=None, repr=False, compare=False)
    fence: str = field(default="", repr=False, compare=False)  # how commands run, in one phrase
    _status: str = field(default="", init=False, repr=False, compare=False)
    _parts: list[Attached] = field(default_factory=list, init=False, repr=False, compare=False)
    _resources: list[Closeable] = field(default_factory=list, init=False, repr=False,
                                        compare=False)
    closed: bool = field(default=False, init=False, compare=False)
    before_call: BeforeCall | None = field(default=None, repr=False, compare=False)
    after_call: AfterCall | None = field(default=None, repr=False, compare=False)
    root: Root | None = field(default=None, repr=False, compare=False)  # where its files live
    # gate(tool) raises (ToolError, Refused) to refuse a call of a tool that runs outside
    # the fence (an MCP server's): filesystem_toolbox's asks its command rules
    gate: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    _calls: RunningCalls = field(default_factory=RunningCalls, init=False, repr=False,
                                 compare=False)
    _touched: dict[str, None] | None = field(default=None, init=False, repr=False, compare=False)
    # the caps of its outputs in tokens, and its spill folder (filesystem_toolbox sets it)
    outputs: Outputs = field(default_factory=Outputs, repr=False, compare=False)
    # what checks the files its edits change (filesystem_toolbox sets it)
    diagnostician: Diagnostician | None = field(default=None, repr=False, compare=False)
    _index: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    notes: InitVar[str] = ""
    parts: InitVar[Sequence[Attached]] = ()
    resources: InitVar[Sequence[Closeable]] = ()

    def __post_init__(self, notes: str, parts: Sequence[Attached],
                      resources: Sequence[Closeable]) -> None:
        self._status = notes
        if self.journal is not None:
            self.journal.record = self.record  # what the journal sees the run changed
        for part in parts:
            self.attach(part)
        self.own(*resources)

    def add(self, tool: Tool) -> Tool:
        """Register a tool; a second tool with the same name is a definition error."""
        if tool.name in self.tools:
            raise ToolDefinitionError(f"a tool named {tool.name!r} is already in the toolbox")
        self.tools[tool.name] = tool
        return tool

    def add_mcp(self, server: McpServer | Mapping[str, Any]) -> list[Tool]:
        """Add the tools of an MCP server, named ``<server name>__<tool>``; returns them.

        ``server`` is an ``McpServer`` or a mapping of its fields (``name``, then
        ``command``/``args``/``env``/``cwd`` for a stdio server or ``url``/``headers`` for
        streamable HTTP, ``timeout``). The tools keep the server's schemas and say that
        they run outside loki's fence; before each call ``gate`` (the command rules, by
        tool name) may refuse it, and the hooks apply as to every tool. A call the server
        fails, or a server that died, is an ERROR observation. The session ends (a stdio
        server's process too) when the toolbox closes. ToolDefinitionError when the
        server cannot be started or a name is taken; ImportError without the ``mcp`` extra.
        """
        spec = server if isinstance(server, McpServer) else McpServer(**server)
        connection, tools = connect(spec, lambda name: self.gate(name) if self.gate else None)
        names = [t.name for t in tools]
        taken = [n for i, n in enumerate(names) if n in self.tools or n in names[:i]]
        if taken:
            connection.close()
            raise ToolDefinitionError(f"the MCP server {spec.name!r} has tools whose names are "
                                      f"taken: {', '.join(taken)}; give the server another name")
        for tool in tools:
            self.add(tool)
        self.own(connection)
        line = (f"Tools from the MCP server {spec.name!r} ({spec.name}__*, {len(tools)}) run "
                "outside the fence, as the user's own program.")
        self._status = "\n".join(s for s in (self._status, line) if s)
        return tools

    def tool(self, fn: Callable[..., Any] | None = None, *, mutates: bool = False) -> Any:
        """Decorator form of ``add(Tool.from_function(fn))``."""
        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            self.add(Tool.from_function(f, mutates=mutates))
            return f
        return register(fn) if fn is not None else register

    def names(self) -> list[str]:
        """The tool names, in catalog order (as the original Loki's ``Toolbox.names()``)."""
        return list(self.tools)

    def get(self, name: str) -> Tool | None:
        """The tool named ``name``, or None."""
        return self.tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def status(self) -> str:
        """How commands are fenced (the end of ``spec()``), then the running background
        jobs, if any, so the model is reminded of them."""
        return "\n".join(s for s in (self._status, *(p.status() for p in self._parts)) if s)

    @status.setter
    def status(self, text: str) -> None:
        self._status = text

    # -- what lives across calls (background jobs) and the toolbox's lifetime -----------

    def attach(self, part: Attached) -> None:
        """Own ``part``: it is settled around every mutating call and by ``revert``,
        listed in ``status``, closed by ``close``, and gets the mutating-call lock."""
        part.lock = self.serialized
        self._parts.append(part)

    @contextmanager
    def serialized(self, *, blocking: bool = True) -> Iterator[bool]:
        """Hold the lock mutating calls take (for work outside a call, such as a job
        settling what it changed when it ends); with ``blocking=False`` yield False at once
        when a mutating call holds it."""
        with self._calls.exclusive(threading.Event(), blocking=blocking) as turn:
            yield turn

    def close(self) -> None:
        """Stop what runs and release what the toolbox holds: calls in flight are
        cancelled, every background job is stopped with all it started, and the table
        worker process, the command proxy, the change watch and scratch folders are let go
        of (started again if a tool needs them later). Safe to call twice; file tools and
        ``revert()`` keep working (the undo copies stay until ``discard_undo()`` or the
        toolbox is collected). Each call lets go again of what was started since."""
        self.closed = True
        self.cancel()
        self.wait_idle(_CLOSE_WAIT)
        for part in self._parts:
            part.close()
        with self._calls.exclusive(threading.Event()):
            self._jobs_checkpoint()  # what the jobs did until they stopped
        for resource in self._resources:
            resource.close()
        if self.diagnostician is not None:
            self.diagnostician.close()

    def own(self, *resources: Closeable) -> None:
        """Close these with the toolbox (a table worker, a proxy, a shell's watch)."""
        self._resources.extend(resources)

    def discard_undo(self) -> None:
        """Delete the copies ``revert()`` restores from: after this nothing can be undone.
        For a process about to exit without running finalizers (a fleet's attempt)."""
        if self.journal is not None:
            self.journal.discard()

    def __enter__(self) -> Toolbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _settle(self, exclude: Collection[str] = ()) -> None:
        for part in self._parts:
            part.settle(exclude)

    def record(self, path: str) -> None:
        """Note a root-relative path as changed (first touch only).

        Checked against an index (a command may create 100,000 files), not by searching
        the list; ``changed`` stays the documented list: after an edit from outside (or a
        list assigned to it, which is taken over) the index is rebuilt once."""
        changed = self.changed
        if not isinstance(changed, _ChangedList):
            changed = self.changed = _ChangedList(changed)
        if changed.edited:
            self._index = {p: i for i, p in reversed(list(enumerate(changed)))}
            changed.edited = False
        if path not in self._index:
            self._index[path] = len(changed)
            list.append(changed, path)
        if self.checkpointing is not None:
            self.checkpointing.note(path)
        if self._touched is not None:
            self._touched.setdefault(path)  # the running mutating call's own paths, in order

    @property
    def changes(self) -> dict[str, str]:
        """Each changed path's status against the start of the run, from the journal."""
        entries = self.journal.entries if self.journal is not None else {}
        return {p: entries[p].status if p in entries else "modified" for p in self.changed}

    def diff(self, limit: int = MAX_RUN_DIFF) -> str:
        """The unified diff of every changed file against the start of the run, from the
        journal's originals; a file it cannot show gets a ``# <path>: why`` line."""
        if self.journal is None:
            return ""
        parts = []
        for rel in list(self.changed):
            try:
                parts.append(self.journal.unified_diff(rel))
            except LokiError as exc:  # the file turned into a folder, a link out...
                parts.append(f"# {rel}: {exc}\n")
        text = "".join(parts)
        if len(text) > limit:
            text = text[:limit] + f"\n# [diff cut at {limit} of {len(text)} characters]\n"
        return text

    def revert(self, paths: Iterable[str] | None = None) -> Reverted:
        """Undo this run's file changes where the original is known; never raises per path.

        ``paths`` (root-relative or absolute inside the root) limits the undo to those files.

        Files the write/edit tools changed get their original bytes and mode back. Files
        a command changed or deleted before a tool had kept a copy are listed in
        ``not_reverted`` with the reason. Files the run created (by any tool) are removed,
        with the folders made for them, only when nothing else is lost; otherwise they may
        hold the lost data and are kept (listed too). Reverted paths leave ``changed``.
        """
        if self.journal is None:
            return Reverted()
        only: set[str] | None = None
        refused: dict[str, str] = {}
        if paths is not None:
            only = set()
            for path in paths:
                try:
                    only |= self.journal.relative([path])
                except LokiError as exc:  # outside the root, protected, not a path name
                    refused[path] = str(exc)
        with self._calls.exclusive(threading.Event()):  # never under a running command
            self._settle()  # what background jobs changed is the run's too
            before = set(self.journal.entries)
            done = self.journal.revert(only)
            if self.checkpointing is not None:
                for path in (*done.restored, *done.removed):
                    self.checkpointing.note(path.rstrip("/"))
                if self._touched is None:  # undo_edit's own call takes its step
                    self.checkpointing.step("revert")
        done.not_reverted.update(refused)
        gone = before - set(self.journal.entries)
        self.changed[:] = [p for p in self.changed if p not in gone]
        return done

    def checkpoints(self) -> CheckpointList:
        """The checkpoints of this toolbox's run (and of the runs it continues): number,
        tool, files changed. ToolError when it keeps none."""
        return self._keeper().listing()

    def rewind(self, step: int, paths: Iterable[str] | None = None, *,
               dry_run: bool = False) -> RewindResult:
        """Put the root's files back as they were right after checkpoint ``step`` (0: as
        before the first), what commands and jobs changed too; ``paths`` limits it to
        those files. ``dry_run`` changes nothing and says what would be put back, with
        the diff. A path someone else changed since the last checkpoint, a protected
        file, and a file whose bytes were not kept (too big, unreadable, a FIFO) are
        listed in ``not_restored`` with why. The rewind is a checkpoint of its own.
        ToolError for a step that does not exist, or while another process rewinds the
        same root."""
        keeper = self._keeper()
        with self._calls.exclusive(threading.Event()):
            self._settle()
            result, back = keeper.rewind(step, paths, dry_run=dry_run,
                                         record=self._touched is None)
            gone = set(back)
            if self.journal is not None:
                for done in result.restored:
                    if done.action not in ("rmdir", "mkdir"):
                        self.journal.rewound(done.path, at_start=done.path in gone)
            self.changed[:] = [p for p in self.changed if p not in gone]
        return result

    def _keeper(self) -> Checkpoints:
        if self.checkpointing is None:
            raise ToolError("this toolbox keeps no checkpoints (checkpoints.enabled is off, "
                            "or it is read-only)")
        return self.checkpointing

    def spec(self) -> str:
        """The tool catalog as prompt text: one block per tool."""
        blocks = [tool.spec() for tool in self.tools.values()]
        if self.status:
            blocks.append(self.status)
        return "\n\n".join(blocks)

    def schemas(self, flavor: Flavor = "neutral") -> list[dict[str, Any]]:
        """Tool schemas (name, description, input_schema) for native tool calling.

        ``flavor`` reshapes each input schema for a vendor's rules: ``"neutral"`` (JSON
        Schema with defaults and limits), ``"anthropic"`` (the same), ``"openai-strict"``
        (every property required, optional ones nullable, no ``default``, closed objects;
        each entry also says ``strict``: whether OpenAI's strict mode can take it) and
        ``"gemini"`` (the OpenAPI subset of function declarations). Limits (``minimum``,
        ``maximum``, ``enum``) are kept in every flavor: they are what ``call`` checks.
        """
        if flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {FLAVORS}, not {flavor!r}")
        return [{"name": t.name, "description": t.description,
                 **reshape(t.input_schema, flavor)} for t in self.tools.values()]

    def to_dict(self) -> dict[str, Any]:
        return {"tools": [t.to_dict() for t in self.tools.values()],
                "changed": list(self.changed), "status": self.status,
                "changes": self.changes}

    def call(self, name: str, args: dict[str, Any], *,
             cancel: threading.Event | None = None) -> str:
        """Run a tool by name; surface any error as a readable observation, never a raise.

        The text of :meth:`invoke`'s result. ``cancel``: an event that, once set, stops
        the call (see ``invoke``).
        """
        return self.invoke(name, args, cancel=cancel).text

    def invoke(self, name: str, arguments: dict[str, Any], *,
               cancel: threading.Event | None = None) -> ToolResult:
        """Run a tool by name and answer with its typed result, never a raise.

        The :class:`ToolResult` holds the parts a model is shown (``.text``, ``.parts``),
        the tool's typed data (``.data``: a built-in tool's result model, a custom tool's
        own pydantic model, None for a string), ``is_error``, ``refused`` and the files
        this call changed (``changed``). Setting ``cancel`` (or calling ``cancel()``) stops
        a running command with its whole process tree (``exit=cancelled ...``) or, for a
        call still waiting its turn behind another mutating call, answers
        ``ERROR: <tool> was cancelled before it started``. The diagnostics of an earlier
        edit that were still pending when it answered come after the text (``.late``).
        """
        done = self._answer(name, arguments, cancel)
        doctor = self.diagnostician
        return done.with_late(doctor.late()) if doctor is not None else done

    def _answer(self, name: str, arguments: dict[str, Any],
                cancel: threading.Event | None) -> ToolResult:
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            available = ", ".join(self.tools) or "none"
            hint = did_you_mean(name, self.tools)
            return tool_result(ErrorResult(category="unknown_tool", message=(
                f"unknown tool {name!r}{hint}{' ' if hint else '; '}available tools: "
                f"{available}")), tool=str(name))
        event = cancel if cancel is not None else threading.Event()
        if self.checkpointing is not None:
            self.checkpointing.begin()  # the first checkpoint, in the background
        with self._calls.track(event):
            if not tool.mutates:
                return self._hooked(tool, arguments, event)
            with self._calls.exclusive(event) as turn:
                if not turn or event.is_set():
                    return tool_result(ErrorResult(category="cancelled", message=(
                        f"{name} was cancelled before it started")), tool=name)
                outer = self._touched  # not None: a tool of the user's calling a mutating tool
                touched = self._touched = {} if outer is None else outer
                start = len(touched)
                mine: tuple[str, ...] = ()
                try:
                    self._settle()  # what background jobs changed meanwhile is theirs
                    if outer is None:
                        self._jobs_checkpoint()
                    done = self._hooked(tool, arguments, event)
                    mine = tuple(list(touched)[start:])
                    done = replace(done, changed=mine)
                    return done if outer is not None else self._checkpoint(tool.name, done)
                finally:
                    self._touched = outer
                    self._settle(mine)  # jobs' changes during this call, not the call's own

    run = invoke  # the name this method had before typed results (kept for programs)

    def _jobs_checkpoint(self) -> None:
        """A checkpoint of what background jobs changed since the last one, if anything."""
        keeper = self.checkpointing
        if keeper is not None and keeper.pending:
            keeper.step("(background jobs)")

    def _checkpoint(self, tool: str, done: ToolResult) -> ToolResult:
        """Take the checkpoint after a call: ``done`` with its number, and a line when
        checkpointing stopped at this step."""
        keeper = self.checkpointing
        if keeper is None:
            return done
        tracked = getattr(done.data, "changes_tracked", True)
        number = keeper.step(tool, tracked=bool(tracked))
        stop = keeper.unsaid_stop()
        if stop:  # said once, in the result of the step where it happened
            line = f"[{stop}; a rewind covers the steps before]"
            return replace(done, text=f"{done.text}\n{line}", checkpoint=number,
                           parts=(*done.parts, TextPart(text=line)))
        return replace(done, checkpoint=number)

    def cancel(self) -> int:
        """Stop every call running or waiting to run; the number of calls reached.

        A running command is killed with its whole process tree and its call answers
        ``exit=cancelled``; other tools finish (they are bounded) and a call waiting for
        its turn does not start. Returns at once: ``wait_idle()`` waits for them to end.
        """
        return self._calls.cancel_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no call is running (True), or ``timeout`` seconds passed (False)."""
        return self._calls.wait_idle(timeout)

    def _hooked(self, tool: Tool, args: Any, cancel: threading.Event) -> ToolResult:
        """The tool's result, with ``before_call`` and ``after_call`` around it."""
        if self.before_call is not None:
            try:
                refusal = self.before_call(tool.name, _copy(args))
            except Exception as exc:
                log.debug("before_call raised for %s", tool.name, exc_info=True)
                return tool_result(ErrorResult(category="hook", message=(
                    f"the before_call hook failed on {tool.name} ({type(exc).__name__}: "
                    f"{exc}); the call did not run")), tool=tool.name)
            if refusal is not None:
                return hook_refusal(str(refusal), tool=tool.name)
        done = tool_result(self._invoke(tool, args, cancel), tool=tool.name,
                           outputs=self.outputs)
        if self.after_call is None:
            return done
        try:  # the hook sees what the model would
            replaced = self.after_call(tool.name, _copy(args), done.text)
        except Exception as exc:
            log.debug("after_call raised for %s", tool.name, exc_info=True)
            return tool_result(ErrorResult(category="hook", message=(
                f"the after_call hook failed on {tool.name} ({type(exc).__name__}: {exc}); "
                f"the tool ran, and said:\n{done.text}")), tool=tool.name)
        return done if replaced is None else retexted(done, str(replaced), self.outputs)

    def _invoke(self, tool: Tool, args: Any, cancel: threading.Event) -> object:
        """What the tool returned, or the error it raised as a result."""
        try:
            with cancel_scope(cancel):
                return tool.run(**bind_args(tool.name, tool.input_schema, args))
        except ToolError as exc:
            return exc
        except Exception as exc:
            log.debug("tool %s raised", tool.name, exc_info=True)
            return ErrorResult(category="crash", message=(
                f"{tool.name} failed: {type(exc).__name__}: {exc}"))


def _copy(args: Any) -> Any:
    """What a hook is shown: a copy of the arguments, so it cannot change the call."""
    return dict(args) if isinstance(args, dict) else args
