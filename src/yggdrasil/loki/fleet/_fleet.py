"""``Fleet``: many ``Loki.act`` runs, on a local process pool or a Ray cluster.

The driver keeps ``workers`` attempts running, collects each as it ends, retries a failed
one (it raised, hung past its timeout, or its worker died) up to ``attempts`` times in
all, and records every finished task in the output folder as it finishes. Both backends
run the same attempt code (``_attempt``) and differ only in where it runs.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, get_args

from ..engine import DEFAULT_TIMEOUT, Engine, RetryPolicy
from ..loop import ProtocolName
from ..settings import Settings as ToolboxSettings
from ..settings import with_keywords
from ._attempt import AttemptSettings
from ._copies import REFRESH
from ._report import write_report
from ._store import ResultStore, read_results, recorded
from ._task import Task, TaskResult, check_unique, one_line
from ._urls import shown_repo

__all__ = ["BACKENDS", "REDO", "Fleet", "FleetStatus"]

log = logging.getLogger("yggdrasil.loki.fleet")
BACKENDS = ("local", "ray")
"""The values of ``Fleet(backend=)``: a local process pool, or a Ray cluster."""
REDO = ("none", "failed", "all")  # which recorded tasks run again
_POLL = 0.5  # seconds between looks at deadlines and the gate's counters
KILL_WAIT = 30.0  # seconds a killed attempt is waited for before its slots are freed anyway
REASON = 2_000  # characters of a failed task's one-line reason
_HOST = socket.gethostname()


@dataclass
class FleetStatus:
    """Live counters of a run, for a progress display (read them from another thread)."""

    total: int = 0
    skipped: int = 0  # already in the output folder: not run again
    done: int = 0
    failed: int = 0
    verified: int = 0
    graded: int = 0  # finished tasks that had a verify command
    running: int = 0  # attempts started on a worker
    queued: int = 0  # attempts submitted that no worker has started yet
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    rate_limited: int = 0
    started: float = field(default_factory=time.monotonic)
    notes: list[str] = field(default_factory=list)  # what the user should know (capacity)

    @property
    def finished(self) -> int:
        return self.done + self.failed

    @property
    def remaining(self) -> int:
        return self.total - self.skipped - self.finished

    def eta(self) -> float | None:
        """Seconds until the rest is done at the pace so far (None before the first)."""
        if not self.finished:
            return None
        return (time.monotonic() - self.started) / self.finished * self.remaining


@dataclass
class _Running:
    task: Task
    attempt: int
    holder: str
    reasons: list[str]
    records: list[dict[str, Any]]  # the earlier attempts'
    submitted_at: float = field(default_factory=time.time)
    started_at: float | None = None  # when a worker started it (unix time); None: queued
    node: str = ""
    killed_at: float | None = None  # the driver killed it (a timeout) and waits for its end
    outcome: dict[str, Any] | None = None  # set by the driver itself (a timeout)


class _Backend(Protocol):
    gate: Any
    starts_at_once: bool  # an attempt starts when submitted (else it may queue)

    def start(self, task: Task, holder: str) -> Any: ...
    def wait(self, handles: list[Any], timeout: float) -> list[Any]: ...
    def outcome(self, handle: Any) -> dict[str, Any]: ...
    def kill(self, handle: Any) -> bool: ...  # True: over now; False: wait for its end
    def close(self) -> None: ...


class Fleet:
    """Runs tasks through ``Loki.act``, each in its own working copy, on many workers.

    ``engine`` is an engine name (built on each worker with ``model``, ``base_url``,
    ``api_key``, ``timeout`` and ``engine_options``; ``{id}`` in ``model`` becomes the
    task id, e.g. ``engine="scripted", model="scripts/{id}.jsonl"``) or a picklable
    callable ``task -> Engine``; None takes ``LOKI_ENGINE``/``LOKI_MODEL``/``LOKI_BASE_URL``.
    ``backend`` is ``"local"`` (a process pool on this machine) or ``"ray"`` (``address``:
    the cluster to join; by default the one ``ray.init`` finds or starts). ``workers``
    attempts run at once; ``max_in_flight`` (default: ``workers``) bounds model requests
    in flight across the fleet. ``settings`` (a ``yggdrasil.loki.settings.Settings``, e.g.
    ``load_settings()``) configure the agent's toolbox in every attempt, with the sandbox
    required unless they chose one; ``sandbox``, ``network`` (True, False or hosts) and
    ``protect`` set those fields over them, as in ``filesystem_toolbox`` (``protect=()``
    lets the agent read key and certificate fixtures such as ``tests/certs/server.pem``,
    which its test runs may need); ``verify``, the task author's command, runs under the
    same fence with nothing protected and no command rules. ``cache_dir`` is where each node keeps its mirrors and
    working copies (default ``~/.cache/yggdrasil-loki/fleet``). A failed attempt is
    retried until ``attempts`` (default 2) were made, unless retrying cannot help (a
    setup command's exit code, a missing commit, a patch over ``max_patch_bytes``).

    ``cpus_per_task`` and ``resources`` (Ray custom resources, e.g. ``{"GPU": 1}``) are
    what each attempt reserves on Ray; a cluster the fleet starts itself gets the CPUs
    ``workers`` attempts need, and one too small to run ``workers`` at once is named in
    ``status.notes``. A task's ``timeout`` counts from when its attempt starts on a
    worker, not from when it was queued. ``refresh`` says when a node fetches its mirror
    (``auto``: once per run for a task naming a branch, a tag or no commit; ``always``;
    ``never``: only for a commit it lacks). ``redo`` runs again tasks already recorded in
    ``out``: ``none`` (default), ``failed`` or ``all``. ``report``: write
    ``out/report.html`` (``write_report``) when a run ends, if the ``report`` extra is installed.
    """

    def __init__(
        self, engine: str | Callable[[Task], Engine] | None = None, model: str | None = None,
        base_url: str | None = None, api_key: str | None = None, *,
        backend: str = "local", workers: int = 4, out: str | os.PathLike[str] = "fleet-out",
        address: str | None = None, max_in_flight: int | None = None,
        timeout: float = DEFAULT_TIMEOUT, retry: RetryPolicy | None = None,
        protocol: str = "auto", sandbox: str | None = None,
        network: bool | Sequence[str] | None = None, protect: Sequence[str] | None = None,
        settings: ToolboxSettings | None = None,
        cache_dir: str | os.PathLike[str] | None = None, attempts: int = 2,
        cpus_per_task: float = 1.0, resources: Mapping[str, float] | None = None,
        max_patch_bytes: int = 20 << 20, refresh: str = "auto", redo: str = "none",
        report: bool = True,
        **engine_options: Any,
    ) -> None:
        if engine is None:
            engine = os.environ.get("LOKI_ENGINE") or None
            model = model or os.environ.get("LOKI_MODEL") or None
            base_url = base_url or os.environ.get("LOKI_BASE_URL") or None
        if engine is None:
            raise ValueError("a fleet needs an engine: a name (openai, anthropic, ollama, "
                             "scripted, or one registered), a callable task -> Engine, or "
                             "LOKI_ENGINE in the environment")
        _check_choice("backend", backend, BACKENDS)
        _check_choice("protocol", protocol, get_args(ProtocolName))
        _check_choice("refresh", refresh, REFRESH)
        _check_choice("redo", redo, REDO)
        for name, value in (("workers", workers), ("attempts", attempts),
                            ("max_in_flight", 1 if max_in_flight is None else max_in_flight)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
        if not cpus_per_task > 0:
            raise ValueError(f"cpus_per_task must be more than 0, got {cpus_per_task!r}")
        self.backend = backend
        self.workers = workers
        self.address = address
        self.attempts = attempts
        self.cpus_per_task = cpus_per_task
        self.resources = {str(k): float(v) for k, v in (resources or {}).items()}
        self.redo = redo
        self.report = report
        self.limit = max_in_flight or workers
        self.out = os.fspath(out)
        self.model_name = model or (engine if isinstance(engine, str) else "custom")
        self.settings = AttemptSettings(
            engine=engine, model=model, base_url=base_url, api_key=api_key,
            request_timeout=timeout, retry=retry or RetryPolicy(),
            engine_options=dict(engine_options), protocol=protocol,
            toolbox=_toolbox_settings(settings, sandbox=sandbox, network=network,
                                      protect=protect),
            cache_dir=os.fspath(cache_dir) if cache_dir else "",
            max_patch_bytes=max_patch_bytes, refresh=refresh)
        self.status = FleetStatus()

    def results(self) -> list[TaskResult]:
        """Every result recorded in ``out`` so far (earlier runs included)."""
        return list(read_results(self.out).values())

    def run(self, tasks: Iterable[Task]) -> Iterator[TaskResult]:
        """Run the tasks not yet in ``out``; yield each result as its task finishes.

        Results are recorded (``out/results.jsonl``, transcripts) before they are yielded,
        and ``out/preds.json`` (and ``out/report.html``) rewritten when the run ends,
        however it ends. The fleet keeps no result once yielded (``status`` counts them;
        the folder holds them all): its memory does not grow with the number of tasks.
        """
        todo = list(tasks)
        check_unique(todo)
        store = ResultStore(self.out)
        try:
            known = recorded(self.out)  # earlier runs' statuses: read, used, dropped
            fresh = [t for t in todo if self._wanted(known.get(t.id))]
            del known
            self.settings.run = secrets.token_hex(8)
            self.status = FleetStatus(total=len(todo), skipped=len(todo) - len(fresh))
            if fresh:
                backend = self._backend()
                try:
                    yield from self._drive(backend, fresh, store)
                finally:
                    backend.close()
        finally:
            store.write_preds(self.model_name)
            store.close()
            if self.report:  # read from the files: after the store is closed
                _write_report(self.out)

    def _wanted(self, status: str | None) -> bool:
        """Whether a task runs now, given its recorded status (``redo`` decides)."""
        return (status is None or self.redo == "all"
                or (self.redo == "failed" and status != "done"))

    def _backend(self) -> _Backend:
        if self.backend == "ray":
            try:
                from ._ray import RayBackend
            except ImportError as exc:
                raise RuntimeError("the ray backend needs Ray: pip install "
                                   f"'yggdrasil-loki[fleet]' ({exc})") from exc

            ray_backend = RayBackend(self.settings, self.limit, workers=self.workers,
                                     address=self.address, cpus_per_task=self.cpus_per_task,
                                     resources=self.resources)
            self.status.notes.extend(ray_backend.notes)
            return ray_backend
        from ._local import LocalBackend

        return LocalBackend(self.settings, self.limit)

    def _drive(self, backend: _Backend, tasks: list[Task],
               store: ResultStore) -> Iterator[TaskResult]:
        queue = deque((task, 1, list[str](), list[dict[str, Any]]()) for task in tasks)
        running: dict[Any, _Running] = {}
        try:
            while queue or running:
                while queue and len(running) < self.workers:
                    task, attempt, reasons, records = queue.popleft()
                    holder = f"{task.id}#{attempt}"
                    current = _Running(task, attempt, holder, reasons, records)
                    if backend.starts_at_once:  # no queue: its clock runs from now
                        current.started_at, current.node = current.submitted_at, _HOST
                    running[backend.start(task, holder)] = current
                ended = backend.wait(list(running), _POLL)
                self._check_in(backend, running)
                for handle in ended + self._overdue(backend, running, ended):
                    current = running.pop(handle)
                    outcome = current.outcome or backend.outcome(handle)
                    backend.gate.forget(current.holder)  # its worker is gone or done
                    result = self._settle(current, outcome, queue)
                    if result is not None:
                        store.add(result, outcome.get("transcript") or "")
                        self._count(result)
                        yield result
                self._check_in(backend, running)
                self._refresh(backend)
        finally:
            for handle in running:  # the caller stopped early, or an error: stop the rest
                backend.kill(handle)

    def _check_in(self, backend: _Backend, running: dict[Any, _Running]) -> None:
        """Learn from the gate which queued attempts a worker started, when and where."""
        queued = {r.holder: r for r in running.values() if r.started_at is None}
        if queued:
            try:
                seen = backend.gate.started(list(queued))
            except Exception:  # the gate is gone: the attempts' ends will say why
                seen = {}
            for holder, (started_at, node) in seen.items():
                queued[holder].started_at, queued[holder].node = float(started_at), str(node)
        self.status.queued = sum(r.started_at is None for r in running.values())
        self.status.running = len(running) - self.status.queued

    def _overdue(self, backend: _Backend, running: dict[Any, _Running],
                 ended: list[Any]) -> list[Any]:
        """Attempts past their task's timeout, counted from when the attempt started (time
        in the queue is not the task's): killed, and marked with why. One whose kill is
        not over at once stays until its end is known (it may hold a gate slot)."""
        now = time.time()
        over = []
        for handle, current in running.items():
            if handle in ended:
                continue
            if current.killed_at is not None:
                if now - current.killed_at > KILL_WAIT:  # gone for good, by all signs
                    over.append(handle)
                continue
            if current.started_at is None or now - current.started_at <= current.task.timeout:
                continue
            timeout = current.task.timeout
            current.outcome = {
                "ok": False, "error": f"timed out after {timeout:g}s (the task's timeout, "
                                      "from the attempt's start); the attempt was killed"}
            current.killed_at = now
            if backend.kill(handle):
                over.append(handle)
        return over

    def _settle(self, current: _Running, outcome: dict[str, Any],
                queue: deque[tuple[Task, int, list[str], list[dict[str, Any]]]],
                ) -> TaskResult | None:
        """The task's result, or None when it goes back in the queue for another attempt."""
        task = current.task
        record = self._record(current, outcome)
        records = [*current.records, record]
        if outcome.get("ok"):
            data = {**outcome["result"], "id": task.id, "status": "done", "attempts": records,
                    "repo": shown_repo(task.repo)}
            if current.reasons:
                data["reason"] = one_line("retried: " + "; ".join(current.reasons), REASON)
            return TaskResult.from_dict(data)
        reasons = [*current.reasons, f"attempt {current.attempt}: {record['reason']}"]
        if current.attempt < self.attempts and not outcome.get("final"):
            self.status.retries += 1
            queue.append((task, current.attempt + 1, reasons, records))
            return None
        return TaskResult(id=task.id, status="failed", reason=one_line("; ".join(reasons), REASON),
                          attempts=records, repo=shown_repo(task.repo),
                          model=self.model_name.replace("{id}", task.id),
                          steps=None, seconds=attempts_seconds(records))

    @staticmethod
    def _record(current: _Running, outcome: dict[str, Any]) -> dict[str, Any]:
        """One attempt's record: where and when it ran, how long it waited, why it failed."""
        started = outcome.get("started_at", current.started_at)
        ended = outcome.get("ended_at") or time.time()
        record: dict[str, Any] = {
            "attempt": current.attempt, "node": outcome.get("node") or current.node,
            "started_at": started, "ended_at": ended,
            "queued_seconds": round((started if started is not None else ended)
                                    - current.submitted_at, 3)}
        if not outcome.get("ok"):
            record["reason"] = one_line(str(outcome.get("error")))
        return record

    def _count(self, result: TaskResult) -> None:
        status = self.status
        if result.status == "done":
            status.done += 1
        else:
            status.failed += 1
        if result.verified is not None:
            status.graded += 1
            status.verified += bool(result.verified)

    def _refresh(self, backend: _Backend) -> None:
        try:
            stats = backend.gate.stats()
        except Exception:  # a display counter is not worth failing a run over
            return
        for key in ("input_tokens", "output_tokens", "requests", "rate_limited"):
            setattr(self.status, key, int(stats.get(key, 0)))


def _toolbox_settings(settings: ToolboxSettings | None, **given: Any) -> ToolboxSettings:
    """The agent's toolbox settings: ``settings`` (default: the defaults, with the sandbox
    required unless the settings chose one), with the keywords that were given over it."""
    base = settings if settings is not None else ToolboxSettings()
    if base.origin("fence.sandbox") == "default":
        base = base.with_values({"fence.sandbox": "require"}, origin="a fleet's default")
    return with_keywords(base, {k: v for k, v in given.items() if v is not None})


def _write_report(out: str) -> None:
    """The run's HTML report; a run never fails over it (without the extra: a note)."""
    try:
        write_report(out)
    except RuntimeError as exc:  # the report extra is not installed
        log.info("no report.html: %s", exc)
    except Exception as exc:
        log.warning("could not write %s/report.html: %s: %s", out, type(exc).__name__, exc)


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def attempts_seconds(records: list[dict[str, Any]]) -> float:
    """The time a task's attempts ran, summed (a failed task's time: its attempts' records
    say when each started and ended; one that never started counts nothing)."""
    total = 0.0
    for record in records:
        started, ended = record.get("started_at"), record.get("ended_at")
        if isinstance(started, int | float) and isinstance(ended, int | float):
            total += max(0.0, ended - started)
    return round(total, 3)
