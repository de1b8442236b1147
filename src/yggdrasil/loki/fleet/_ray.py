"""The Ray backend: one Ray task per attempt, the rate gate as an async Ray actor.

Imported only when a fleet runs with ``backend="ray"``: nothing else in the package
imports ray. Ray's own retries are off (``max_retries=0``): the driver retries, the same
way as on the local backend, and tells a crash (``WorkerCrashedError``: the worker process
died; ``NodeDiedError``: its node was lost) from a task that failed. The gate actor is
pinned to the driver's node, so losing another node never loses the gate; it is an asyncio
actor, so thousands of waiting requests cost no thread each. A timed-out attempt is
cancelled with ``force=True``, which kills its worker process; its gate slots are freed
once Ray says the task is over (not while its request may still be in flight). The node's
next attempt sweeps up its commands and working copy, and so does the sweep run on every
node when the fleet ends.

A cluster the fleet starts itself (no address, Ray not yet initialised) is given the CPUs
``workers`` attempts need (``workers * cpus_per_task``, at least the machine's): Ray
would otherwise start one CPU per core, and run no more attempts at once than that. On a
cluster it joins, a fleet asking for more than the cluster has says so in ``notes``. Its
workers are started and warmed (the agent and the engine's SDK imported) before the first
attempt, as the local backend's are, so that no attempt pays for another's start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import ray
from ray.exceptions import (
    GetTimeoutError,
    NodeDiedError,
    RayError,
    TaskCancelledError,
    WorkerCrashedError,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ._attempt import AttemptSettings, run_attempt, warm_up
from ._gate import GateCore
from ._scratch import Workspace
from ._task import Task

__all__ = ["RayBackend"]

SWEEP_TIMEOUT = 60.0
PROBE_TIMEOUT = 10.0
WARM_TIMEOUT = 60.0  # the longest a fleet-started cluster's workers are waited for


def check_reachable(address: str | None) -> None:
    """Refuse at once a cluster address nothing listens on: ``ray.init`` would retry it
    for minutes without a word. Names Ray resolves itself (``auto``, ``local``) pass."""
    if not address or ("://" not in address and ":" not in address):
        return
    host, _, port = address.split("://", 1)[-1].rstrip("/").rpartition(":")
    if not host or not port.isdigit():
        raise RuntimeError(f"the Ray address {address!r} is not host:port, ray://host:port, "
                           "auto or local")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT).close()
    except OSError as exc:
        raise RuntimeError(f"cannot reach the Ray cluster at {address}: {exc}; start one "
                           "(ray start --head) or give its address (host:6379, or "
                           "ray://host:10001 for Ray Client)") from exc


class _AsyncGate:
    """The gate actor: :class:`GateCore`, each waiting request an asyncio future; a
    timer resumes admissions when a pause ends."""

    def __init__(self, limit: int) -> None:
        self.core = GateCore(limit)
        self.arrived = 0
        self.all_there = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None

    async def gather(self, count: int, timeout: float) -> None:
        """Return once ``count`` callers are waiting here (or after ``timeout``): a
        barrier, which keeps that many Ray tasks running at once, each on a worker."""
        self.arrived += 1
        if self.arrived >= count:
            self.all_there.set()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.all_there.wait(), timeout)

    async def acquire(self, holder: str) -> bool:
        future = asyncio.get_running_loop().create_future()
        now = self.core.enter(holder, future)
        if now is not None:
            return now
        try:
            return bool(await future)
        except asyncio.CancelledError:
            self.core.leave(future)
            raise

    async def release(self, holder: str, usage: Mapping[str, int] | None = None,
                      limited: bool = False, retry_after: float | None = None) -> None:
        _resolve(self.core.release(holder, usage, limited, retry_after))
        self._resume_later()

    async def forget(self, holder: str) -> None:
        _resolve(self.core.forget(holder))

    async def begin(self, holder: str, node: str) -> None:
        self.core.begin(holder, node)

    async def started(self, holders: Sequence[str]) -> dict[str, tuple[float, str]]:
        return self.core.started(holders)

    async def stats(self) -> dict[str, int]:
        return self.core.stats()

    def _resume_later(self) -> None:
        left = self.core.pause_left()
        if left > 0 and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(left, self._resume)

    def _resume(self) -> None:
        self._timer = None
        _resolve(self.core.resume())
        self._resume_later()  # paused again meanwhile


def _resolve(woken: list[tuple[Any, bool]]) -> None:
    for future, admitted in woken:
        if not future.done():
            future.set_result(admitted)


class _ActorGate:
    """A worker's (and the driver's) view of the gate actor (the GateClient protocol)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.sent: list[Any] = []  # calls not waited for yet (see release)

    def settle(self) -> None:
        """Wait for the calls sent without waiting: once an attempt's result is back,
        the gate has counted its requests."""
        sent, self.sent = self.sent, []
        with contextlib.suppress(RayError):  # the gate is gone: its driver
            ray.get(sent)  # too, and nobody will read what it counted

    def acquire(self, holder: str) -> bool:
        return bool(ray.get(self.actor.acquire.remote(holder)))

    def release(self, holder: str, usage: Mapping[str, int] | None = None,
                limited: bool = False, retry_after: float | None = None) -> None:
        # Sent, not waited for until the attempt ends (a round trip costs 3-25 ms, per
        # model call): the actor may run it after this worker's next acquire, which then
        # waits a moment for the slot it frees; one lost with a dying worker is freed by
        # the driver's forget.
        self.sent.append(self.actor.release.remote(holder, dict(usage or {}), limited,
                                                   retry_after))

    def forget(self, holder: str) -> None:
        ray.get(self.actor.forget.remote(holder))

    def begin(self, holder: str, node: str) -> None:
        self.sent.append(self.actor.begin.remote(holder, node))  # as release

    def started(self, holders: Sequence[str]) -> dict[str, tuple[float, str]]:
        return dict(ray.get(self.actor.started.remote(list(holders))))

    def stats(self) -> dict[str, int]:
        return dict(ray.get(self.actor.stats.remote()))


def _attempt_on_worker(task: Task, settings: AttemptSettings, actor: Any, holder: str) -> dict[str, Any]:
    context = ray.get_runtime_context()
    node = f"{ray.util.get_node_ip_address()} ({context.get_node_id()[:8]})"
    gate = _ActorGate(actor)
    try:
        return run_attempt(task, settings, gate, holder, node=node)
    finally:
        gate.settle()


def _warm_worker(settings: AttemptSettings, actor: Any, count: int) -> None:
    warm_up(settings)
    ray.get(actor.gather.remote(count, WARM_TIMEOUT))


def _sweep_node(cache_dir: str) -> int:
    return Workspace(cache_dir).sweep(parked=True)  # the run is over: what workers keep too


def code_runtime_env() -> dict[str, Any]:
    """Ship this very ``yggdrasil`` package to the workers (so they run the driver's code)."""
    import yggdrasil.loki

    package = os.path.dirname(os.path.dirname(os.path.abspath(yggdrasil.loki.__file__)))
    return {"py_modules": [package]}


class RayBackend:
    """Runs attempts as Ray tasks on the cluster ``ray.init`` connects to."""

    starts_at_once = False  # a task waits in Ray's queue until a node has its resources

    def __init__(self, settings: AttemptSettings, limit: int, *, workers: int, address: str | None,
                 cpus_per_task: float, resources: Mapping[str, float] | None = None) -> None:
        self.settings = settings
        self.started_ray = False
        self.notes: list[str] = []
        if not ray.is_initialized():
            check_reachable(address)
            cpus = None if address else max(os.cpu_count() or 1,
                                            math.ceil(workers * cpus_per_task))
            ray.init(address=address, runtime_env=code_runtime_env(), include_dashboard=False,
                     logging_level=logging.WARNING, log_to_driver=False, num_cpus=cpus,
                     resources=None if address else dict(resources or {}) or None)
            self.started_ray = True
        self._check_capacity(workers, cpus_per_task, dict(resources or {}))
        # The gate lives on the driver's node: on another node, losing that node would
        # take the gate (and with it the whole run) down; the driver's node is lost anyway.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.actor: Any = ray.remote(_AsyncGate).options(
            num_cpus=0, max_concurrency=max(1000, 4 * workers), scheduling_strategy=here,
        ).remote(limit)
        self.gate = _ActorGate(self.actor)
        self.remote = ray.remote(_attempt_on_worker).options(
            num_cpus=cpus_per_task, resources=dict(resources or {}) or None, max_retries=0)
        self.settings_ref = ray.put(settings)  # stored once, not sent with every task
        if self.started_ray:
            self._warm(workers, cpus_per_task, dict(resources or {}))

    def _warm(self, workers: int, cpus_per_task: float, resources: dict[str, float]) -> None:
        """Start the workers of a cluster the fleet started before the first attempt, as
        the local backend does: each Ray worker process starts, imports the agent and the
        engine's SDK once (a second of CPU or more each), so attempts do not pay for it
        while others run. One task per worker, held at a barrier until all have started
        (else Ray would run them one after the other on the first worker up)."""
        warm = ray.remote(_warm_worker).options(
            num_cpus=cpus_per_task, resources=resources or None, max_retries=0)
        refs = [warm.remote(self.settings_ref, self.actor, workers) for _ in range(workers)]
        with contextlib.suppress(GetTimeoutError, RayError):  # a cold worker is no failure
            ray.get(refs, timeout=WARM_TIMEOUT + PROBE_TIMEOUT)

    def _check_capacity(self, workers: int, cpus_per_task: float,
                        resources: dict[str, float]) -> None:
        """A note when the cluster cannot run ``workers`` attempts at once, and why."""
        total = ray.cluster_resources()
        fits = [int(total.get("CPU", 0) // cpus_per_task)]
        fits += [int(total.get(name, 0) // amount) for name, amount in resources.items()
                 if amount > 0]
        if min(fits) < workers:
            have = ", ".join(f"{total.get(k, 0):g} {k}" for k in ("CPU", *resources))
            self.notes.append(
                f"the Ray cluster has {have}: at most {min(fits)} of the {workers} workers "
                f"run at once ({cpus_per_task:g} CPU per task"
                + "".join(f", {v:g} {k}" for k, v in resources.items())
                + "); add nodes, or lower --cpus-per-task")

    def start(self, task: Task, holder: str) -> Any:
        return self.remote.remote(task, self.settings_ref, self.actor, holder)

    def wait(self, refs: list[Any], timeout: float) -> list[Any]:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout, fetch_local=True)
        return list(ready)

    def outcome(self, ref: Any) -> dict[str, Any]:
        try:
            outcome: dict[str, Any] = ray.get(ref)
            return outcome
        except WorkerCrashedError:
            return {"ok": False, "error": "the worker process died (its Ray worker crashed or "
                                          "was killed)"}
        except NodeDiedError:
            return {"ok": False, "error": "the node running it died (the machine was lost or "
                                          "its raylet was killed)"}
        except TaskCancelledError:
            return {"ok": False, "error": "the Ray task was cancelled"}
        except RayError as exc:
            first = str(exc).strip().splitlines()[-1:] or [type(exc).__name__]
            return {"ok": False, "error": f"ray: {type(exc).__name__}: {first[0][:500]}"}

    def kill(self, ref: Any) -> bool:
        """Cancel (killing its worker); over when Ray says so: not now."""
        ray.cancel(ref, force=True)
        return False

    def close(self) -> None:
        try:
            self._sweep_nodes()
        finally:
            ray.kill(self.actor)
            if self.started_ray:
                ray.shutdown()

    def _sweep_nodes(self) -> None:
        """Sweep the fleet cache of every live node (what killed attempts left behind)."""
        sweep = ray.remote(_sweep_node)
        refs = [sweep.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
                    node["NodeID"], soft=False)).remote(self.settings.cache_dir)
                for node in ray.nodes() if node.get("Alive")]
        # a node that cannot sweep now is swept by its next attempt
        with contextlib.suppress(GetTimeoutError, RayError):
            ray.get(refs, timeout=SWEEP_TIMEOUT)
