"""The test suite's own speed: the README's command (`python -m pytest -q`) on this tree,
beside the same command on a baseline revision, run in turn.

    PYTHONPATH=src python bench/bench_suite.py --baseline 226c4a8   # ~15 min: both suites
    PYTHONPATH=src python bench/bench_suite.py                       # this tree only

Each suite runs from a fresh clone in the system temp folder (what is committed, not the
work tree), with -p no:cacheprovider. Printed per run: wall time, the CPU time of the
whole run (pytest, its workers and every process they waited for), the load average
around it (the machine is shared: say it with the numbers), the outcome line and the
slowest tests. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
DURATION = re.compile(r"^(\d+\.\d+)s (call|setup|teardown)\s+(\S+)")
OUTCOME = re.compile(r"^=* ?(\d+ (passed|failed).*) in ")


@dataclass
class Run:
    label: str
    wall: float
    cpu: float
    load: tuple[float, float]
    outcome: str
    slowest: list[tuple[float, str]]


def _clone(revision: str, where: Path) -> Path:
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--verify", revision],
                            capture_output=True, text=True, check=True).stdout.strip()
    tree = where / commit[:10]
    subprocess.run(["git", "clone", "-q", str(HERE), str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "checkout", "-q", commit], check=True)
    return tree


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_suite(label: str, tree: Path, extra: list[str]) -> Run:
    before_load, before_cpu = os.getloadavg()[0], _children_cpu()
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--durations=10", *extra], cwd=tree, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    wall = time.monotonic() - started
    lines = done.stdout.splitlines()
    outcome = next((m.group(1) for ln in reversed(lines) if (m := OUTCOME.match(ln))),
                   f"exit {done.returncode}: {lines[-1:] or done.stderr[-300:]}")
    slowest = [(float(m.group(1)), f"{m.group(3)} ({m.group(2)})")
               for ln in lines if (m := DURATION.match(ln))]
    failed = [ln.split(" - ")[0] for ln in lines if ln.startswith(("FAILED ", "ERROR "))]
    return Run(label, wall, _children_cpu() - before_cpu, (before_load, os.getloadavg()[0]),
               "; ".join([outcome, *failed]), sorted(slowest, reverse=True)[:5])


def show(runs: list[Run]) -> None:
    print(f"{'suite':<28} {'wall':>8} {'CPU':>8} {'load (start, end)':>18}  outcome")
    for run in runs:
        print(f"{run.label:<28} {run.wall:>7.0f}s {run.cpu:>7.0f}s "
              f"{run.load[0]:>8.1f}, {run.load[1]:<8.1f}  {run.outcome}")
    for run in runs:
        print(f"\nslowest of {run.label}:")
        for seconds, name in run.slowest:
            print(f"  {seconds:6.1f}s  {name}")
    if len(runs) >= 2 and runs[-1].wall:
        print(f"\nwall {runs[0].label} / {runs[-1].label}: x{runs[0].wall / runs[-1].wall:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="a revision to run beside HEAD (e.g. main~5)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each suite, in turn")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    args = parser.parse_args()
    where = Path(tempfile.mkdtemp(prefix="bench-suite-"))
    try:
        trees = [(f"baseline {args.baseline}", _clone(args.baseline, where))] \
            if args.baseline else []
        trees.append(("HEAD", _clone("HEAD", where)))
        runs = [run_suite(label, tree, args.pytest_args)
                for _ in range(args.runs) for label, tree in trees]
        show(runs)
    finally:
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
