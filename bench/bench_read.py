"""read_file of a 10-line window near the end of a 1 GB text file vs ``sed -n 'A,Bp'``.

    PYTHONPATH=src python bench/bench_read.py [--reps 5]

Builds bench/.corpus/big.txt once, then prints the median wall time of
``filesystem_toolbox(root, read_only=True).call("read_file", ...)`` and of sed on the
same window, with the ratio, and our peak RSS measured in a fresh child process (with
the RSS of a child that only builds the toolbox, for reference; target: well under 100 MB).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpus
from yggdrasil.loki.tools import filesystem_toolbox

SRC = str(Path(__file__).resolve().parents[1] / "src")
CHILD = """
import resource, sys
from yggdrasil.loki.tools import filesystem_toolbox
box = filesystem_toolbox(sys.argv[1], read_only=True)
if sys.argv[2] != "0":
    out = box.call("read_file", {"path": "big.txt", "start": int(sys.argv[2]), "end": int(sys.argv[3])})
    assert out.startswith(sys.argv[2] + "\\t"), out[:200]
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def median_time(fn: object, reps: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        result = fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def child_rss_mb(root: Path, start: int, end: int) -> float:
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", CHILD, str(root), str(start), str(end)],
                         capture_output=True, text=True, env=env, check=True)
    return int(out.stdout.strip()) / 1024  # ru_maxrss is in KB on Linux


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    opts = parser.parse_args()
    path = _corpus.big_text()
    lines = _corpus.line_count(path)  # also warms the page cache
    start, end = lines - 20, lines - 11
    box = filesystem_toolbox(path.parent, read_only=True)
    args = {"path": path.name, "start": start, "end": end}
    ours, out = median_time(lambda: box.call("read_file", args), opts.reps)
    sed = ["sed", "-n", f"{start},{end}p", str(path)]
    base, sed_out = median_time(lambda: subprocess.run(sed, capture_output=True).stdout,
                                opts.reps)
    assert str(out).splitlines()[0].split("\t", 1)[1] == bytes(sed_out).decode().splitlines()[0]
    size = path.stat().st_size
    print(f"file {path} ({size / 2**30:.2f} GiB, {lines:,} lines); window {start}-{end}")
    print(f"{'':<26} {'ours':>10} {'sed':>10} {'ratio':>7}")
    print(f"{'read_file 10 lines':<26} {ours * 1000:8.0f} ms {base * 1000:8.0f} ms "
          f"{ours / base:6.2f}x   ({size / ours / 2**30:.2f} GiB/s)")
    print(f"peak RSS of a child reading the window: {child_rss_mb(path.parent, start, end):.1f} MB"
          f" (a child only building the toolbox: {child_rss_mb(path.parent, 0, 0):.1f} MB)")


if __name__ == "__main__":
    main()
