"""What a fleet costs per attempt, how it scales with workers, and what 429s cost it.

1. Throughput: ``--scale-tasks`` tasks (160: 20 per worker, so that the model's time, not
   starting 8 workers or a cluster, dominates) whose engine waits (an OpenAI-compatible
   server on 127.0.0.1 that takes ``--delay`` seconds per answer, two answers per task),
   with 1 and then
   ``--workers`` workers, on the local backend and on a Ray cluster the fleet starts
   itself (each run starts and stops its own). Wall time, the time before the first
   attempt started (the workers, and on Ray the cluster, starting), and the makespan from
   the attempts' records (first start to last end: the same work without that start);
   the speed-up of each.
2. Overhead per attempt: N small tasks (read a file, write one, done; scripted engine,
   no model), without a verify command and with ``true`` and ``python3 -c pass``, 1
   worker: the mean attempt time from the records (copy, agent, snapshots and diff,
   verify in the restored copy), against ``Loki.act`` called N times in a loop on one
   folder with the same fenced toolbox; and beyond that, less the verify command's own
   time run bare (what the user's tests cost wherever they run).
3. 429s: N slow tasks with ``--workers`` workers behind a gate of half, then a quarter
   as many requests (the endpoint's concurrency), the endpoint answering 429 (Retry-After
   1 s) to 30% of requests at random, against the same endpoint answering none: the
   ratio of the times (medians of ``--repeat`` runs, taken in turn). With it, how busy the
   endpoint was (its slots' share of the makespan spent answering) and the floor a fleet
   bound by its workers, not the endpoint, pays whatever its gate does: each 429'd
   request waits its Retry-After, and its worker with it. Then the gate alone, which
   the machine's load does not sway: the same requests through the same gate, engine and
   endpoint, from ``--workers`` threads that wait ``--overhead`` seconds per task (the
   issue's target per attempt) instead of running an agent.

Usage: PYTHONPATH=src python bench/bench_fleet.py [--scale-tasks 160] [--slow-tasks 40] [--workers 8]
       [--tasks 20] [--delay 0.5] [--no-ray] [--only workers,overhead,429,gate] [--repeat 1]
       [--overhead 0.3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from yggdrasil.loki.agent import Loki
from yggdrasil.loki.engine import RetryPolicy, create_engine
from yggdrasil.loki.engines.scripted import ScriptedEngine
from yggdrasil.loki.fleet import Fleet, Task
from yggdrasil.loki.fleet._gate import Gate, GatedEngine
from yggdrasil.loki.tools import filesystem_toolbox

SCRIPT = [{"tool": "read_file", "args": {"path": "a.txt"}},
          {"tool": "write_file", "args": {"path": "b.txt", "content": "b\n"}},
          {"done": True, "answer": "ok"}]


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    for i in range(200):  # a small project: 200 files
        (repo / f"m{i:03d}.py").write_text(f"VALUE = {i}\n" * 20)
    (repo / "a.txt").write_text("a\n")
    git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run([*git, *args], check=True)
    return repo


def loop_baseline(repo: Path, count: int) -> float:
    """Loki.act N times in a loop on one folder, the same fenced toolbox each time."""
    started = time.perf_counter()
    for _ in range(count):
        box = filesystem_toolbox(repo, sandbox="require")
        Loki(ScriptedEngine(SCRIPT)).act("write b", root=repo, toolbox=box)
    return time.perf_counter() - started


def fleet_run(root: Path, tasks: list[Task], backend: str, workers: int, name: str,
              **options: Any) -> dict[str, float]:
    """One run: its wall time, its makespan and mean attempt time (from the records),
    and on the local backend the CPU time per attempt (this process and its workers, with
    everything they ran: they are its children)."""
    fleet = Fleet(backend=backend, workers=workers, out=root / f"out-{name}",
                  cache_dir=root / "cache", **options)
    started, before, epoch = time.perf_counter(), _cpu(), time.time()
    results = list(fleet.run(tasks))
    wall = time.perf_counter() - started
    cpu = (_cpu() - before) / len(tasks)
    bad = [r.reason for r in results if r.status != "done" or r.verified is False]
    if bad:
        raise SystemExit(f"{name}: {len(bad)} tasks failed: {bad[0]}")
    attempts = [a for r in results for a in r.attempts]
    makespan = max(a["ended_at"] for a in attempts) - min(a["started_at"] for a in attempts)
    mean = sum(a["ended_at"] - a["started_at"] for a in attempts) / len(attempts)
    return {"wall": wall, "makespan": makespan, "attempt": mean,
            "startup": min(a["started_at"] for a in attempts) - epoch,
            "limited": fleet.status.rate_limited, "cpu": cpu if backend == "local" else 0.0}


def _cpu() -> float:
    """CPU seconds of this process and of its children it has waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _cpu_cell(run: dict[str, float]) -> str:
    return f"{run['cpu']:.3f}" if run["cpu"] else "-"


class _Slow(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    delay = 0.5
    limited_share = 0.0  # answered 429 at once, at random
    rng = random.Random(7)
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        with self.lock:
            limited = self.rng.random() < self.limited_share
        if limited:
            self._send(429, {"error": {"message": "rate limited", "type": "rate_limit",
                                       "param": None, "code": None}}, {"retry-after": "1"})
            return
        time.sleep(self.delay)
        acted = any(m.get("role") == "tool" for m in body["messages"])
        message: dict[str, Any] = {"role": "assistant", "content": "done" if acted else None}
        if not acted:
            message["tool_calls"] = [{"id": "c1", "type": "function", "function": {
                "name": "write_file", "arguments": json.dumps({"path": "b.txt", "content": "b"})}}]
        self._send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": "slow",
                         "choices": [{"index": 0, "message": message,
                                      "finish_reason": "stop" if acted else "tool_calls"}],
                         "usage": {"prompt_tokens": 100, "completion_tokens": 10}}, {})

    def _send(self, status: int, reply: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def slow_server(delay: float, limited_share: float = 0.0) -> Iterator[str]:
    _Slow.delay, _Slow.limited_share, _Slow.rng = delay, limited_share, random.Random(7)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--scale-tasks", type=int, default=160,
                        help="tasks of the throughput section: 20 per worker at 8 workers, "
                             "so that the model's time dominates starting them (and Ray)")
    parser.add_argument("--slow-tasks", type=int, default=40, help="tasks of the 429 sections")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--only", default="workers,overhead,429,gate",
                        help="the sections to run, comma-separated: workers, overhead, 429 "
                             "(3), gate (3b)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case in section 3")
    parser.add_argument("--overhead", type=float, default=0.3,
                        help="seconds per task of section 3's gate alone, besides the model")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not only <= {"workers", "overhead", "429", "gate"}:
        parser.error(f"--only takes workers, overhead, 429 and gate, got {args.only}")
    backends = ["local"]
    if not args.no_ray:
        try:
            import ray  # noqa: F401
            backends.append("ray")
        except ImportError:
            print("(ray is not installed: local backend only)")
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        repo = make_repo(root)
        if "workers" in only:
            throughput(root, repo, backends, args)
        if "overhead" in only:
            overhead(root, repo, backends, args)
        if "429" in only:
            rate_limits(root, repo, args)
        if "gate" in only:
            gate_alone(args)


def throughput(root: Path, repo: Path, backends: list[str], args: Any) -> None:
    n, w = args.scale_tasks, args.workers
    print(f"1. throughput: {n} tasks, engine answers in {args.delay}s (2 answers per task), "
          f"1 worker vs {w}; ray: a cluster the fleet starts itself, each run\n")
    print(f"| backend | 1 worker wall s | {w} wall s | speed-up | before the first attempt "
          f"s, 1 / {w} | 1 worker makespan s | {w} makespan s | speed-up | "
          f"engine wait alone s | CPU s/task, 1 / {w} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    wait = n * 2 * args.delay
    with slow_server(args.delay) as url:
        engine = {"engine": "openai", "model": "slow", "base_url": url, "api_key": "x"}
        for backend in backends:
            tasks = [Task(id=f"{backend}-s{i}", repo=str(repo), prompt="write b")
                     for i in range(n)]
            fleet_run(root, tasks[:2], backend, 2, f"warm-slow-{backend}", **engine)  # mirror
            one = fleet_run(root, tasks, backend, 1, f"one-{backend}", **engine)
            many = fleet_run(root, tasks, backend, w, f"many-{backend}", **engine)
            print(f"| {backend} | {one['wall']:.2f} | {many['wall']:.2f} | "
                  f"x{one['wall'] / many['wall']:.2f} | "
                  f"{one['startup']:.2f} / {many['startup']:.2f} | {one['makespan']:.2f} | "
                  f"{many['makespan']:.2f} | x{one['makespan'] / many['makespan']:.2f} | "
                  f"{wait:.1f} | {_cpu_cell(one)} / {_cpu_cell(many)} |", flush=True)


def overhead(root: Path, repo: Path, backends: list[str], args: Any) -> None:
    print(f"\n2. overhead: {args.tasks} tasks (3 steps each, scripted: no model time), "
          "1 worker, without a verify command and with two; a verify command's own time "
          "(run bare, unfenced, in the repository) is the user's tests, not the fleet's\n")
    print("| backend | verify | attempt s (records) | fleet wall s/task | "
          "Loki.act loop s/task | verify alone s | attempt beyond Loki.act | "
          "beyond Loki.act and verify alone | CPU s/task |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    scripts = root / "scripts"
    scripts.mkdir(exist_ok=True)
    base = loop_baseline(repo, args.tasks) / args.tasks
    for backend in backends:
        for verify in (None, "true", "python3 -c pass"):
            label = verify or "none"
            alone = bare_run(repo, verify, args.tasks) if verify else 0.0
            tasks = [Task(id=f"{backend}-{label[:4]}{i}", repo=str(repo), prompt="write b",
                          verify=verify) for i in range(args.tasks)]
            for task in tasks:
                (scripts / f"{task.id}.jsonl").write_text(
                    "".join(json.dumps(s) + "\n" for s in SCRIPT))
            ran = fleet_run(root, tasks, backend, 1, f"over-{backend}-{label[:4]}",
                            engine="scripted", model=str(scripts / "{id}.jsonl"))
            print(f"| {backend} | {label} | {ran['attempt']:.3f} | "
                  f"{ran['wall'] / args.tasks:.3f} | {base:.3f} | {alone:.3f} | "
                  f"{(ran['attempt'] - base) * 1000:.0f} ms | "
                  f"{(ran['attempt'] - base - alone) * 1000:.0f} ms | {_cpu_cell(ran)} |",
                  flush=True)


def bare_run(repo: Path, command: str, count: int) -> float:
    """The mean time of ``command`` run by the shell in ``repo``, no fence, no fleet."""
    subprocess.run(command, shell=True, cwd=repo, check=True)  # warm the caches
    started = time.perf_counter()
    for _ in range(count):
        subprocess.run(command, shell=True, cwd=repo, check=True)
    return (time.perf_counter() - started) / count


def rate_limits(root: Path, repo: Path, args: Any) -> None:
    n, w, delay, retry_after = args.slow_tasks, args.workers, args.delay, 1.0
    print(f"\n3. 429s: {n} tasks, {w} workers, engine answers in {delay}s (2 answers per "
          f"task); 429 (Retry-After {retry_after:g} s) to a share of requests at random; "
          f"medians of {args.repeat} run(s) each, in turn\n")
    print("| max_in_flight | 429 share | wall s | makespan s | 429s answered | endpoint busy | "
          "vs none (wall) | vs none (makespan) | worker-bound floor |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with slow_server(delay) as url:  # the mirror, once
        fleet_run(root, [Task(id=f"warm-q{i}", repo=str(repo), prompt="write b")
                         for i in range(2)], "local", 2, "warm-429",
                  engine="openai", model="slow", base_url=url, api_key="x")
    for limit in dict.fromkeys((max(1, w // 2), max(1, w // 4))):
        runs: dict[float, list[dict[str, float]]] = {0.0: [], 0.3: []}
        for rep in range(args.repeat):
            for share in runs:
                with slow_server(delay, share) as url:
                    tasks = [Task(id=f"q{limit}-{int(share * 100)}-{rep}-{i}", repo=str(repo),
                                  prompt="write b") for i in range(n)]
                    runs[share].append(fleet_run(
                        root, tasks, "local", w, f"limited-{limit}-{share}-{rep}",
                        engine="openai", model="slow", base_url=url, api_key="x",
                        max_in_flight=limit))
        none = {key: statistics.median(r[key] for r in runs[0.0]) for key in runs[0.0][0]}
        for share, ran_all in runs.items():
            ran = {key: statistics.median(r[key] for r in ran_all) for key in ran_all[0]}
            busy = 2 * n * delay / (limit * ran["makespan"])
            slept = ran["limited"] * retry_after / w  # per worker, on average
            print(f"| {limit} | {share:.0%} | {ran['wall']:.2f} | {ran['makespan']:.2f} | "
                  f"{ran['limited']:.0f} | {busy:.0%} | x{ran['wall'] / none['wall']:.2f} | "
                  f"x{ran['makespan'] / none['makespan']:.2f} | "
                  f"x{(none['makespan'] + slept) / none['makespan']:.2f} |", flush=True)


def gate_alone(args: Any) -> None:
    n, w, delay = args.slow_tasks, args.workers, args.delay
    print(f"\n3b. the gate alone: {n} tasks from {w} threads, each task {args.overhead}s "
          "of waiting, then its 2 requests through the fleet's gate (GatedEngine, the "
          "openai engine); medians\n")
    print("| max_in_flight | 429 share | time s | 429s answered | endpoint busy | vs none | "
          "worker-bound floor |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for limit in dict.fromkeys((max(1, w // 2), max(1, w // 4))):
        runs: dict[float, list[tuple[float, int]]] = {0.0: [], 0.3: []}
        for _ in range(args.repeat):
            for share in runs:
                with slow_server(delay, share) as url:
                    runs[share].append(_gated_threads(url, n, w, limit, args.overhead))
        none = statistics.median(t for t, _ in runs[0.0])
        for share, times in runs.items():
            took = statistics.median(t for t, _ in times)
            limited = statistics.median(k for _, k in times)
            print(f"| {limit} | {share:.0%} | {took:.2f} | {limited:.0f} | "
                  f"{2 * n * delay / (limit * took):.0%} | x{took / none:.2f} | "
                  f"x{(none + limited * 1.0 / w) / none:.2f} |", flush=True)


def _gated_threads(url: str, n: int, workers: int, limit: int,
                   overhead: float) -> tuple[float, int]:
    gate = Gate(limit)
    todo = list(range(n))
    lock = threading.Lock()

    def work() -> None:
        engine = create_engine("openai", model="slow", base_url=url, api_key="x",
                               retry=RetryPolicy(attempts=1))
        while True:
            with lock:
                if not todo:
                    return
                task = todo.pop()
            gated = GatedEngine(engine, gate, f"t{task}", RetryPolicy(attempts=10))
            time.sleep(overhead)
            messages: list[dict[str, Any]] = [{"role": "user", "content": "write b"}]
            gated.complete(messages, system="s")
            messages.append({"role": "tool", "content": "ok", "tool_call_id": "c1"})
            gated.complete(messages, system="s")

    started = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, gate.stats()["rate_limited"]


if __name__ == "__main__":
    main()
