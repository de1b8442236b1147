"""What the fenced table worker and the fenced ripgrep cost, against running in-process.

    PYTHONPATH=src python bench/bench_table_worker.py              # ~1 min
    PYTHONPATH=src python bench/bench_table_worker.py --reps 21

read_table and query_table now parse in a long-lived worker process (Landlock, rlimits);
before, they ran polars in the agent process. Each case runs in a fresh child process:
"cold" is the first call in it (in-process: importing polars; worker: starting the
worker, which imports polars under its fence), "warm" the median of the next --reps
calls. The corpus (bench/.corpus/worker, gitignored) is a 100,000-row CSV (~5 MB) and
the same rows as Parquet, built deterministically. The last rows time grep through the
read-only-fenced rg against the same rg unfenced, on a small tree.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / ".corpus" / "worker"
SRC = HERE.parent / "src"

BUILD = """
import polars as pl, sys
from pathlib import Path
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
i = pl.int_range(0, 100_000, dtype=pl.Int64)
df = pl.select(id=i, city=pl.format("city{}", i % 50), price=(i * 37 % 1000) / 10, qty=i % 17)
df.write_csv(out / "orders.csv"); df.write_parquet(out / "orders.parquet")
(out / "tree").mkdir(exist_ok=True)
for k in range(200):
    (out / "tree" / f"f{k}.txt").write_text(("some line of text\\n" * 200) + f"needle {k}\\n")
"""

CASE = """
import json, statistics, sys, time
root, mode, op, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sql = "SELECT city, avg(price) AS p, count(*) AS n FROM 'orders.parquet' GROUP BY city ORDER BY city"
if mode == "worker":
    from yggdrasil.loki.files import Root
    from yggdrasil.loki.tables import TableReader
    reader = TableReader(Root.at(root))
    calls = {"read_csv": lambda: reader.read_table("orders.csv"),
             "read_parquet": lambda: reader.read_table("orders.parquet"),
             "query": lambda: reader.query_table(sql)}
else:
    import os
    from yggdrasil.io import preview_table, query_tables
    os.chdir(root)
    calls = {"read_csv": lambda: preview_table("orders.csv", 10).render(),
             "read_parquet": lambda: preview_table("orders.parquet", 10).render(),
             "query": lambda: query_tables(sql).render()}
call = calls[op]
t = time.perf_counter(); call(); cold = time.perf_counter() - t
warm = []
for _ in range(reps):
    t = time.perf_counter(); call(); warm.append(time.perf_counter() - t)
print(json.dumps({"cold": cold, "warm": statistics.median(warm)}))
"""

GREP = """
import json, statistics, sys, time
import yggdrasil.loki.search._rg as rg
from yggdrasil.loki.files import Root
from yggdrasil.loki.search import Search
root, fenced, reps = sys.argv[1], sys.argv[2] == "fenced", int(sys.argv[3])
if not fenced:
    rg.fenced = lambda args, root, extra: args
s = Search(Root.at(root), backend="rg")
s.grep("needle 7")
times = []
for _ in range(reps):
    t = time.perf_counter(); s.grep("needle 7"); times.append(time.perf_counter() - t)
print(json.dumps({"warm": statistics.median(times)}))
"""


def child(code: str, *args: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, check=True)
    return dict(json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=15)
    reps = str(parser.parse_args().reps)
    if not (CORPUS / "orders.parquet").exists():
        subprocess.run([sys.executable, "-c", BUILD, str(CORPUS)], check=True)
    print(f"{'case':<28}{'in-process':>12}{'worker':>12}{'ratio':>8}")
    for op in ("read_csv", "read_parquet", "query"):
        base = child(CASE, str(CORPUS), "inproc", op, reps)
        ours = child(CASE, str(CORPUS), "worker", op, reps)
        for phase in ("cold", "warm"):
            a, b = base[phase] * 1000, ours[phase] * 1000
            print(f"{op + ' ' + phase:<28}{a:>10.1f}ms{b:>10.1f}ms{b / a:>7.2f}x")
    plain = statistics.median(child(GREP, str(CORPUS / "tree"), "plain", reps)["warm"]
                              for _ in range(3)) * 1000
    fenced = statistics.median(child(GREP, str(CORPUS / "tree"), "fenced", reps)["warm"]
                               for _ in range(3)) * 1000
    print(f"{'grep via rg (200 files)':<28}{plain:>10.1f}ms{fenced:>10.1f}ms{fenced / plain:>7.2f}x"
          "   (unfenced rg / read-only-fenced rg)")


if __name__ == "__main__":
    main()
