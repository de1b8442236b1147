"""Preview cost vs file size: our preview of a 1 GB and a 10 MB table, and full reads.

    PYTHONPATH=src python bench/bench_tables.py            # builds the corpus once, then measures
    PYTHONPATH=src python bench/bench_tables.py --size-mb 200 --repeat 5

The corpus (bench/.corpus/tables, gitignored) is built deterministically: the same
columns for every file, values from integer arithmetic on the row id (no RNG), a CSV
and a Parquet file of about --size-mb megabytes and of 10 MB. A file that is already
there is reused. Each measurement runs in its own child process; its peak memory is the
child's ru_maxrss read with os.wait4 (per child: getrusage(RUSAGE_CHILDREN) keeps the
maximum over all children so far, which would hide a smaller child after a bigger one).
A child's peak starts at its parent's RSS at fork, so the parent imports nothing heavy and
builds the corpus in a child too. Time is measured inside the child around the operation
alone (imports excluded); the first row shows the floor: python with polars imported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / ".corpus" / "tables"
SRC = HERE.parent / "src"
MB = 2**20


def rows_frame(n: int) -> object:
    """A lazy frame of ``n`` rows; every value is arithmetic on the row id, so deterministic."""
    import polars as pl

    i = pl.int_range(0, n, dtype=pl.Int64)
    r = (i * 2654435761 + 12345) % 4294967291  # a fixed permutation-like scramble
    cities = ["Oslo", "Rome", "Lima", "Kyiv", "Pune", "Cork", "Nice", "Bern", "Riga", "Doha"]
    return pl.LazyFrame().select(
        i.alias("id"),
        pl.lit(pl.Series(cities)).gather(r % len(cities)).alias("city"),
        (r % 100_000 / 100).alias("price"),
        (r % 97).alias("qty"),
        (pl.lit(19_000) + r % 1_500).cast(pl.Date).alias("day"),
        pl.format("order {} ref {}", r, (r * 7919) % 1_000_003).alias("note"),
    )


def build(fmt: str, size_mb: int) -> Path:
    """The corpus file of ``fmt`` of about ``size_mb`` MB, built if missing.

    Built in a child process: a child's peak RSS starts at its parent's RSS at fork, so
    the measuring parent must stay small.
    """
    path = CORPUS / f"orders-{size_mb}mb.{fmt}"
    if not path.exists():
        subprocess.run([sys.executable, __file__, "--build", fmt, str(size_mb)], check=True)
    return path


def _build(fmt: str, size_mb: int) -> None:
    path = CORPUS / f"orders-{size_mb}mb.{fmt}"
    CORPUS.mkdir(parents=True, exist_ok=True)
    probe = CORPUS / f".probe.{fmt}"
    _sink(rows_frame(200_000), fmt, probe)
    per_row = probe.stat().st_size / 200_000
    probe.unlink()
    tmp = path.with_suffix(".tmp")
    _sink(rows_frame(int(size_mb * MB / per_row)), fmt, tmp)
    tmp.rename(path)


def _sink(lf: object, fmt: str, path: Path) -> None:
    if fmt == "csv":
        lf.sink_csv(path)  # type: ignore[attr-defined]
    else:
        lf.sink_parquet(path)  # type: ignore[attr-defined]


# -- the child side: one operation, timed, in a fresh interpreter ---------------------

def _child(op: str, path: str) -> None:
    import time

    import polars as pl

    if op.startswith("pandas"):
        import pandas as pd
    from yggdrasil.io import preview_table

    ops = {
        "noop": lambda: None,
        "preview": lambda: preview_table(path, 10).render(),
        "polars.read_csv": lambda: pl.read_csv(path),
        "polars.read_parquet": lambda: pl.read_parquet(path),
        "pandas.read_csv": lambda: pd.read_csv(path),
        "pandas.read_parquet": lambda: pd.read_parquet(path),
    }
    start = time.perf_counter()
    ops[op]()
    print(json.dumps({"seconds": time.perf_counter() - start}))


def measure(op: str, path: Path) -> tuple[float, int]:
    """(seconds, peak RSS in bytes) of ``op`` on ``path`` in a fresh child process."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, __file__, "--child", op, str(path)],
                            stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"child {op} {path} failed with exit {proc.returncode}")
    return json.loads(out)["seconds"], usage.ru_maxrss * 1024


def median_of(op: str, path: Path, repeat: int) -> tuple[float, int]:
    runs = [measure(op, path) for _ in range(repeat)]
    return statistics.median(t for t, _ in runs), max(m for _, m in runs)


def _fmt(seconds: float, rss: int) -> str:
    return f"{seconds * 1000:9.1f} ms {rss / MB:8.0f} MB"


def report(fmt: str, big: Path, small: Path, repeat: int, full_ops: list[str]) -> None:
    base = median_of("noop", small, repeat)
    p_small = median_of("preview", small, repeat)
    p_big = median_of("preview", big, repeat)
    size = f"{big.stat().st_size / MB:.0f} MB"
    print(f"\n{fmt}: {small.name} ({small.stat().st_size / MB:.0f} MB) vs {big.name} ({size})")
    print(f"  {'case':34} {'time':>12} {'peak RSS':>11}   ratio vs our 1 GB preview")
    print(f"  {'python + polars import, no work':34} {_fmt(*base)}")
    print(f"  {'preview, 10 MB file':34} {_fmt(*p_small)}")
    print(f"  {'preview, big file':34} {_fmt(*p_big)}   "
          f"big/10MB: time x{p_big[0] / p_small[0]:.2f}, memory x{p_big[1] / p_small[1]:.2f}")
    for op in full_ops:
        t, m = median_of(op, big, 1)
        print(f"  {op + ', big file':34} {_fmt(t, m)}   "
              f"time x{t / p_big[0]:.0f}, memory x{m / p_big[1]:.1f} of the preview's")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--build":
        _build(sys.argv[2], int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the big files")
    ap.add_argument("--repeat", type=int, default=3, help="runs per preview (median time)")
    ap.add_argument("--no-pandas", action="store_true", help="skip the (slow) pandas reads")
    args = ap.parse_args()
    pandas = [] if args.no_pandas else ["pandas.read_csv"]
    report("CSV", build("csv", args.size_mb), build("csv", 10), args.repeat,
           ["polars.read_csv", *pandas])
    report("Parquet", build("parquet", args.size_mb), build("parquet", 10), args.repeat,
           ["polars.read_parquet", *(["pandas.read_parquet"] if pandas else [])])


if __name__ == "__main__":
    main()
