"""``Fleet``: many ``Loki.act`` runs, on a local process pool or a Ray cluster.

The driver keeps ``workers`` attempts running, collects each as it ends, retries a failed
one (it raised, hung past its timeout, or its worker died) up to ``attempts`` times in
all, and records every finished task in the output folder as it finishes. Both backends
run the same attempt code (``_attempt``) and differ only in where it runs.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, get_args

from ..engine import DEFAULT_TIMEOUT, Engine, RetryPolicy
from ..loop import ProtocolName
from ..shell import SANDBOX_MODES
from ._attempt import Settings
from ._report import write_report
from ._store import ResultStore, read_results
from ._task import Task, TaskResult, check_unique
from ._urls import shown_repo

__all__ = ["BACKENDS", "Fleet", "FleetStatus"]

log = logging.getLogger("yggdrasil.loki.fleet")
BACKENDS = ("local", "ray")
_POLL = 0.5  # seconds between looks at deadlines and the gate's counters


@dataclass
class FleetStatus:
    """Live counters of a run, for a progress display (read them from another thread)."""

    total: int = 0
    skipped: int = 0  # already in the output folder: not run again
    done: int = 0
    failed: int = 0
    verified: int = 0
    graded: int = 0  # finished tasks that had a verify command
    running: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    rate_limited: int = 0
    started: float = field(default_factory=time.monotonic)

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
    started: float = field(default_factory=time.monotonic)
    outcome: dict[str, Any] | None = None  # set by the driver itself (a timeout)


class _Backend(Protocol):
    gate: Any

    def start(self, task: Task, holder: str) -> Any: ...
    def wait(self, handles: list[Any], timeout: float) -> list[Any]: ...
    def outcome(self, handle: Any) -> dict[str, Any]: ...
    def kill(self, handle: Any) -> None: ...
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
    in flight across the fleet. Commands are fenced (``sandbox="require"``), ``network``
    and ``protect`` as in ``filesystem_toolbox`` for the agent (``protect=()`` lets it read
    key and certificate fixtures such as ``tests/certs/server.pem``, which its test runs may
    need); ``verify``, the task author's command, runs with nothing protected. ``cache_dir`` is where each node keeps its mirrors and
    working copies (default ``~/.cache/yggdrasil-loki/fleet``). A failed attempt is
    retried until ``attempts`` (default 2) were made. ``report``: write ``out/report.html``
    (``write_report``) when a run ends, if the ``report`` extra is installed.
    """

    def __init__(
        self, engine: str | Callable[[Task], Engine] | None = None, model: str | None = None,
        base_url: str | None = None, api_key: str | None = None, *,
        backend: str = "local", workers: int = 4, out: str | os.PathLike[str] = "fleet-out",
        address: str | None = None, max_in_flight: int | None = None,
        timeout: float = DEFAULT_TIMEOUT, retry: RetryPolicy | None = None,
        protocol: str = "auto", sandbox: str = "require", network: bool = True,
        protect: Sequence[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None, attempts: int = 2,
        cpus_per_task: float = 1.0, max_patch_bytes: int = 20 << 20, report: bool = True,
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
        _check_choice("sandbox", sandbox, SANDBOX_MODES)
        _check_choice("protocol", protocol, get_args(ProtocolName))
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
        self.report = report
        self.limit = max_in_flight or workers
        self.out = os.fspath(out)
        self.model_name = model or (engine if isinstance(engine, str) else "custom")
        self.settings = Settings(
            engine=engine, model=model, base_url=base_url, api_key=api_key,
            request_timeout=timeout, retry=retry or RetryPolicy(),
            engine_options=dict(engine_options), protocol=protocol, sandbox=sandbox,
            network=network, protect=None if protect is None else tuple(protect),
            cache_dir=os.fspath(cache_dir) if cache_dir else "",
            max_patch_bytes=max_patch_bytes)
        self.status = FleetStatus()

    def results(self) -> list[TaskResult]:
        """Every result recorded in ``out`` so far (earlier runs included)."""
        return list(read_results(self.out).values())

    def run(self, tasks: Iterable[Task]) -> Iterator[TaskResult]:
        """Run the tasks not yet in ``out``; yield each result as its task finishes.

        Results are recorded (``out/results.jsonl``, transcripts) before they are yielded,
        and ``out/preds.json`` (and ``out/report.html``) rewritten when the run ends,
        however it ends.
        """
        todo = list(tasks)
        check_unique(todo)
        store = ResultStore(self.out)
        try:
            fresh = [t for t in todo if t.id not in store.results]
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

    def _backend(self) -> _Backend:
        if self.backend == "ray":
            try:
                from ._ray import RayBackend
            except ImportError as exc:
                raise RuntimeError("the ray backend needs Ray: pip install "
                                   f"'yggdrasil-loki[fleet]' ({exc})") from exc

            return RayBackend(self.settings, self.limit, workers=self.workers,
                              address=self.address, cpus_per_task=self.cpus_per_task)
        from ._local import LocalBackend

        return LocalBackend(self.settings, self.limit)

    def _drive(self, backend: _Backend, tasks: list[Task],
               store: ResultStore) -> Iterator[TaskResult]:
        queue = deque((task, 1, list[str]()) for task in tasks)
        running: dict[Any, _Running] = {}
        try:
            while queue or running:
                while queue and len(running) < self.workers:
                    task, attempt, reasons = queue.popleft()
                    holder = f"{task.id}#{attempt}"
                    running[backend.start(task, holder)] = _Running(task, attempt, holder,
                                                                    reasons)
                self.status.running = len(running)
                ended = backend.wait(list(running), _POLL)
                for handle in ended + self._overdue(backend, running, ended):
                    current = running.pop(handle)
                    outcome = current.outcome or backend.outcome(handle)
                    backend.gate.forget(current.holder)
                    result = self._settle(current, outcome, queue)
                    if result is not None:
                        store.add(result, outcome.get("transcript") or "")
                        self._count(result)
                        yield result
                self.status.running = len(running)
                self._refresh(backend)
        finally:
            for handle in running:  # the caller stopped early, or an error: stop the rest
                backend.kill(handle)

    def _overdue(self, backend: _Backend, running: dict[Any, _Running],
                 ended: list[Any]) -> list[Any]:
        """Attempts past their task's timeout: killed, and marked with why."""
        now = time.monotonic()
        late = [h for h, r in running.items()
                if h not in ended and now - r.started > r.task.timeout]
        for handle in late:
            backend.kill(handle)
            timeout = running[handle].task.timeout
            running[handle].outcome = {
                "ok": False, "error": f"timed out after {timeout:g}s (the task's timeout); "
                                      "the attempt was killed"}
        return late

    def _settle(self, current: _Running, outcome: dict[str, Any],
                queue: deque[tuple[Task, int, list[str]]]) -> TaskResult | None:
        """The task's result, or None when it goes back in the queue for another attempt."""
        task = current.task
        if outcome.get("ok"):
            data = {**outcome["result"], "id": task.id, "status": "done",
                    "attempts": current.attempt, "repo": shown_repo(task.repo)}
            if current.reasons:
                data["reason"] = "retried: " + "; ".join(current.reasons)
            return TaskResult.from_dict(data)
        reasons = [*current.reasons, f"attempt {current.attempt}: {outcome.get('error')}"]
        if current.attempt < self.attempts and not outcome.get("final"):
            self.status.retries += 1
            queue.append((task, current.attempt + 1, reasons))
            return None
        return TaskResult(id=task.id, status="failed", reason="; ".join(reasons),
                          attempts=current.attempt, repo=shown_repo(task.repo),
                          model=self.model_name.replace("{id}", task.id))

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
