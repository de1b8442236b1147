"""What a command costs on top of its own work: the stat-only snapshot/diff and the fence.

Builds (once) a deterministic 50k-file git repository under bench/.corpus/changes, then
prints, each as the median of several rounds:

- one stat snapshot, and the two of a scanning command, against two baselines that walk
  the same tree: ``find . -type f | wc -l`` and ``git status --porcelain``;
- the inotify view (what run/run_python use on Linux): building it once, then the cost
  per command of ten rewritten files, against the same ``git status``;
- a ``run("true")`` through the toolbox, fenced and unfenced, against ``bash -c true``
  started directly (on a small root, so the launcher's cost shows on its own).

Usage: PYTHONPATH=src python bench/bench_changes.py [--files 50000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

from _corpus import package_tree
from _timing import median_ms
from yggdrasil.loki.shell import ChangeTracker, TreeWatch, diff, snapshot
from yggdrasil.loki.tools import filesystem_toolbox, sandbox_status

CORPUS = Path(__file__).resolve().parent / ".corpus" / "changes"


def build(files: int) -> Path:
    """100 top folders x 10 subfolders x N files, small text each, committed to git."""
    stamp = CORPUS / ".git" / f"loki-bench-built-{files}"  # inside .git: not a tree file
    if stamp.exists():
        return CORPUS
    subprocess.run(["rm", "-rf", str(CORPUS)], check=True)
    package_tree(CORPUS, files)
    git = ["git", "-C", str(CORPUS), "-c", "user.name=bench", "-c", "user.email=b@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "corpus"], check=True)
    stamp.write_text("")
    return CORPUS


def shell(cmd: str, cwd: Path) -> Callable[[], object]:
    return lambda: subprocess.run(["bash", "-c", cmd], cwd=cwd, check=True, capture_output=True)


def row(name: str, ours: float, base_name: str, base: float) -> None:
    print(f"{name:<34} {ours:9.1f} ms   {base_name:<28} {base:9.1f} ms   ratio {ours / base:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    root = build(args.files)
    count = len(snapshot(root).files)
    print(f"tree: {count} files in {root} ({sandbox_status()})")

    def snap_diff() -> object:
        return diff(snapshot(root), snapshot(root))

    one = median_ms(lambda: snapshot(root), args.rounds)
    pair = median_ms(snap_diff, args.rounds)
    find = median_ms(shell("find . -type f | wc -l", root), args.rounds)
    git = median_ms(shell("git status --porcelain", root), args.rounds)
    row("one snapshot (stat every file)", one, "find -type f | wc -l", find)
    row("one snapshot (stat every file)", one, "git status --porcelain", git)
    row("per command, scanning: 2 snapshots", pair, "git status --porcelain", git)

    tracker = ChangeTracker(root)
    first = median_ms(lambda: TreeWatch(root).rebuild([]), args.rounds)
    row("building the watched view (once)", first, "git status --porcelain", git)
    touched = [root / f"pkg{i:03d}" / "mod00" / "file000.py" for i in range(0, 100, 10)]

    def watched_command() -> object:
        tracker.begin()
        for path in touched:  # what a small command does: rewrite ten files
            path.write_text(path.read_text())
        return tracker.end()

    per = median_ms(watched_command, args.rounds * 4)
    row("per command, watched (10 files)", per, "git status --porcelain", git)
    big = filesystem_toolbox(root)
    whole = median_ms(partial(big.call, "run", {"command": "true"}), args.rounds * 2)
    row("run('true') on this tree, all in", whole, "git status --porcelain", git)

    with tempfile.TemporaryDirectory() as small:
        direct = median_ms(shell("true", Path(small)), args.rounds * 4)
        for fenced in (True, False):
            box = filesystem_toolbox(small, sandbox="auto" if fenced else "off")
            cost = median_ms(partial(box.call, "run", {"command": "true"}), args.rounds * 4)
            label = "fenced" if fenced and sandbox_status().available else "unfenced"
            row(f"run('true') {label}, small root", cost, "bash -c true", direct)


if __name__ == "__main__":
    main()
