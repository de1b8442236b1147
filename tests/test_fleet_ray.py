"""Fleets on a real Ray cluster: the run's one head node with 2 CPUs (conftest ``ray_head``).

The same batch as on the local backend must give the same results; a killed Ray worker,
a hung attempt and a 429 behave as they do there (the gate is a Ray actor here).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from fleet_kit import (
    attempt_pids,
    chat_server,
    chat_tasks,
    check_batch,
    check_outputs,
    comparable,
    done,
    leftovers,
    make_batch,
    make_repo,
    marked_processes,
    marked_running,
    run,
    wait_for,
    write_script,
)
from ray_nodes import RayNode, ray_env
from yggdrasil.loki.fleet import Fleet, Task

SRC = str(Path(__file__).resolve().parents[1] / "src")
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module", autouse=True)
def cluster(ray_head: RayNode) -> Iterator[None]:
    """This process is a driver of the run's cluster for the module; its workers import
    this checkout's code."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in ray_env({}).items():
            env.setenv(name, value)
        env.delenv("RAY_ADDRESS", raising=False)
        ray.init(address=ray_head.address, include_dashboard=False, log_to_driver=False,
                 logging_level="WARNING", runtime_env={"env_vars": {"PYTHONPATH": SRC}})
        try:
            yield
        finally:
            ray.shutdown()


def fleet(tmp_path: Path, model: str, backend: str = "ray", **options: object) -> Fleet:
    settings: dict[str, object] = {"backend": backend, "workers": 2,
                                   "out": tmp_path / f"out-{backend}",
                                   "cache_dir": tmp_path / f"cache-{backend}"}
    settings.update(options)
    return Fleet("scripted", model=model, **settings)  # type: ignore[arg-type]


def test_ray_and_local_give_the_same_results(tmp_path: Path) -> None:
    batch = make_batch(tmp_path / "src")
    on_ray = list(fleet(tmp_path, batch.model).run(batch.tasks))
    check_batch(batch, on_ray, tmp_path / "check")
    check_outputs(tmp_path / "out-ray", on_ray)
    assert leftovers(tmp_path / "cache-ray") == []
    local = list(fleet(tmp_path, batch.model, backend="local").run(batch.tasks))
    check_batch(batch, local, tmp_path / "check-local")
    assert sorted(map(comparable, on_ray), key=lambda r: r["id"]) == \
        sorted(map(comparable, local), key=lambda r: r["id"])


def test_a_killed_ray_worker_is_retried_and_nothing_is_lost(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    scripts = tmp_path / "s"
    write_script(scripts, "slow", run("sleep 2; echo late > slow.txt"), done())
    for name in ("quick-1", "quick-2"):
        write_script(scripts, name, run(f"echo {name} > {name}.txt"), done())
    tasks = [Task(id=n, repo=str(repo), prompt="x") for n in ("slow", "quick-1", "quick-2")]
    cache = tmp_path / "cache-ray"
    killed: list[int] = []

    def kill_first_attempt() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for pid in attempt_pids(cache, "slow"):
                # mid-task: once its command runs (the slow task's `sleep`)
                wait_for(lambda: marked_running("sleep"), timeout=60, every=0.01)
                os.kill(pid, signal.SIGKILL)  # the Ray worker process running the task
                killed.append(pid)
                break
            time.sleep(0.02)

    watcher = threading.Thread(target=kill_first_attempt, daemon=True)
    watcher.start()
    results = {r.id: r for r in fleet(tmp_path, str(scripts / "{id}.jsonl")).run(tasks)}
    watcher.join()
    assert killed, "the watcher never saw the attempt"
    slow = results["slow"]
    assert slow.status == "done" and len(slow.attempts) == 2 and slow.files_changed == ["slow.txt"]
    assert "attempt 1: the worker process died" in slow.reason
    assert results["quick-1"].status == results["quick-2"].status == "done"
    check_outputs(tmp_path / "out-ray", list(results.values()))
    assert leftovers(cache) == [] and marked_processes() == []


def test_a_hung_ray_task_is_cancelled_retried_then_failed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    write_script(tmp_path / "s", "hang", run("sleep 60"), done())
    task = Task(id="hang", repo=str(repo), prompt="x", timeout=1.5)
    [result] = fleet(tmp_path, str(tmp_path / "s" / "{id}.jsonl")).run([task])
    assert result.status == "failed" and len(result.attempts) == 2
    assert result.reason.count("timed out after 1.5s") == 2
    assert leftovers(tmp_path / "cache-ray") == []  # swept when the fleet ended
    assert marked_processes() == []  # and the killed workers' `sleep 60` with it


def test_the_gate_actor_holds_back_only_the_request_a_429_hit(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    """Retry-After: 5 for the first request; the other worker (however cold: a Ray worker
    takes seconds to start here) sends both its requests meanwhile."""
    with chat_server(delay=0.05, first_429=True, retry_after=5.0) as server:
        ran = Fleet("openai", model="gpt-fake", base_url=server.url, api_key="sk-test",
                    backend="ray", workers=2, max_in_flight=2, out=tmp_path / "out",
                    cache_dir=tmp_path / "cache")
        results = list(ran.run(chat_tasks(tmp_path, 2)))
    assert [r.status for r in results] == ["done"] * 2
    [limited] = server.limited
    assert len([t for t in server.arrivals if limited < t < limited + 4.9]) == 2  # the other's
    assert max(t - limited for t in server.arrivals) >= 5.0  # the hit one waited its 5 s
    assert ran.status.rate_limited == 1


def test_the_gate_actor_pauses_when_everything_is_refused_and_resumes_by_itself() -> None:
    """A whole sample answered 429 (Retry-After 0.5 s) pauses admissions; the actor's timer
    admits the next request when the pause ends, with nobody calling it."""
    from yggdrasil.loki.fleet._ray import _ActorGate, _AsyncGate

    gate = _ActorGate(ray.remote(_AsyncGate).remote(2))
    for i in range(20):
        assert gate.acquire(f"a{i}")
        gate.release(f"a{i}", limited=True, retry_after=0.5)
    started = time.monotonic()
    assert gate.acquire("next")
    assert 0.4 < time.monotonic() - started < 5
    stats = gate.stats()
    assert stats["pauses"] == 1 and stats["window_cuts"] == 1 and stats["rate_limited"] == 20


def test_queue_time_is_not_charged_to_a_tasks_timeout_and_nodes_are_recorded(
        tmp_path: Path) -> None:
    """Two CPUs, three workers: the third attempt waits in Ray's queue for a CPU (~2 s),
    then runs its 2 s within its 3.5 s timeout. Counted from its submission it timed out."""
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    scripts = tmp_path / "s"
    for i in range(3):
        write_script(scripts, f"t{i}", run("sleep 2"), done())
    tasks = [Task(id=f"t{i}", repo=str(repo), prompt="x", timeout=3.5) for i in range(3)]
    ran = fleet(tmp_path, str(scripts / "{id}.jsonl"), workers=3)
    results = list(ran.run(tasks))
    assert [(r.status, len(r.attempts)) for r in results] == [("done", 1)] * 3, \
        [r.reason for r in results]
    queued = sorted(r.attempts[0]["queued_seconds"] for r in results)
    assert queued[-1] > 1.0  # one waited for a CPU...
    assert any("at most 2 of the 3 workers run at once" in note for note in ran.status.notes)
    here = ray.util.get_node_ip_address()
    for result in results:
        [attempt] = result.attempts
        assert attempt["node"].startswith(here + " (")  # the node's IP and id
        assert attempt["ended_at"] - attempt["started_at"] >= 2.0
