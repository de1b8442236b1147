"""grep and find through the toolbox vs running ripgrep directly, on ~50k files / ~1 GB.

    PYTHONPATH=src python bench/bench_search.py [--reps 5] [--python]

Builds bench/.corpus/tree once (seeded), warms the page cache, then prints for each
query the median wall time of ``filesystem_toolbox(root, read_only=True).call(...)``,
of ``rg`` run directly with the same pattern (its whole output read and dropped), and
the ratio (target: grep <= 1.5x). ``--python`` adds the pure-Python engine, once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpus
from yggdrasil.loki.files import Root
from yggdrasil.loki.search import Search
from yggdrasil.loki.tools import filesystem_toolbox

# rg's own defaults read .gitignore only inside a git repo; the corpus is not one.
RG = ["rg", "--no-config", "--no-require-git"]
GREPS = [
    ("rare literal", _corpus.RARE),
    ("common word", "return"),
    ("regex", r"raise [A-Z][a-z]+Error\('zz[a-z]+"),
    ("regex, no match", r"\bq[0-9]{6}x\b"),
]
GLOB_GREPS = [("rare literal, glob *.py", _corpus.RARE, "*.py"),
              ("rare literal, glob file_4*", _corpus.RARE, "file_4*")]
FINDS = [("*.py (every file)", "*.py"), ("rare name", "file_4242*"), ("path glob", "pkg01*/mod03/*")]


def timed(fn: Callable[[], Any], reps: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def paired(ours: Callable[[], Any], base: Callable[[], Any], reps: int) -> tuple[float, Any, float, Any]:
    """Median times of ``ours`` and ``base`` run in turn, so load from other work hits both."""
    ours_times, base_times, out, base_out = [], [], None, None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = ours()
        t1 = time.perf_counter()
        base_out = base()
        ours_times.append(t1 - t0)
        base_times.append(time.perf_counter() - t1)
    return statistics.median(ours_times), out, statistics.median(base_times), base_out


def cpu_paired(ours: Callable[[], Any], base: Callable[[], Any], reps: int) -> tuple[float, float]:
    """Median CPU seconds (user + system, this process and its children: rg and the fence's
    launcher) of ``ours`` and ``base`` run in turn: what the work costs, whatever the load
    (wall time on a shared machine is mostly waiting for a core). 10 ms ticks."""
    ours_cpu, base_cpu = [], []
    for _ in range(reps):
        for fn, into in ((ours, ours_cpu), (base, base_cpu)):
            t0 = os.times()
            fn()
            t1 = os.times()
            into.append(sum(t1[:4]) - sum(t0[:4]))
    return statistics.median(ours_cpu), statistics.median(base_cpu)


def run_rg(args: list[str], cwd: Path) -> int:
    """Run rg, read and drop its output (as a consumer would); the bytes it printed."""
    proc = subprocess.Popen([*RG, *args], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    total = 0
    while chunk := proc.stdout.read(1 << 20):
        total += len(chunk)
    proc.wait()
    return total


def row(label: str, ours: float, base: float, note: str) -> None:
    print(f"{label:<28} {ours * 1000:9.1f} ms {base * 1000:9.1f} ms {ours / base:7.2f}x   {note}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--python", action="store_true", help="also time the Python engine")
    parser.add_argument("--only", choices=("grep", "find"), help="time only these queries")
    opts = parser.parse_args()
    t0 = time.perf_counter()
    root = _corpus.tree()
    print(f"corpus {root} ready in {time.perf_counter() - t0:.1f}s")
    box = filesystem_toolbox(root, read_only=True)
    run_rg(["--files"], root)  # warm the page cache and the dentry cache
    run_rg(["-e", "zzzz_no_such_text"], root)
    print(f"{'query':<28} {'ours':>12} {'rg direct':>12} {'ratio':>8}   result")
    for label, pattern in GREPS if opts.only != "find" else ():
        ours, out, base, printed = paired(lambda p=pattern: box.call("grep", {"pattern": p}),
                                          lambda p=pattern: run_rg(["-e", p], root), opts.reps)
        rows = out.count("\n") + 1
        row(f"grep {label}", ours, base, f"{rows} rows shown; rg printed {printed:,} bytes")
    for label, pattern, glob in GLOB_GREPS if opts.only != "find" else ():
        ours, out, base, printed = paired(
            lambda p=pattern, g=glob: box.call("grep", {"pattern": p, "glob": g}),
            lambda p=pattern, g=glob: run_rg(["-g", g, "-e", p], root), opts.reps)
        row(f"grep {label}", ours, base, f"{out.count(chr(10)) + 1} rows; rg -g printed {printed:,} bytes")
    for label, glob in FINDS if opts.only != "grep" else ():
        ours, out, base, printed = paired(lambda g=glob: box.call("find", {"pattern": g}),
                                          lambda g=glob: run_rg(["--files", "-g", g], root),
                                          opts.reps)
        mine, theirs = cpu_paired(lambda g=glob: box.call("find", {"pattern": g}),
                                  lambda g=glob: run_rg(["--files", "-g", g], root), opts.reps)
        row(f"find {label}", ours, base, f"{out.count(chr(10)) + 1} rows; {printed:,} bytes; "
            f"CPU {mine * 1000:.0f} vs {theirs * 1000:.0f} ms ({mine / max(theirs, 0.01):.2f}x)")
    if opts.python:
        python_engine(root)


def python_engine(root: Path) -> None:
    search = Search(Root.at(root), "python")
    for label, pattern in GREPS[:1]:
        ours, _ = timed(lambda p=pattern: search.grep(p), 1)
        base, _ = timed(lambda p=pattern: run_rg(["-e", p], root), 1)
        row(f"python-engine grep {label}", ours, base, "fallback, one run")
    ours, _ = timed(lambda: search.find("*.py"), 1)
    base, _ = timed(lambda: run_rg(["--files", "-g", "*.py"], root), 1)
    row("python-engine find *.py", ours, base, "fallback, one run")


if __name__ == "__main__":
    main()
