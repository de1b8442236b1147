"""The code tools (find_symbol, repo_map, outline) vs ctags -R and Python's ast, side by side.

    PYTHONPATH=src python bench/bench_code.py [--reps 3] [--npm]
    PYTHONPATH=src python bench/bench_code.py --large   # the monorepo-scale tree only

Corpora (bench/_code_corpus.py, built once): a copy of the CPython standard library, a
seeded TypeScript/TSX/JavaScript project of 3,000 modules, one 10,000-line Python file,
and with --npm real packages from the npm registry. Every "first" call runs in a fresh
child process (nothing indexed yet, page cache warm) and is timed inside it, around the
call only; the whole child's wall time (interpreter start, imports) is printed too.
Baselines: ``ctags -R`` of universal-ctags on the same tree and languages (Debian:
``apt-get install universal-ctags``; skipped when absent) and ``ast.parse`` + ``ast.walk``.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _code_corpus

CHANGED = "\n\ndef bench_added_function():\n    return 1\n"


# -- what a child process does ----------------------------------------------------------------


def _rss() -> int:
    with open("/proc/self/status") as fh:
        line = next(x for x in fh if x.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def child(case: str, target: str, arg: str) -> dict[str, Any]:
    from yggdrasil.loki.tools import filesystem_toolbox

    if case == "memory":
        return memory(target)
    if case == "large":
        return large(target)
    if case == "ast":
        t0 = time.perf_counter()
        tree = ast.parse(Path(target).read_bytes())
        found = [(n.name, n.lineno) for n in ast.walk(tree)
                 if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
        return {"seconds": time.perf_counter() - t0, "found": len(found)}
    box = filesystem_toolbox(target, read_only=True)
    before = _rss()
    tool, args = {"find": ("find_symbol", {"name": arg}), "map": ("repo_map", {}),
                  "outline": ("outline", {"path": arg})}[case]
    t0 = time.perf_counter()
    first = box.call(tool, args)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out: dict[str, Any] = {"seconds": seconds, "rows": first.count("\n") + 1,
                           "head": first.split("\n")[0][:120], "index_bytes": peak - before}
    # The warm call: the same question after one file changed (a function appended).
    changed = Path(target) / (arg if case == "outline" else _changed_file(Path(target)))
    original = changed.read_bytes()
    try:
        changed.write_bytes(original + CHANGED.encode())
        t0 = time.perf_counter()
        box.call(tool, args)
        out["warm"] = time.perf_counter() - t0
    finally:
        changed.write_bytes(original)
    from yggdrasil.loki.code import Code
    from yggdrasil.loki.files import Root

    index = Code(Root.at(target)).index
    parsed = [e for e in index.entries.values() if e.outline is not None]
    out.update(files=len(index.entries), parsed=len(parsed),
               symbols=sum(len(e.outline.symbols) for e in parsed if e.outline),
               held=index.held)
    return out


LARGE_NAMES = ["main", "urlsplit", "Popen", "HTTPConnection", "DataFrame", "read_csv",
               "JSONDecoder", "ArgumentParser", "TestCase", "Session", "Thread", "defaultdict",
               "dumps", "setUp", "__init__", "Path", "Client", "parse_args", "BaseModel",
               "get_config"]


def _timed(box: Any, tool: str, args: dict[str, Any]) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = box.call(tool, args)
    return time.perf_counter() - t0, out


def large(target: str) -> dict[str, Any]:
    """The monorepo case in one toolbox process: a cold find_symbol, the whole index (the
    first repo_map), warm calls, then an edit and commands that touch or create 100 files."""
    from yggdrasil.loki.tools import filesystem_toolbox

    root = Path(target)
    box = filesystem_toolbox(target, sandbox="off")
    out: dict[str, Any] = {"rss_start": _rss()}
    out["cold_find"], first = _timed(box, "find_symbol", {"name": "urlsplit"})
    out["cold_find_head"] = first.split("\n")[0][:100]
    out["build"], mapped = _timed(box, "repo_map", {})
    out["map_head"] = mapped.split("\n")[0][:160]
    out["rss_built"] = _rss()
    out["peak_built"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    finds = [_timed(box, "find_symbol", {"name": n}) for n in LARGE_NAMES]
    out["warm_find"] = [t for t, _ in finds]
    out["warm_find_rows"] = [o.count("\n") + 1 for _, o in finds]
    out["warm_outline"] = [_timed(box, "outline", {"path": "json/decoder.py"})[0]
                           for _ in range(20)]
    out["warm_map"] = [_timed(box, "repo_map", {})[0] for _ in range(3)]
    edited = root / "json" / "decoder.py"
    original = edited.read_bytes()
    touched = sorted(str(p.relative_to(root)) for folder in ("email", "asyncio", "unittest", "xml")
                     for p in (root / folder).rglob("*.py"))[:100]
    out["touched"] = len(touched)
    try:
        edited.write_bytes(original + CHANGED.encode())
        box.call("run", {"command": "touch " + " ".join(touched)})
        out["after_touch"], found = _timed(box, "find_symbol", {"name": "bench_added_function"})
        out["after_touch_ok"] = found.startswith("json/decoder.py:")
        out["map_after_edit"] = _timed(box, "repo_map", {})[0]
        box.call("run", {"command": "mkdir -p bench_made && for i in $(seq 100); do printf "
                                    "'def bench_made_%s():\\n    pass\\n' $i > bench_made/m$i.py; "
                                    "done"})
        out["after_create"], found = _timed(box, "find_symbol", {"name": "bench_made_42"})
        out["after_create_ok"] = found.startswith("bench_made/m42.py:1:")
        out["after_create_again"] = _timed(box, "find_symbol", {"name": "bench_made_7"})[0]
    finally:
        edited.write_bytes(original)
        shutil.rmtree(root / "bench_made", ignore_errors=True)
    out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


def large_case(root: Path) -> None:
    files = sum(1 for p in root.rglob("*") if p.is_file())
    print(f"\nlarge tree: {files:,} files (this Python's library folder and site-packages)")
    warm_cache(root)
    ours = run_child("large", str(root), "")
    tags = run_ctags(root, "all")
    ms = 1000
    print(f"{'case':<52} {'ours':>10}  {'baseline':<12} {'':>10}  {'ratio':>7}")
    line("cold find_symbol('urlsplit'), fresh process", ours["cold_find"], tags, "ctags -R",
         repr(ours["cold_find_head"][:40]))
    line("whole index: first repo_map (every file parsed)", ours["build"], tags, "ctags -R",
         ours["map_head"][:70])
    warm = ours["warm_find"]
    print(f"{'warm find_symbol, 20 names: median / max':<52} {statistics.median(warm) * ms:8.1f} ms"
          f"  / {max(warm) * ms:.1f} ms (main: {warm[0] * ms:.1f} ms, "
          f"{ours['warm_find_rows'][0]} rows)")
    slow = sorted(zip(warm, LARGE_NAMES, ours["warm_find_rows"], strict=True), reverse=True)[:3]
    print("  slowest: " + ", ".join(f"{n} {t * ms:.0f} ms ({r} rows)" for t, n, r in slow))
    print(f"{'warm outline json/decoder.py: median':<52} "
          f"{statistics.median(ours['warm_outline']) * ms:8.1f} ms")
    print(f"{'warm repo_map, nothing changed: median':<52} "
          f"{statistics.median(ours['warm_map']) * ms:8.1f} ms")
    print(f"{'find_symbol after an edit + touch of ' + str(ours['touched']) + ' files':<52} "
          f"{ours['after_touch'] * ms:8.1f} ms  correct: {ours['after_touch_ok']}")
    print(f"{'repo_map after that edit':<52} {ours['map_after_edit'] * ms:8.1f} ms")
    print(f"{'find_symbol after a command created 100 files':<52} "
          f"{ours['after_create'] * ms:8.1f} ms  correct: {ours['after_create_ok']} "
          f"(then {ours['after_create_again'] * ms:.1f} ms)")
    print(f"{'RSS of the toolbox process, index built':<52} {ours['rss_built'] / 2**20:8.1f} MB"
          f"  (peak {ours['peak_built'] / 2**20:.1f} MB; at start {ours['rss_start'] / 2**20:.1f}"
          f" MB; peak at the end {ours['peak'] / 2**20:.1f} MB)")


def memory(target: str) -> dict[str, Any]:
    """Python memory the index holds once every file is parsed, and what repo_map's
    ranking adds (tracemalloc: objects still alive after the call)."""
    import gc
    import tracemalloc

    from yggdrasil.loki.tools import filesystem_toolbox

    box = filesystem_toolbox(target, read_only=True)
    tracemalloc.start()
    box.call("find_symbol", {"name": "*"})  # parses every file: the whole index
    gc.collect()
    index = tracemalloc.get_traced_memory()[0]
    box.call("repo_map", {})
    gc.collect()
    ranked = tracemalloc.get_traced_memory()[0]
    return {"index": index, "ranker": ranked - index}


def _changed_file(root: Path) -> str:
    """A file the index has parsed, to change between the first and the warm call."""
    if (root / "json" / "decoder.py").exists():
        return "json/decoder.py"
    return next(str(p.relative_to(root)) for p in sorted(root.rglob("*"))
                if p.suffix in (".py", ".ts", ".tsx", ".js") and not p.is_symlink())


def accuracy(root: Path) -> dict[str, Any]:
    """Definitions outline finds vs those ast finds, by (name, line), in every .py file."""
    from yggdrasil.loki.code import Code
    from yggdrasil.loki.files import Root

    code = Code(Root.at(root))
    agree = total = files = 0
    misses: list[str] = []
    for path in sorted(root.rglob("*.py")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue  # not Python 3.11 (test data with deliberate errors)
        rel = str(path.relative_to(root))
        want = {(n.name, n.lineno) for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
        outline = code.index.entry(rel).outline
        got = {(s.name, s.line) for s in (outline.symbols if outline else ())
               if s.kind in ("function", "method", "class")}
        files += 1
        total += len(want | got)
        agree += len(want & got)
        misses += [f"{rel}: {name} L{line}" for name, line in sorted(want ^ got)][:3]
    return {"files": files, "agree": agree, "total": total, "examples": misses[:6]}


# -- the parent ---------------------------------------------------------------------------------


def run_child(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                          text=True, check=True, env=env)
    result = json.loads(done.stdout.strip().split("\n")[-1])
    result["wall"] = time.perf_counter() - t0
    return result


def run_ctags(root: Path, languages: str) -> float | None:
    if shutil.which("ctags") is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        subprocess.run(["ctags", "-R", f"--languages={languages}", "-f", f"{tmp}/tags",
                        str(root)], check=True, capture_output=True)
        return time.perf_counter() - t0


def warm_cache(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.read_bytes()


def median(results: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in results)


def line(label: str, ours: float, base: float | None, base_label: str, note: str = "") -> None:
    ratio = f"{ours / base:6.2f}x" if base else "   n/a"
    base_text = f"{base:8.3f} s" if base is not None else "  (none)"
    print(f"{label:<44} {ours:8.3f} s  {base_label:<12} {base_text}  {ratio}  {note}")


def tree_cases(label: str, root: Path, name: str, languages: str, reps: int) -> None:
    warm_cache(root)
    finds, maps, ctags = [], [], []
    for _ in range(reps):  # in turn, so load from other work hits both
        finds.append(run_child("find", str(root), name))
        maps.append(run_child("map", str(root), ""))
        tags = run_ctags(root, languages)
        if tags is not None:
            ctags.append(tags)
    base = statistics.median(ctags) if ctags else None
    stats = maps[-1]
    print(f"\n{label}: {stats['files']:,} files, {stats['parsed']:,} parsed, "
          f"{stats['symbols']:,} definitions")
    line(f"first find_symbol({name!r})", median(finds, "seconds"), base, "ctags -R",
         f"child wall {median(finds, 'wall'):.2f} s; {finds[-1]['head'][:50]!r}")
    line("warm find_symbol after one file changed", median(finds, "warm"), base, "ctags -R",
         "ctags has no incremental mode: it reruns")
    line("first repo_map (every file parsed)", median(maps, "seconds"), base, "ctags -R",
         f"child wall {median(maps, 'wall'):.2f} s")
    line("warm repo_map after one file changed", median(maps, "warm"), base, "ctags -R")
    used = run_child("memory", str(root), "")
    print(f"{'memory: the index, every file parsed':<44} {used['index'] / 2**20:8.1f} MB  "
          f"(Python objects alive; the index's own estimate {stats['held'] / 2**20:.1f} MB)")
    print(f"{'memory: + repo_map ranking state':<44} {used['ranker'] / 2**20:8.1f} MB")
    print(f"{'memory: peak RSS growth of a first repo_map':<44} "
          f"{median(maps, 'index_bytes') / 2**20:8.1f} MB  (the process, parse buffers and "
          "freed objects included)")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "LOKI_CODE_CACHE": "1", "XDG_CACHE_HOME": cache}
        run_child("map", str(root), "", env=env)  # builds and saves the index
        finds = [run_child("find", str(root), name, env=env) for _ in range(reps)]
        maps = [run_child("map", str(root), "", env=env) for _ in range(reps)]
        stored = sum(p.stat().st_size for p in Path(cache).rglob("*.json"))
    note = f"new process, index loaded from a {stored / 2**20:.1f} MB cache file"
    line("first find_symbol, index cached on disk", median(finds, "seconds"), base, "ctags -R",
         note)
    line("first repo_map, index cached on disk", median(maps, "seconds"), base, "ctags -R", note)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--npm", action="store_true", help="also real packages from npm")
    parser.add_argument("--large", action="store_true",
                        help="only the monorepo-scale tree (~58,000 files), one process")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        print(json.dumps(child(*opts.child)))
        return
    if shutil.which("ctags") is None:
        print("ctags not found: the ctags baseline is skipped "
              "(Debian: apt-get install universal-ctags)")
    if opts.large:
        large_case(_code_corpus.large_tree())
        return
    print(f"{'case':<44} {'ours':>10}  {'baseline':<12} {'':>10}  {'ratio':>7}")
    tree_cases("CPython stdlib copy", _code_corpus.stdlib(), "HTTPConnection", "Python",
               opts.reps)
    tree_cases("generated TS/TSX/JS project", _code_corpus.ts_tree(), "FilterButtonService0_0",
               "TypeScript,JavaScript", opts.reps)
    if opts.npm:
        npm = _code_corpus.npm_tree()
        if npm is None:
            print("\nnpm not found: the npm tree is skipped")
        else:
            tree_cases("npm packages (rxjs, typescript, @angular/core, lodash-es)", npm,
                       "Observable", "TypeScript,JavaScript", opts.reps)
    outline_case(opts.reps)
    acc = accuracy(_code_corpus.stdlib())
    print(f"\naccuracy vs ast on {acc['files']:,} stdlib .py files: {acc['agree']:,} of "
          f"{acc['total']:,} (name, line) pairs agree = {100 * acc['agree'] / acc['total']:.3f}%")
    for example in acc["examples"]:
        print(f"  differs: {example}")


def outline_case(reps: int) -> None:
    path = _code_corpus.long_python()
    ours = [run_child("outline", str(path.parent), path.name) for _ in range(reps)]
    base = [run_child("ast", str(path), "") for _ in range(reps)]
    print(f"\n10,000-line Python file ({path.stat().st_size / 2**10:.0f} KB, "
          f"{base[-1]['found']} classes and functions)")
    line("outline (read, parse, render)", median(ours, "seconds"), median(base, "seconds"),
         "ast.parse+walk")
    line("outline again after the file changed", median(ours, "warm"), median(base, "seconds"),
         "ast.parse+walk")


if __name__ == "__main__":
    main()
