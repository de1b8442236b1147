"""Deterministic benchmark corpora under bench/.corpus/ (gitignored), built once, reused.

``tree()``: ~50k files / ~1 GB of code-like text in nested folders, with .gitignore'd
build folders and *.tmp files, hidden folders and some binary files, like a real repo.
``big_text()``: one ~1 GB text file of numbered lines.
``package_tree()``: 100 x 10 folders of tiny Python files (the change-tracking benchmarks).
A corpus is rebuilt only when its recipe (``VERSION`` and sizes) changes.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / ".corpus"
VERSION = 1
RARE = "ZQXJ_RARE_TOKEN"  # appears in exactly RARE_FILES files
RARE_FILES = 7


def _ready(path: Path, recipe: dict[str, object]) -> bool:
    stamp = path.with_suffix(".recipe.json")
    return path.exists() and stamp.exists() and json.loads(stamp.read_text()) == recipe


def _stamp(path: Path, recipe: dict[str, object]) -> None:
    path.with_suffix(".recipe.json").write_text(json.dumps(recipe))


def _line_pool(rng: random.Random, n: int) -> list[str]:
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(4000)]
    shapes = [
        "def {a}_{b}({c}, {d}):", "    return {a} + {b}", "    {a} = {b}.{c}({d})",
        "# {a} {b} {c} {d} {e}", "class {A}{B}:", "    if {a} is not None:",
        "        raise {A}Error('{b} {c}')", "import {a}", "{a}_{n} = {m}", "",
    ]
    pool = []
    for _ in range(n):
        w = [rng.choice(words) for _ in range(5)]
        shape = rng.choice(shapes)
        pool.append(shape.format(a=w[0], b=w[1], c=w[2], d=w[3], e=w[4], A=w[0].title(),
                                 B=w[1].title(), n=rng.randint(1000, 9999), m=rng.randint(0, 99)))
    return pool


def tree(files: int = 50_000, mean_size: int = 20_000, seed: int = 7) -> Path:
    """A repo-like tree; returns its root."""
    root = CORPUS / "tree"
    recipe = {"version": VERSION, "files": files, "mean_size": mean_size, "seed": seed}
    if _ready(root, recipe):
        return root
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(seed)
    blob = "\n".join(_line_pool(rng, 40_000)) + "\n"
    rare = set(rng.sample(range(files), RARE_FILES))
    per_dir = 50
    for i in range(files):
        top, sub = divmod(i // per_dir, 20)
        folder = root / f"pkg{top:03d}" / f"mod{sub:02d}"
        if i % per_dir == 0:
            folder.mkdir(parents=True, exist_ok=True)
        if i % (per_dir * 20) == 0:
            _extras(root / f"pkg{top:03d}", rng, blob)
        start = blob.find("\n", rng.randrange(len(blob) - 3 * mean_size)) + 1
        size = rng.randint(mean_size // 10, 2 * mean_size - mean_size // 10)
        text = blob[start : blob.find("\n", start + size) + 1]
        if i in rare:
            text += f"    marker = '{RARE}'\n"
        (folder / f"file_{i:05d}.py").write_text(text)
    _stamp(root, recipe)
    return root


def _extras(pkg: Path, rng: random.Random, blob: str) -> None:
    """What makes a repo realistic for search: ignored, hidden and binary files."""
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / ".gitignore").write_text("build/\n*.tmp\n")
    for folder in ("build", ".cache"):
        (pkg / folder).mkdir(exist_ok=True)
        for j in range(20):
            (pkg / folder / f"out_{j}.py").write_text(blob[j * 5000 : j * 5000 + 20_000])
    for j in range(5):
        (pkg / f"scratch_{j}.tmp").write_text(blob[:10_000])
        (pkg / f"image_{j}.bin").write_bytes(rng.randbytes(20_000) + b"\0")


def big_text(size: int = 1 << 30) -> Path:
    """One text file of about ``size`` bytes: 'line <n>: <filler>' lines of ~100 bytes."""
    path = CORPUS / "big.txt"
    recipe = {"version": VERSION, "size": size}
    if _ready(path, recipe):
        return path
    CORPUS.mkdir(parents=True, exist_ok=True)
    filler = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor"
    with path.open("w") as fh:
        n, written = 1, 0
        while written < size:
            chunk = "".join(f"line {k:09d}: {filler}\n" for k in range(n, n + 100_000))
            fh.write(chunk)
            written += len(chunk)
            n += 100_000
    _stamp(path, recipe)
    return path


def line_count(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))


def package_tree(root: Path, files: int) -> list[Path]:
    """100 top folders x 10 subfolders holding ``files // 1000`` tiny .py files each (at
    least one); the leaf folders, in order (leaf ``n`` is ``pkg{n // 10}/mod{n % 10}``)."""
    per_leaf = max(1, files // 1000)
    leaves = []
    for i in range(100):
        for j in range(10):
            leaf = root / f"pkg{i:03d}" / f"mod{j:02d}"
            leaf.mkdir(parents=True)
            for k in range(per_leaf):
                (leaf / f"file{k:03d}.py").write_text(f"VALUE = {i * 100_000 + j * 1000 + k}\n")
            leaves.append(leaf)
    return leaves
