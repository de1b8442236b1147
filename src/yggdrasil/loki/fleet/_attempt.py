"""One attempt at one task, on a worker: copy, set up, act, diff, verify, clean up.

Runs in a worker process (a local pool process or a Ray worker) and never raises: it
returns a plain dict, ``{"ok": True, "result": {...}, "transcript": ...}`` or
``{"ok": False, "error": ..., "final": ..., "transcript": ...}`` (``final``: a retry
cannot help). Everything it makes lives in one scratch folder of the node's fleet cache,
removed at the end; a worker killed midway leaves it to the next attempt's sweep. The
working copy alone outlives the attempt: parked for the worker's next one (see
``_copies``), verify having run in it once restored to the commit.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import secrets
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agent import Loki
from ..checkpoints import checkpoint_folder, materialize
from ..engine import DEFAULT_TIMEOUT, Engine, RetryPolicy, create_engine
from ..errors import EngineAuthError, EngineConfigError, EngineError, LokiError
from ..files import Root
from ..results import CommandResult
from ..sandbox import run_process
from ..settings import Settings as ToolboxSettings
from ..shell import stream_of
from ..tools import filesystem_toolbox
from ._copies import CopyError, WorkingCopy
from ._gate import GateClient, GatedEngine
from ._git import GitError, Snapshots
from ._scratch import MARKER, Workspace
from ._task import Task
from ._urls import local_folder

__all__ = ["AttemptSettings", "run_attempt", "warm_up"]

OUTPUT_KEPT = 4_000  # characters of setup/verify output kept in a result or a reason
SETUP_LINES = 5  # last lines of a failed setup's stderr shown in its reason


@dataclass
class AttemptSettings:
    """How every attempt of a fleet runs (sent to the workers with each task)."""

    engine: str | Callable[[Task], Engine]
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    request_timeout: float = DEFAULT_TIMEOUT
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    engine_options: dict[str, Any] = field(default_factory=dict)
    protocol: str = "auto"
    toolbox: ToolboxSettings = field(default_factory=lambda: ToolboxSettings().with_values(
        {"fence.sandbox": "require"}))  # the agent's fence and policy (verify: no protection)
    cache_dir: str = ""
    max_patch_bytes: int = 20 << 20
    refresh: str = "auto"  # when mirrors are fetched (_copies.REFRESH)
    run: str = ""  # this fleet run's id (``auto`` fetches a mirror once per run)


# The SDK an engine imports when it is made (half a second for openai): imported once
# per worker, before its first attempt.
_ENGINE_SDKS = {"openai": "openai", "ollama": "openai", "anthropic": "anthropic"}


def warm_up(settings: AttemptSettings) -> None:
    """What a worker imports once, before its first attempt: the engine's SDK (the agent
    and the tools are imported with this module)."""
    _one_process()
    sdk = _ENGINE_SDKS.get(settings.engine) if isinstance(settings.engine, str) else None
    if sdk:
        with contextlib.suppress(ImportError):
            importlib.import_module(sdk)


def _one_process() -> None:
    """A worker is one of a fleet's many: the repository map of a copy is parsed in it,
    not by a pool of parse processes of its own (``LOKI_PARSE_PROCESSES``, read by the
    code index): on a node running a worker per core, such pools only fight over them."""
    os.environ.setdefault("LOKI_PARSE_PROCESSES", "1")


class AttemptError(Exception):
    """The attempt failed; ``final`` when retrying cannot help."""

    def __init__(self, message: str, *, final: bool = False, transcript: str = "") -> None:
        super().__init__(message)
        self.final = final
        self.transcript = transcript


def run_attempt(task: Task, settings: AttemptSettings, gate: GateClient, holder: str,
                node: str = "") -> dict[str, Any]:
    """Run one attempt of ``task``; a plain dict, never an exception (see the module doc).

    It checks in with the gate first (the driver counts its timeout from then, and learns
    ``node``: this host unless the backend names it), and says when it started and ended.
    """
    node = node or socket.gethostname()
    stamp = {"node": node, "started_at": time.time()}
    _one_process()  # also on a worker nobody warmed (a cluster the fleet joined)
    with contextlib.suppress(Exception):  # a check-in is worth no failed attempt
        gate.begin(holder, node)
    outcome = _run(task, settings, gate, holder)
    return {**outcome, **stamp, "ended_at": time.time()}


def _run(task: Task, settings: AttemptSettings, gate: GateClient, holder: str) -> dict[str, Any]:
    started = time.monotonic()
    space = Workspace(settings.cache_dir)
    space.sweep()
    marker = secrets.token_hex(8)
    os.environ[MARKER] = marker  # every command this attempt starts carries it
    try:
        with space.scratch(task.id, marker) as scratch, _temp_in(scratch / "tmp"):
            result, transcript = _attempt(task, settings, gate, holder, scratch, space,
                                          deadline=started + task.timeout)
        result["seconds"] = round(time.monotonic() - started, 3)
        return {"ok": True, "result": result, "transcript": transcript}
    except AttemptError as exc:
        return {"ok": False, "error": str(exc), "final": exc.final, "transcript": exc.transcript}
    except CopyError as exc:
        return {"ok": False, "error": str(exc), "final": exc.final, "transcript": ""}
    except Exception as exc:  # a fault of the attempt, reported as its reason
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "final": False,
                "transcript": ""}
    finally:
        os.environ.pop(MARKER, None)


@contextlib.contextmanager
def _temp_in(folder: Path) -> Iterator[None]:
    """Every temporary file of the attempt (the toolboxes' undo copies, the commands'
    scratch folders and bytecode, git's) in ``folder``, inside the attempt's scratch
    folder: removed with it, and swept with it when the worker is killed."""
    folder.mkdir()
    names = ("TMPDIR", "TMP", "TEMP")
    saved = {name: os.environ.get(name) for name in names}
    saved_dir = tempfile.tempdir
    os.environ.update(dict.fromkeys(names, str(folder)))
    tempfile.tempdir = str(folder)
    try:
        yield
    finally:
        tempfile.tempdir = saved_dir
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _attempt(task: Task, settings: AttemptSettings, gate: GateClient, holder: str, scratch: Path,
             space: Workspace, *, deadline: float) -> tuple[dict[str, Any], str]:
    copy = WorkingCopy.create(task, scratch / task.id, space, refresh=settings.refresh,
                              run=settings.run)
    log = scratch / "transcript.jsonl"
    try:
        if task.setup:
            _setup(task, copy.path, deadline)
        snapshots = Snapshots(scratch / "snapshots.git", copy.path, copy.objects)
        before = snapshots.take()
        started = _start_from(task, copy.path, log)
        act, replayed, kept = _act(task, settings, gate, holder, copy.path, log,
                                   _hidden(task, space, settings), started)
        after = snapshots.take()
        patch = snapshots.diff(before, after, settings.max_patch_bytes)
        if patch is None:
            raise AttemptError(f"the patch is over the {settings.max_patch_bytes:,}-byte cap "
                               "(max_patch_bytes); the agent made huge changes", final=True,
                               transcript=_read(log))
        files = snapshots.changed(before, after)
        result = {"commit": copy.commit, "patch": patch.decode("utf-8", "surrogateescape"),
                  "files_changed": files, "steps": len(act.steps),
                  "stop_reason": act.stop_reason, "answer": act.answer, "usage": act.usage,
                  "model": act.model, "tokens_replayed": replayed, **kept}
        if task.verify:
            copy = _verify_copy(task, copy, scratch, space)
            if copy.path != snapshots.work_tree:  # a fresh copy: a git folder of its own
                snapshots = Snapshots(scratch / "verify.git", copy.path)
            result.update(_verify(task, settings, space, snapshots, copy, patch, deadline))
    finally:
        copy.park(space)
    return result, _read(log)


def _setup(task: Task, path: Path, deadline: float) -> None:
    """The task's own setup command, unfenced (it is the task author's, not the model's)."""
    assert task.setup is not None
    done = run_process(["/bin/sh", "-c", task.setup], cwd=str(path), timeout=_left(deadline))
    if done.timed_out or done.exit_code != 0:
        why = "timed out" if done.timed_out else f"exit {done.exit_code}"
        said = last_lines(stream_of(done.stderr).text()) or "(nothing on stderr)"
        # an exit code is the same on every try; a timeout (a slow node) may not be
        raise AttemptError(f"setup failed ({why}): {said}",
                           final=not done.timed_out and not _killed(done.exit_code))


def _hidden(task: Task, space: Workspace, settings: AttemptSettings) -> tuple[str, ...]:
    """What an attempt's commands may not read besides the usual credential stores: the
    node's scratch folders (this attempt's snapshots and transcript, which hold copies of
    the root's protected files, and other attempts' copies) and the task's own folder when
    it is on this node, a path or a ``file://`` URL (its .env is not masked: it is not the
    root). The root inside the scratch folder stays theirs (its own rule lets them read and
    write it)."""
    source = local_folder(task.repo)
    return (*settings.toolbox.fence.hidden, str(space.work), *((source,) if source else ()))


def _start_from(task: Task, root: Path, log: Path) -> tuple[str, int] | None:
    """Put the files of ``task.start_from`` (an earlier attempt's checkpoint) into the
    fresh copy at ``root``; (run, step), None without one. AttemptError (final) when the
    checkpoint is not in this node's store or the copy is not the tree it began from."""
    if task.start_from is None:
        return None
    run, _, step = task.start_from.rpartition(":")
    try:
        done = materialize(checkpoint_folder(), Root.at(root), run, int(step))
    except LokiError as exc:
        raise AttemptError(f"start_from {task.start_from}: {exc}", final=True,
                           transcript=_read(log)) from exc
    if done.not_restored:
        first = done.not_restored[0]
        raise AttemptError(f"start_from {task.start_from}: {len(done.not_restored)} file(s) "
                           f"cannot be put as that checkpoint had them ({first.path}: "
                           f"{first.why})", final=True, transcript=_read(log))
    return run, int(step)


def _act(task: Task, settings: AttemptSettings, gate: GateClient, holder: str, root: Path,
         log: Path, hidden: tuple[str, ...], started: tuple[str, int] | None = None) -> Any:
    """(the ActResult, whether tokens were replayed, the checkpoints' fields of the result)."""
    try:
        engine = GatedEngine(_engine(task, settings), gate, holder, settings.retry)
        loki = Loki(engine, protocol=settings.protocol)  # type: ignore[arg-type]
        # closed before the patch is taken: no background job may change the copy after
        with filesystem_toolbox(root, settings=settings.toolbox, hidden=hidden) as box:
            try:
                if started is not None and box.checkpointing is not None:
                    box.checkpointing.follow(*started)  # its steps number on from there
                act = loki.act(task.prompt, root=root, max_steps=task.max_steps, toolbox=box,
                               transcript=log)
                kept: dict[str, Any] = {}
                if box.checkpointing is not None:
                    kept = {"checkpoints": box.checkpointing.run, "checkpoint_diffs": {
                        str(n): d for n, d in box.checkpointing.step_diffs().items()}}
                return act, not engine.spends_tokens, kept
            finally:  # workers end with os._exit: no finalizer would remove the undo copies
                box.discard_undo()
    except (EngineConfigError, EngineAuthError) as exc:
        raise AttemptError(f"{type(exc).__name__}: {exc}", final=True,
                           transcript=_read(log)) from exc
    except EngineError as exc:
        raise AttemptError(f"{type(exc).__name__}: {exc}", transcript=_read(log)) from exc


def _engine(task: Task, settings: AttemptSettings) -> Engine:
    """This task's engine, built not to retry: the gate retries, fleet-wide."""
    if callable(settings.engine):
        return settings.engine(task)
    model = settings.model.replace("{id}", task.id) if settings.model else None
    return create_engine(settings.engine, model=model, base_url=settings.base_url,
                         api_key=settings.api_key, timeout=settings.request_timeout,
                         retry=RetryPolicy(attempts=1), **settings.engine_options)


def _verify_copy(task: Task, copy: WorkingCopy, scratch: Path,
                 space: Workspace) -> WorkingCopy:
    """The copy verify runs in, as a fresh one would be at the same commit: the agent's
    own restored (only what the agent changed is rewritten), else (a folder copy, a tree
    git could not restore) a fresh copy, the agent's removed."""
    if copy.admin is not None:
        try:
            copy.restore()
            return copy
        except (GitError, OSError):
            pass
    copy.remove()
    return WorkingCopy.create(task, scratch / "verify" / task.id, space,
                              commit=copy.commit or None)


def _verify(task: Task, settings: AttemptSettings, space: Workspace, snapshots: Snapshots,
            copy: WorkingCopy, patch: bytes, deadline: float) -> dict[str, Any]:
    """``task.verify`` in ``copy`` (as at the commit: set up, then only the patch applied
    through ``snapshots``, whose work tree it is), fenced."""
    assert task.verify is not None
    if task.setup:
        _setup(task, copy.path, deadline)
    if patch:
        try:
            snapshots.apply(patch)
        except GitError as exc:
            return {"verified": False, "verify_exit": None,
                    "verify_output": _tail(f"the patch does not apply: {exc}")}
    # the task author's command, graded apart from the agent: nothing is protected
    # (but it runs code the agent wrote: the node's other scratch folders stay hidden)
    with filesystem_toolbox(copy.path, settings=settings.toolbox, protect=(), rules=(),
                            rules_default="allow", mcp_servers=(),
                            hidden=_hidden(task, space, settings)) as box:
        try:
            done = box.invoke("run", {"command": task.verify,
                                      "timeout": min(3600.0, _left(deadline))})
        finally:
            box.discard_undo()
    ran = done.data if isinstance(done.data, CommandResult) else None
    code = ran.exit_code if ran is not None else None
    if code is None or _killed(code):  # not the patch's verdict: the node's (OOM, a kill)
        why = (f"exit {code}" if code is not None else "timed out"
               if ran is not None and ran.timed_out else "it could not run")
        raise AttemptError(f"verify was killed ({why}); not graded: {_tail(done.text)}")
    return {"verified": code == 0, "verify_exit": code, "verify_output": _tail(done.text)}


# Signals that come from outside a command (the OOM killer, a kill, a timeout), as a
# negative exit code or as a shell reports them (128 + the signal)
_KILLS = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def _killed(code: int | None) -> bool:
    return code is not None and (-code in _KILLS or code - 128 in _KILLS)


def last_lines(text: str, count: int = SETUP_LINES) -> str:
    """The last ``count`` non-blank lines of ``text``, joined by `` | ``."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-count:])


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise AttemptError("out of time (the task's timeout) before the attempt was done")
    return left


def _tail(text: str) -> str:
    return text if len(text) <= OUTPUT_KEPT else "[...]\n" + text[-OUTPUT_KEPT:]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""

