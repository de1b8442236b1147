"""A fleet at 1,000 and 10,000 tasks: the driver's memory, throughput, the report.

Generates N scripted tasks (3 steps each: read a file, one fenced command, done; no
model time) on a small git repository and runs them with ``loki fleet`` (the CLI, as a
subprocess: its RSS is the driver's) on the local backend and on a Ray cluster the fleet
starts itself (``ray.init(num_cpus=2)`` for 2 workers: a real local cluster), for each N
in ``--sizes``, one after the other. While a run goes, the driver's RSS is sampled
(``/proc/PID/status``) against the tasks finished so far (its stdout: a line per task).
A run past ``--max-minutes`` is interrupted (Ctrl-C: what finished stays recorded) and
measured on what it finished. Then, per run: throughput (tasks per second of makespan,
the attempts' records: first start to last end), ``loki report OUT`` timed, the page's
size, and the time until the page is interactive in headless Chromium (``--dump-dom``;
the page's own script marks ``data-ready-ms``, ``performance.now()`` once its table and
charts are drawn, and the browser's wall time is given beside a blank page's).

``--replicate N`` (with ``--report-only``) copies a finished run's rows to N tasks (new
ids, times shifted run after run, copies of the same transcripts): the report's numbers at N for a
machine that cannot run N tasks in the time (say so when quoting them).

Usage: PYTHONPATH=src python bench/bench_fleet_scale.py [--sizes 1000,10000]
       [--backends local,ray] [--workers 2] [--max-minutes 15] [--keep DIR]
       PYTHONPATH=src python bench/bench_fleet_scale.py --report-only OUT [OUT...]
       [--replicate 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SCRIPT = [{"thought": "look", "tool": "read_file", "args": {"path": "a.txt"}},
          {"thought": "write", "tool": "run", "args": {"command": "echo b > b.txt"}},
          {"thought": "finished", "done": True, "answer": "ok"}]
LOKI = [sys.executable, "-m", "yggdrasil.loki"]


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    for i in range(20):
        (repo / f"m{i:02d}.py").write_text(f"VALUE = {i}\n" * 20)
    (repo / "a.txt").write_text("a\n")
    git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run([*git, *args], check=True)
    return repo


def make_tasks(root: Path, repo: Path, n: int, prefix: str) -> tuple[Path, Path]:
    """tasks.jsonl with ``n`` tasks, and the one script they all replay."""
    script = root / "script.jsonl"
    script.write_text("".join(json.dumps(step) + "\n" for step in SCRIPT))
    tasks = root / f"tasks-{prefix}.jsonl"
    with open(tasks, "w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"{prefix}-{i:05d}", "repo": str(repo),
                                     "prompt": "write b"}) + "\n")
    return tasks, script


def rss_mb(pid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
    return int(found.group(1)) / 1024 if found else None


def run_fleet(root: Path, tasks: Path, script: Path, out: Path, backend: str, workers: int,
              max_seconds: float) -> dict[str, Any]:
    """One ``loki fleet`` run, its driver's RSS sampled against the tasks finished."""
    command = [*LOKI, "fleet", str(tasks), "--out", str(out), "--backend", backend,
               "--workers", str(workers), "--engine", "scripted", "--model", str(script),
               "--cache", str(root / "cache")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    finished = [0]
    samples: list[tuple[float, int, float]] = []  # (seconds, finished, RSS MB)
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, env=env) as driver:
        def read() -> None:
            assert driver.stdout is not None
            for line in driver.stdout:
                if line.startswith("["):
                    finished[0] += 1

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        stopped = False
        while driver.poll() is None:
            rss = rss_mb(driver.pid)
            if rss is not None:
                samples.append((time.perf_counter() - started, finished[0], rss))
            if not stopped and time.perf_counter() - started > max_seconds:
                driver.send_signal(signal.SIGINT)  # what finished stays recorded
                stopped = True
            time.sleep(0.5)
        reader.join(10)
    wall = time.perf_counter() - started
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    attempts = [a for r in results for a in r["attempts"] if a.get("started_at")]
    makespan = max(a["ended_at"] for a in attempts) - min(a["started_at"] for a in attempts)
    return {"wall": wall, "done": sum(r["status"] == "done" for r in results),
            "recorded": len(results), "makespan": makespan,
            "per_second": len(results) / makespan, "samples": samples, "stopped": stopped}


def rss_line(samples: list[tuple[float, int, float]], total: int) -> str:
    """The RSS at 10%, 50% and 90% of the tasks finished, and the peak."""
    def at(share: float) -> str:
        want = share * total
        found = next((rss for _, done, rss in samples if done >= want), None)
        return f"{found:.0f}" if found is not None else "-"

    peak = max((rss for _, _, rss in samples), default=0.0)
    return f"{at(0.1)} / {at(0.5)} / {at(0.9)} | {peak:.0f}"


def children_cpu() -> float:
    """CPU seconds of the child processes waited for so far (and of theirs)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def time_report(out: Path) -> dict[str, Any]:
    """``loki report OUT``: its wall and CPU time (CPU: what a quiet machine's wall would
    be, near enough, on a machine whose other work takes most of the cores)."""
    started, cpu = time.perf_counter(), children_cpu()
    subprocess.run([*LOKI, "report", str(out)], check=True, stdout=subprocess.DEVNULL)
    seconds, cpu = time.perf_counter() - started, children_cpu() - cpu
    page = out / "report.html"
    return {"report": seconds, "report_cpu": cpu, "mb": page.stat().st_size / 1e6,
            **interactive(page)}


def interactive(page: Path) -> dict[str, Any]:
    """The page in headless Chromium: its ready mark, the browser's wall, a blank page's."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        return {"ready_ms": None, "browser": None, "blank": None, "browser_cpu": None,
                "blank_cpu": None}
    blank = page.with_name("blank.html")
    blank.write_text("<!doctype html><html><body></body></html>")
    walls, cpus = {}, {}
    dom = ""
    for name, target in (("blank", blank), ("page", page)):
        with tempfile.TemporaryDirectory() as profile:
            started, cpu = time.perf_counter(), children_cpu()
            done = subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-extensions", f"--user-data-dir={profile}", "--dump-dom",
                 target.resolve().as_uri()],
                capture_output=True, text=True, errors="replace", timeout=300,
                env={**os.environ, "HOME": profile})
            walls[name] = time.perf_counter() - started
            cpus[name] = children_cpu() - cpu  # every process of the browser
            if name == "page":
                dom = done.stdout
    blank.unlink()
    found = re.search(r'data-ready-ms="([\d.]+)"', dom)
    return {"ready_ms": float(found.group(1)) if found else None, "browser": walls["page"],
            "blank": walls["blank"], "browser_cpu": cpus["page"], "blank_cpu": cpus["blank"]}


def replicate(source: Path, n: int, target: Path) -> Path:
    """A folder of ``n`` tasks made of ``source``'s rows, again and again (new ids, the
    times shifted by the run's span each round, copies of the transcripts)."""
    rows = [json.loads(line) for line in (source / "results.jsonl").read_text().splitlines()]
    starts = [a["started_at"] for r in rows for a in r["attempts"] if a.get("started_at")]
    ends = [a["ended_at"] for r in rows for a in r["attempts"] if a.get("ended_at")]
    span = max(ends) - min(starts)
    target.mkdir(parents=True)
    with open(target / "results.jsonl", "w") as handle:
        for k in range(n):
            row = dict(rows[k % len(rows)])
            shift = span * (k // len(rows))
            row["id"] = f"r{k:05d}-{row['id']}"
            row["attempts"] = [{**a, "started_at": a["started_at"] + shift,
                                "ended_at": a["ended_at"] + shift} for a in row["attempts"]]
            if row.get("transcript"):  # a copy: the page reads only inside the folder
                (target / row["id"]).mkdir()
                shutil.copyfile(source / row["transcript"], target / row["id"] / "t.jsonl")
                row["transcript"] = f"{row['id']}/t.jsonl"
            handle.write(json.dumps(row) + "\n")
    return target


def report_rows(outs: list[Path]) -> None:
    print("| run | tasks | `loki report` s (CPU s) | page MB | interactive in Chromium ms "
          "(the page's mark) | Chromium wall s, page / blank | Chromium CPU s, page / blank | "
          "load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for out in outs:
        n = (out / "results.jsonl").read_bytes().count(b"\n")
        r = time_report(out)
        ready = f"{r['ready_ms']:.0f}" if r["ready_ms"] is not None else "no mark"
        walls = f"{r['browser']:.2f} / {r['blank']:.2f}" if r["browser"] else "no chromium"
        cpus = f"{r['browser_cpu']:.2f} / {r['blank_cpu']:.2f}" if r["browser"] else "-"
        print(f"| {out.name} | {n:,} | {r['report']:.2f} ({r['report_cpu']:.2f}) | "
              f"{r['mb']:.1f} | {ready} | {walls} | {cpus} | {os.getloadavg()[0]:.1f} |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--backends", default="local,ray")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-minutes", type=float, default=15.0,
                        help="a run past this is interrupted and measured on what finished")
    parser.add_argument("--keep", help="keep the run folders here (default: a temp folder)")
    parser.add_argument("--report-only", nargs="+", metavar="OUT",
                        help="only the report's numbers, of these run folders")
    parser.add_argument("--replicate", type=int, default=0,
                        help="with --report-only: also a folder of N tasks copied from each")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} (2-core machine, shared)\n")
    if args.report_only:
        outs = [Path(o) for o in args.report_only]
        with tempfile.TemporaryDirectory() as temp:
            if args.replicate:
                outs += [replicate(o, args.replicate, Path(temp) / f"{o.name}-x{args.replicate}")
                         for o in list(outs)]
            report_rows(outs)
        print(f"\nload average after: {os.getloadavg()[0]:.1f}")
        return
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fleet-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    repo = make_repo(root)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{args.workers} workers, scripted tasks (read, one fenced command, done), "
          f"runs capped at {args.max_minutes:g} min\n")
    print("| backend | tasks | recorded | wall s | makespan s | tasks/s | vs the first size | "
          "driver RSS MB at 10% / 50% / 90% | peak | load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    outs = []
    for backend in args.backends.split(","):
        first = None
        for n in sizes:
            tasks, script = make_tasks(root, repo, n, f"{backend}{n}")
            out = root / f"out-{backend}-{n}"
            ran = run_fleet(root, tasks, script, out, backend, args.workers,
                            args.max_minutes * 60)
            first = first or ran["per_second"]
            cut = " (cut)" if ran["stopped"] else ""
            print(f"| {backend} | {n:,} | {ran['recorded']:,}{cut} | {ran['wall']:.0f} | "
                  f"{ran['makespan']:.0f} | {ran['per_second']:.2f} | "
                  f"x{ran['per_second'] / first:.2f} | "
                  f"{rss_line(ran['samples'], ran['recorded'])} | "
                  f"{os.getloadavg()[0]:.1f} |", flush=True)
            (out / "rss.json").write_text(json.dumps(ran["samples"]))
            outs.append(out)
    print()
    report_rows(outs)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}; run folders in {root}")


if __name__ == "__main__":
    main()
