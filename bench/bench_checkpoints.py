"""What checkpoints cost: the baseline, each step, the storage; against a shadow git.

On the 50k-file corpus (``_corpus.tree()``, ~1 GB of code-like text), side by side:

- the first checkpoint (the baseline: every file kept, compressed, deduplicated) against a
  shadow git's first ``git add -A && git write-tree`` (a git folder of its own outside
  the tree, ``GIT_DIR``/``GIT_WORK_TREE``, the tree's own .git untouched); then a second
  toolbox on the same tree (the stat cache of the first baseline) against a second
  ``git add -A`` with the index already there;
- each step that changes 10 files (~20 KB of code each, rewritten in place by a
  command): what the checkpoint adds to the step (``Checkpoints.step``, p50/p95), the
  whole ``run_python`` call with checkpoints on against the same call with them off, and the
  shadow git's ``git add -A && git write-tree`` after the same change;
- storage beyond the baseline, as a ratio to the bytes the steps changed: our store's
  growth (SQLite file + WAL) and the shadow git's objects folder's.

The 10 files live in a folder of their own inside the corpus (``_bench_checkpoints/``),
made at the start and removed at the end, so the corpus stays as the other benchmarks
expect it.

Usage: PYTHONPATH=src python bench/bench_checkpoints.py [--steps 30]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _corpus import tree

FOLDER = "_bench_checkpoints"
FILES = 10


def du(path: Path) -> int:
    """Bytes a folder's files take (apparent size)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def settled(store: object) -> int:
    """The store's size once what steps kept raw is compressed and the log folded in."""
    store.settle()  # type: ignore[attr-defined]  # compressed, the log folded in
    return int(store.bytes_used())  # type: ignore[attr-defined]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def shadow_git(git_dir: Path, work: Path) -> float:
    """One shadow-git snapshot of ``work``: seconds."""
    env = {**os.environ, "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(work)}
    start = time.perf_counter()
    subprocess.run(["git", "add", "-A"], env=env, check=True, capture_output=True)
    subprocess.run(["git", "write-tree"], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def rewrite(new: list[str]) -> str:
    """Python that rewrites the 10 files in place with ``new`` (a command: run_python)."""
    files = {f"{FOLDER}/f{i}.py": text for i, text in enumerate(new)}
    return ("import json\n"
            f"for name, text in json.loads({json.dumps(json.dumps(files))}).items():\n"
            "    with open(name, 'w') as out:\n"
            "        out.write(text)\n")


def texts(rng: random.Random, corpus: Path, n: int) -> list[str]:
    """``n`` code-like texts of ~20 KB, each a real corpus file with a line of its own."""
    sources = sorted(corpus.glob("pkg00*/mod0*/file_*.py"))
    return [sources[rng.randrange(len(sources))].read_text() + f"# edit {rng.random()}\n"
            for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    corpus = tree()
    scratch = corpus / FOLDER
    shutil.rmtree(scratch, ignore_errors=True)
    state = Path(tempfile.mkdtemp(prefix="loki-bench-state-"))
    shadow = Path(tempfile.mkdtemp(prefix="loki-bench-shadow-")) / "git"
    os.environ["LOKI_STATE_DIR"] = str(state)
    from yggdrasil.loki.tools import filesystem_toolbox

    rng = random.Random(11)
    scratch.mkdir()
    for i in range(FILES):
        (scratch / f"f{i}.py").write_text(texts(rng, corpus, 1)[0])
    try:
        files = sum(1 for _ in corpus.rglob("*") if _.is_file())
        size = du(corpus)
        print(f"tree: {files} files, {size / 1e6:.0f} MB ({corpus})")
        subprocess.run(["git", "init", "-q", "--bare", str(shadow)], check=True)

        # -- the baseline ---------------------------------------------------------------
        start = time.perf_counter()
        box = filesystem_toolbox(corpus)
        keeper = box.checkpointing
        assert keeper is not None
        keeper.wait_baseline()
        ours_first = time.perf_counter() - start
        store_base = settled(keeper.store)
        git_first = shadow_git(shadow, corpus)
        git_base = du(shadow / "objects")
        start = time.perf_counter()
        second = filesystem_toolbox(corpus)
        assert second.checkpointing is not None
        second.checkpointing.wait_baseline()
        ours_again = time.perf_counter() - start
        second.close()
        git_again = shadow_git(shadow, corpus)
        store_base = settled(keeper.store)  # both baselines (the second adds its manifest)
        print(f"baseline, first:  ours {ours_first:7.2f} s  shadow git {git_first:7.2f} s  "
              f"ratio {ours_first / git_first:5.2f}x")
        print(f"baseline, again:  ours {ours_again:7.2f} s  shadow git {git_again:7.2f} s  "
              f"ratio {ours_again / git_again:5.2f}x")
        print(f"baseline size:    ours {store_base / 1e6:7.1f} MB  shadow git "
              f"{git_base / 1e6:7.1f} MB  (tree {size / 1e6:.0f} MB)")

        # -- steps ---------------------------------------------------------------------
        off = filesystem_toolbox(corpus, checkpoints=False)
        step_ms: list[float] = []
        step_cpu: list[float] = []  # the step's own thread: scheduling noise left out
        run_on: list[float] = []
        run_off: list[float] = []
        git_ms: list[float] = []
        changed = 0
        original_step = keeper.step

        def timed_step(tool: str, *, tracked: bool = True) -> int | None:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return original_step(tool, tracked=tracked)
            finally:
                step_ms.append((time.perf_counter() - start) * 1000)
                step_cpu.append((time.thread_time() - cpu) * 1000)

        keeper.step = timed_step  # type: ignore[method-assign]
        for _ in range(args.steps):
            for target in (off, box):  # take turns (ours last: its timeline is current)
                new = texts(rng, corpus, FILES)
                start = time.perf_counter()
                done = target.invoke("run_python", {"code": rewrite(new)})
                took = (time.perf_counter() - start) * 1000
                assert getattr(done.data, "exit_code", None) == 0, done.text
                (run_on if target is box else run_off).append(took)
                if target is box:
                    changed += sum(len(t.encode()) for t in new)
                    git_ms.append(shadow_git(shadow, corpus) * 1000)
        grown = settled(keeper.store) - store_base
        git_grown = du(shadow / "objects") - git_base
        print(f"per step, 10 files changed ({args.steps} steps; ms, p50 / p95):")
        print(f"  checkpoint added to the step  {statistics.median(step_ms):7.1f} / "
              f"{pct(step_ms, 0.95):7.1f}")
        print(f"  the same, CPU time of the step {statistics.median(step_cpu):7.1f} / "
              f"{pct(step_cpu, 0.95):7.1f}  (compressing is left to a thread of its own)")
        print(f"  run_python, checkpoints on    {statistics.median(run_on):7.1f} / "
              f"{pct(run_on, 0.95):7.1f}")
        print(f"  run_python, checkpoints off   {statistics.median(run_off):7.1f} / "
              f"{pct(run_off, 0.95):7.1f}")
        print(f"  shadow git add -A + write-tree {statistics.median(git_ms):6.1f} / "
              f"{pct(git_ms, 0.95):7.1f}  (ratio of p50s, ours / git: "
              f"{statistics.median(step_ms) / statistics.median(git_ms):.3f}x)")
        print(f"storage beyond the baseline: {changed / 1e6:.2f} MB changed; ours "
              f"{grown / 1e6:.2f} MB ({grown / changed:.2f}x), shadow git "
              f"{git_grown / 1e6:.2f} MB ({git_grown / changed:.2f}x)")

        # -- rewind --------------------------------------------------------------------
        start = time.perf_counter()
        result = box.rewind(0)
        print(f"rewind to 0 ({len(result.restored)} paths): "
              f"{(time.perf_counter() - start) * 1000:.0f} ms, not restored: "
              f"{len(result.not_restored)}")
        box.close()
        off.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(shadow.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
