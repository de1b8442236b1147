"""Timing helpers the benchmarks share: medians of repeated runs, in milliseconds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_ms(fn: Callable[[], object], rounds: int) -> float:
    """The median time of ``rounds`` calls, after one call that warms the caches."""
    return interleaved_ms({"": fn}, rounds)[""]


def interleaved_ms(cases: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median per case, the cases taking turns each round (load hits them all alike),
    after one warming call of each."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for fn in cases.values():
        fn()
    for _ in range(rounds):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(t) for name, t in times.items()}
