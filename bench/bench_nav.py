"""Navigation on a big tree, before and after, side by side in one run (issue 37 item 2).

    PYTHONPATH=src python bench/bench_nav.py                 # this checkout only
    PYTHONPATH=src python bench/bench_nav.py --base main     # and `main`'s src, in turn
    PYTHONPATH=src python bench/bench_nav.py --wide 150000 --base main   # a 150,000-file tree

Tree: ``_code_corpus.large_tree()``, a real copy of this interpreter's library folder
with its site-packages (here ~68,000 files, 2 GB, ~2,000 of them in ``node_modules`` and
``venv`` folders the change watch does not enter). One toolbox process per side
(``sandbox="off"``), calls in a row: a cold find_symbol, calls made while the first
build runs (from another thread, every second from 5 s on; those whose note says every
file is parsed landed in the build's last walk), the whole index (first repo_map), warm
find_symbol of 20 names x 3 rounds (median and p99 from the 2nd call on), then 5 rounds
of (an edit of json/decoder.py, ``run("touch <100 files>")``, find_symbol of the new
definition). The base side runs ``git archive <base> src`` unpacked in a temporary folder.

``--wide N``: a synthetic tree of N small Python files instead (3 functions and a class
each, 100 to a folder, made once on /dev/shm): a cold find_symbol of a name defined late
in walk order, the first repo_map, then 8 names spread over the tree x 3 rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _code_corpus
from bench_code import CHANGED, LARGE_NAMES, _rss

HERE = Path(__file__).resolve().parent


def _timed(box: Any, tool: str, args: dict[str, Any]) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = box.call(tool, args)
    return time.perf_counter() - t0, out


def child(target: str) -> dict[str, Any]:
    from yggdrasil.loki.tools import filesystem_toolbox

    root = Path(target)
    box = filesystem_toolbox(target, sandbox="off")
    out: dict[str, Any] = {"rss_start": _rss()}
    out["cold_find"], _ = _timed(box, "find_symbol", {"name": "urlsplit"})
    during: list[tuple[float, float, str]] = []  # (started, took, head) while the build runs
    building = threading.Event()

    def probe() -> None:
        building.wait()
        time.sleep(5)
        while building.is_set():
            t0 = time.perf_counter()
            said = box.call("find_symbol", {"name": "JSONDecoder"})
            during.append((t0, time.perf_counter() - t0, said.split("\n")[-1][:140]))
            time.sleep(1)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    building.set()
    out["build"], mapped = _timed(box, "repo_map", {})
    building.clear()
    thread.join()
    out["during_build"] = [(took, said) for _, took, said in during]
    out["map_head"] = mapped.split("\n")[0][:160]
    out["rss_built"] = _rss()
    out["peak_built"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    warm = [[_timed(box, "find_symbol", {"name": n})[0] for n in LARGE_NAMES] for _ in range(3)]
    out["warm_first"] = warm[0]
    out["warm"] = [t for row in warm[1:] for t in row]
    out["warm_by_name"] = dict(zip(LARGE_NAMES, warm[2], strict=True))
    edited = root / "json" / "decoder.py"
    original = edited.read_bytes()
    touched = sorted(str(p.relative_to(root)) for folder in ("email", "asyncio", "unittest", "xml")
                     for p in (root / folder).rglob("*.py"))[:100]
    after = []
    try:
        for i in range(5):
            edited.write_bytes(original + CHANGED.replace("bench_added_function",
                                                          f"bench_added_{i}").encode())
            box.call("run", {"command": "touch " + " ".join(touched)})
            took, found = _timed(box, "find_symbol", {"name": f"bench_added_{i}"})
            after.append((took, found.startswith("json/decoder.py:")))
    finally:
        edited.write_bytes(original)
    out["after_touch"] = after
    out["rss_end"] = _rss()
    out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


WIDE_NAMES = [f"func_{d}_{f}_1" for d, f in ((10, 5), (300, 7), (700, 9), (1100, 11),
                                             (1400, 50), (1499, 99))] + ["Thing5x5", "method"]


def wide_tree(files: int) -> Path:
    """``files`` small Python files (3 functions and a class each) in folders of 100, on
    /dev/shm when it is there: a tree wider than the index's caps once were (100,000)."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else HERE / ".corpus"
    root = base / f"loki-wide-{files}"
    if (root / ".done").exists():
        return root
    rng = random.Random(7)
    for n in range(files):
        d, f = divmod(n, 100)
        folder = root / f"pkg{d // 50:02d}" / f"mod{d % 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        body = [f"import pkg{rng.randrange(30):02d}\n\n"]
        body += [f"def func_{d}_{f}_{k}(x):\n    return helper_{rng.randrange(5000)}(x)\n\n"
                 for k in range(3)]
        body.append(f"class Thing{d}x{f}:\n    def method(self):\n        return {n}\n")
        (folder / f"file_{f:03d}.py").write_text("".join(body))
    (root / ".done").write_text("")
    return root


def wide_child(target: str) -> dict[str, Any]:
    """On the wide tree: a cold find_symbol of a name defined late in walk order, the
    first repo_map, then the names of WIDE_NAMES x 3 rounds."""
    from yggdrasil.loki.tools import filesystem_toolbox

    box = filesystem_toolbox(target, sandbox="off")
    out: dict[str, Any] = {"rss_start": _rss()}
    out["cold_find"], said = _timed(box, "find_symbol", {"name": "func_1400_50_1"})
    out["cold_found"] = said.startswith("pkg28/")
    out["build"], _ = _timed(box, "repo_map", {})
    rounds = [[_timed(box, "find_symbol", {"name": n}) for n in WIDE_NAMES] for _ in range(3)]
    out["warm"] = [t for row in rounds[1:] for t, _ in row]
    out["found"] = sum(not said.startswith("[no definition") for _, said in rounds[-1])
    out["rss_built"] = _rss()
    return out


def wide_rows(r: dict[str, Any]) -> dict[str, str]:
    return {
        "cold find_symbol of a name defined late in walk order": (
            f"{r['cold_find']:.1f} s, {'found' if r['cold_found'] else 'NOT found'}"),
        "first repo_map (whole index)": f"{r['build']:.0f} s",
        "warm find_symbol median / max (rounds 2-3)": (
            f"{statistics.median(r['warm']) * 1000:.1f} / {max(r['warm']) * 1000:.1f} ms"),
        f"names found, of {len(WIDE_NAMES)}": f"{r['found']}",
        "RSS, index built": f"{r['rss_built'] / 2**20:.0f} MB",
    }


def run_side(src: Path, root: Path, child: str = "--child") -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, __file__, child, str(root)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the child on {src} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().split("\n")[-1])


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rows(r: dict[str, Any]) -> dict[str, str]:
    ms = 1000
    after = [t for t, _ in r["after_touch"]]
    during = r["during_build"]
    return {
        "cold find_symbol('urlsplit')": f"{r['cold_find']:.1f} s",
        "first repo_map (whole index)": f"{r['build']:.0f} s",
        "find_symbol during the build: max": (f"{max(t for t, _ in during) * ms:.0f} ms "
                                              f"({len(during)} calls)" if during else "-"),
        "  of them after the parse (its last walk): max": _after_parse(during),
        "warm find_symbol median (2nd+ call)": f"{statistics.median(r['warm']) * ms:.1f} ms",
        "warm find_symbol p99 (2nd+ call)": f"{_p(r['warm'], 0.99) * ms:.1f} ms",
        "warm find_symbol max (1st call of each)": f"{max(r['warm_first']) * ms:.0f} ms",
        "after edit + 100 touched: p95": (f"{_p(after, 0.95) * ms:.1f} ms, correct "
                                          f"{sum(ok for _, ok in r['after_touch'])}/5"),
        "RSS, index built": f"{r['rss_built'] / 2**20:.0f} MB",
        "peak RSS": f"{r['peak'] / 2**20:.0f} MB",
    }


def _after_parse(during: list[list[Any]]) -> str:
    """The calls that answered while the build's last walk ran: their note says every
    file is parsed ('N of N source files parsed so far')."""
    took = [t for t, said in during
            if (m := re.search(r"([\d,]+) of ([\d,]+) source files parsed", said))
            and m.group(1) == m.group(2)]
    return f"{max(took) * 1000:.0f} ms ({len(took)} calls)" if took else "- (0 calls)"


def _unpacked(ref: str, tmp: Path) -> Path:
    """``ref``'s src folder, unpacked first: the checkout may change while a side runs."""
    folder = tmp / ref
    folder.mkdir()
    archive = subprocess.run(["git", "archive", ref, "src"], cwd=HERE.parent, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder / "src"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", help="a git ref whose src runs first, side by side")
    parser.add_argument("--new", help="a git ref to run instead of this checkout's src")
    parser.add_argument("--json", help="also write each side's numbers to this file")
    parser.add_argument("--wide", type=int, metavar="FILES",
                        help="instead: a synthetic tree of FILES small files (e.g. 150000)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-wide", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        print(json.dumps(child(opts.child)))
        return
    if opts.child_wide:
        print(json.dumps(wide_child(opts.child_wide)))
        return
    if opts.wide:
        wide_main(opts)
        return
    root = _code_corpus.large_tree()
    files = sum(1 for p in root.rglob("*") if p.is_file())
    print(f"tree: {files:,} files; load {os.getloadavg()[0]:.1f}")
    sides: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        srcs = {ref: _unpacked(ref, Path(tmp)) for ref in (opts.base, opts.new) if ref}
        if opts.base:
            sides[opts.base] = run_side(srcs[opts.base], root)
        sides[opts.new or "this checkout"] = run_side(srcs.get(opts.new, HERE.parent / "src"), root)
        if opts.json:
            Path(opts.json).write_text(json.dumps(sides))
    table = {name: rows(r) for name, r in sides.items()}
    print(f"load at the end {os.getloadavg()[0]:.1f}\n")
    print("| case | " + " | ".join(table) + " |")
    print("| --- |" + " ---: |" * len(table))
    for case in next(iter(table.values())):
        print(f"| {case} | " + " | ".join(t[case] for t in table.values()) + " |")
    for name, r in sides.items():
        slow = sorted(r["warm_by_name"].items(), key=lambda kv: -kv[1])[:3]
        print(f"{name}: slowest warm names: "
              + ", ".join(f"{n} {t * 1000:.0f} ms" for n, t in slow))
        for took, said in r["during_build"][:3]:
            print(f"  during the build: {took * 1000:.0f} ms, last line {said!r}")


def wide_main(opts: argparse.Namespace) -> None:
    root = wide_tree(opts.wide)
    print(f"wide tree: {opts.wide:,} files under {root}; load {os.getloadavg()[0]:.1f}")
    sides: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        srcs = {ref: _unpacked(ref, Path(tmp)) for ref in (opts.base, opts.new) if ref}
        if opts.base:
            sides[opts.base] = wide_rows(run_side(srcs[opts.base], root, "--child-wide"))
        sides[opts.new or "this checkout"] = wide_rows(run_side(
            srcs.get(opts.new, HERE.parent / "src"), root, "--child-wide"))
    print(f"load at the end {os.getloadavg()[0]:.1f}\n")
    print("| case | " + " | ".join(sides) + " |")
    print("| --- |" + " ---: |" * len(sides))
    for case in next(iter(sides.values())):
        print(f"| {case} | " + " | ".join(t[case] for t in sides.values()) + " |")


if __name__ == "__main__":
    main()
