"""What a fleet costs per task, and what a second worker buys when the model is slow.

1. Throughput: N tasks whose engine waits (an OpenAI-compatible server on 127.0.0.1 that
   takes ``--delay`` seconds per answer, two answers per task), with 1 and then 2 workers:
   the ratio of the times (ideal: 2). It runs first, so that the local backend's fork
   server is started with the openai SDK imported (as ``loki fleet --engine openai`` does).
2. Overhead: N small tasks (read a file, write one, done; scripted engine, no model) run
   through ``Fleet`` with one worker, against ``Loki.act`` called N times in a loop on one
   folder, with the same fenced toolbox. The difference per task is what the fleet adds:
   a worker process (a fork), a worktree of the node's mirror, two snapshots and the diff,
   the result line (fsync) and the transcript.

Each runs on the local backend, and on a local Ray cluster (``ray.init(num_cpus=2)``)
when ray is installed (``--no-ray`` skips it).

Usage: PYTHONPATH=src python bench/bench_fleet.py [--tasks 20] [--slow-tasks 8] [--delay 0.5]
"""

from __future__ import annotations

import argparse
import json
import logging
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
from yggdrasil.loki.engines.scripted import ScriptedEngine
from yggdrasil.loki.fleet import Fleet, Task
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
              **engine: Any) -> float:
    fleet = Fleet(backend=backend, workers=workers, out=root / f"out-{name}",
                  cache_dir=root / "cache", **engine)
    started = time.perf_counter()
    results = list(fleet.run(tasks))
    elapsed = time.perf_counter() - started
    bad = [r.reason for r in results if r.status != "done"]
    if bad:
        raise SystemExit(f"{name}: {len(bad)} tasks failed: {bad[0]}")
    return elapsed


class _Slow(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    delay = 0.5

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        time.sleep(self.delay)
        acted = any(m.get("role") == "tool" for m in body["messages"])
        message: dict[str, Any] = {"role": "assistant", "content": "done" if acted else None}
        if not acted:
            message["tool_calls"] = [{"id": "c1", "type": "function", "function": {
                "name": "write_file", "arguments": json.dumps({"path": "b.txt", "content": "b"})}}]
        data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "slow",
                           "choices": [{"index": 0, "message": message,
                                        "finish_reason": "stop" if acted else "tool_calls"}],
                           "usage": {"prompt_tokens": 100, "completion_tokens": 10}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def slow_server(delay: float) -> Iterator[str]:
    _Slow.delay = delay
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def row(label: str, ours: float, base: float, note: str) -> str:
    return f"| {label} | {ours:.3f} | {base:.3f} | x{ours / base:.2f} | {note} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--slow-tasks", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    backends = ["local"]
    if not args.no_ray:
        try:
            import ray

            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)
            backends.append("ray")
        except ImportError:
            print("(ray is not installed: local backend only)")
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        repo = make_repo(root)
        scripts = root / "scripts"
        scripts.mkdir()
        tasks = [Task(id=f"t{i}", repo=str(repo), prompt="write b") for i in range(args.tasks)]
        for task in tasks:
            (scripts / f"{task.id}.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SCRIPT))
        scripted = {"engine": "scripted", "model": str(scripts / "{id}.jsonl")}
        slow = [Task(id=f"s{i}", repo=str(repo), prompt="write b") for i in range(args.slow_tasks)]
        print(f"1. throughput: {args.slow_tasks} tasks, engine answers in {args.delay}s "
              "(2 answers per task)\n")
        wait = args.slow_tasks * 2 * args.delay
        print("| backend | 1 worker s | 2 workers s | speed-up (ideal 2) | engine wait alone s |")
        print("| --- | ---: | ---: | ---: | ---: |")
        with slow_server(args.delay) as url:
            engine = {"engine": "openai", "model": "slow", "base_url": url, "api_key": "x"}
            for backend in backends:
                # warm: the mirror, the fork server, and on Ray two worker processes that
                # have imported the agent and the SDK (a cold Ray worker takes seconds)
                fleet_run(root, slow[:2], backend, 2, f"warm-slow-{backend}", **engine)
                one = fleet_run(root, slow, backend, 1, f"one-{backend}", **engine)
                two = fleet_run(root, slow, backend, 2, f"two-{backend}", **engine)
                print(f"| {backend} | {one:.2f} | {two:.2f} | x{one / two:.2f} | {wait:.1f} |")
        print(f"\n2. overhead: {args.tasks} tasks (3 steps each, scripted), 1 worker\n")
        print("| backend | fleet s/task | Loki.act loop s/task | ratio | fleet adds per task |")
        print("| --- | ---: | ---: | ---: | ---: |")
        base = loop_baseline(repo, args.tasks) / args.tasks
        for backend in backends:
            fleet_run(root, tasks[:1], backend, 1, f"warm-{backend}", **scripted)  # mirror, pool
            ours = fleet_run(root, tasks, backend, 1, f"over-{backend}", **scripted) / args.tasks
            print(row(backend, ours, base, f"{(ours - base) * 1000:.0f} ms"))

if __name__ == "__main__":
    main()
