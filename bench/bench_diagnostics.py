"""Diagnostics after edits, and outputs that lose nothing: what the model is told, and at what cost.

Part 1, 30 scripted edit tasks (15 Python, 15 TypeScript), each in a fresh project that
already has problems of its own (an undefined name, an unused import, a type error...),
and each edit seeding one mistake: an undefined name, a missing import, a wrong arity or a
type mismatch. For each task: was the seeded mistake reported by the edit (a new
diagnostic on its line), and was any problem the file already had reported as new (it
must not be); the edit's latency, ruff alone and with the language servers warm (the
first edit of each language, the servers' cold start, is shown apart).

Part 2, 20 long command outputs (build and test logs with a failure in the middle,
tracebacks, compiler errors, plain floods): tokens of the observation before (head and
tail of 16 KB, nothing kept, keep_whole off) and after (head and tail in tokens, the
lines of the middle that look like errors, the id of the whole), and whether the line
that matters is in the observation.

    PYTHONPATH=src python bench/bench_diagnostics.py            # ~3 min on 2 shared cores
    PYTHONPATH=src python bench/bench_diagnostics.py --no-lsp   # ruff only
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from yggdrasil.loki.diagnostics import default_servers
from yggdrasil.loki.outputs import tokens
from yggdrasil.loki.settings import DiagnosticsSettings, OutputsSettings, Settings
from yggdrasil.loki.tools import filesystem_toolbox


@dataclass(frozen=True)
class Task:
    language: str  # "py" or "ts"
    kind: str  # undefined name, missing import, wrong arity, type mismatch
    old: str  # the text replaced (once) in the project's main file
    new: str
    line: int  # the line of the seeded mistake after the edit


PY_PROJECT = '''import os
import sys


def area(width: int, height: int) -> int:
    return width * height


def greet(name: str) -> str:
    return "hello " + name


def total(items: list[int]) -> int:
    return sum(items)


print(legacy_value)  # a problem the file already has
count: int = "three"  # and another


def main() -> None:
    size = area(2, 3)
    print(greet("ann"), size)
    print(total([1, 2, 3]))
'''

TS_PROJECT = '''export function area(width: number, height: number): number {
  return width * height;
}

export function greet(name: string): string {
  return "hello " + name;
}

export function total(items: number[]): number {
  return items.reduce((a, b) => a + b, 0);
}

const legacy: number = "old";  // a problem the file already has
console.log(legacyValue);  // and another

export function main(): void {
  const size = area(2, 3);
  console.log(greet("ann"), size);
  console.log(total([1, 2, 3]));
}
'''

TS_HELPER = "export function slugify(text: string): string {\n  return text.toLowerCase();\n}\n"


def _tasks() -> list[Task]:
    anchor_py = "    print(total([1, 2, 3]))\n"
    anchor_ts = "  console.log(total([1, 2, 3]));\n"
    py = [  # (kind, new line added after the anchor); the mistake lands on line 25
        ("undefined name", "    print(sizes)\n"), ("undefined name", "    retrun_value = size + missing\n"),
        ("undefined name", "    print(greeting(size))\n"), ("undefined name", "    helper()\n"),
        ("missing import", "    print(json.dumps(size))\n"),
        ("missing import", "    print(Path('.').name)\n"),
        ("missing import", "    print(re.sub('a', 'b', 'abc'))\n"),
        ("missing import", "    print(defaultdict(int))\n"),
        ("wrong arity", "    print(area(2))\n"), ("wrong arity", "    print(greet('a', 'b'))\n"),
        ("wrong arity", "    print(total())\n"), ("wrong arity", "    print(area(1, 2, 3))\n"),
        ("type mismatch", "    print(greet(42))\n"), ("type mismatch", "    print(area('2', 3))\n"),
        ("type mismatch", "    print(total('abc'))\n"),
    ]
    ts = [
        ("undefined name", "  console.log(sizes);\n"), ("undefined name", "  helper();\n"),
        ("undefined name", "  console.log(greeting(size));\n"),
        ("undefined name", "  const x = size + missing;\n"),
        ("missing import", "  console.log(slugify('A'));\n"),
        ("missing import", "  console.log(readFileSync('a'));\n"),
        ("missing import", "  console.log(join('a', 'b'));\n"),
        ("wrong arity", "  console.log(area(2));\n"), ("wrong arity", "  console.log(greet('a', 'b'));\n"),
        ("wrong arity", "  console.log(total());\n"), ("wrong arity", "  console.log(area(1, 2, 3));\n"),
        ("type mismatch", "  console.log(greet(42));\n"),
        ("type mismatch", "  console.log(area('2', 3));\n"),
        ("type mismatch", "  const n: number = greet('a');\n"),
        ("type mismatch", "  console.log(total('abc'));\n"),
    ]
    return ([Task("py", k, anchor_py, anchor_py + new, 25) for k, new in py]
            + [Task("ts", k, anchor_ts, anchor_ts + new, 20) for k, new in ts])


def _project(folder: Path, language: str) -> None:
    if language == "py":
        return
    (folder / "helpers.ts").write_text(TS_HELPER)
    (folder / "tsconfig.json").write_text('{"compilerOptions": {"strict": true, '
                                          '"target": "es2020", "module": "commonjs", '
                                          '"types": []}}\n')


def edits(use_lsp: bool) -> None:
    servers = default_servers(Path(tempfile.gettempdir())) if use_lsp else {}
    print(f"language servers: {', '.join(sorted(servers)) or 'none'}; tokens: {tokens.counter}")
    settings = Settings(diagnostics=DiagnosticsSettings(default_servers=use_lsp, wait=60.0))
    rows: list[tuple[Task, bool, int, float, bool]] = []
    with tempfile.TemporaryDirectory(prefix="bench-diag-") as top:
        boxes = {}
        for language in ("py", "ts"):
            folder = Path(top) / language
            folder.mkdir()
            _project(folder, language)
            boxes[language] = (folder, filesystem_toolbox(folder, settings=settings))
        cold: dict[str, float] = {}
        for task in _tasks():
            _, box = boxes[task.language]
            name, text = ("app.py", PY_PROJECT) if task.language == "py" else ("app.ts",
                                                                              TS_PROJECT)
            box.invoke("write_file", {"path": name, "content": text})  # each task's start
            began = time.perf_counter()
            done = box.invoke("edit_file", {"path": name, "old": task.old, "new": task.new})
            seconds = time.perf_counter() - began
            first = task.language not in cold
            cold.setdefault(task.language, seconds)
            new = list(done.data.diagnostics) if done.data is not None else []
            hit = any(d.line == task.line for d in new)
            wrong = sum(1 for d in new if d.line != task.line)
            rows.append((task, hit, wrong, seconds, first))
        for _, box in boxes.values():
            box.close()
    print(f"\n{'language':9} {'kind':15} {'reported':>9} {'old as new':>11}")
    for language in ("py", "ts"):
        for kind in ("undefined name", "missing import", "wrong arity", "type mismatch"):
            mine = [r for r in rows if r[0].language == language and r[0].kind == kind]
            print(f"{language:9} {kind:15} {sum(r[1] for r in mine):>4}/{len(mine):<4} "
                  f"{sum(r[2] for r in mine):>11}")
    hits, wrong = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"all: introduced mistakes reported {hits}/{len(rows)} ({100 * hits / len(rows):.0f}%), "
          f"pre-existing problems reported as new: {wrong}")
    for language in ("py", "ts"):
        warm = sorted(r[3] for r in rows if r[0].language == language and not r[4])
        print(f"latency {language} ({'ruff + ' if language == 'py' else ''}"
              f"{'language server' if use_lsp else 'no server'}), warm: p50 "
              f"{_ms(statistics.median(warm))}, p95 {_ms(_p95(warm))}; first edit (cold start) "
              f"{_ms(cold[language])}")


def ruff_latency(n: int = 60) -> None:
    """ruff alone per edit of a 300-line file (the 100 ms p95 budget)."""
    source = PY_PROJECT + "".join(f"\ndef f{i}(x: int) -> int:\n    return x + {i}\n"
                                  for i in range(100))
    settings = Settings(diagnostics=DiagnosticsSettings(default_servers=False))
    times = []
    with tempfile.TemporaryDirectory(prefix="bench-ruff-") as top:
        (Path(top) / "big.py").write_text(source)
        with filesystem_toolbox(top, settings=settings) as box, \
                filesystem_toolbox(top, settings=Settings(diagnostics=DiagnosticsSettings(
                    enabled=False))) as plain:
            base = []
            for i in range(n):
                for which, into in ((box, times), (plain, base)):
                    began = time.perf_counter()
                    which.invoke("edit_file", {"path": "big.py", "old": f"return x + {i}\n",
                                               "new": f"return x + {i} + 0\n"})
                    into.append(time.perf_counter() - began)
    extra = [a - b for a, b in zip(times, base, strict=True)]
    print(f"\nruff per edit (300 lines), {n} edits: edit_file with diagnostics p50 "
          f"{_ms(statistics.median(times))} p95 {_ms(_p95(times))}; without p50 "
          f"{_ms(statistics.median(base))}; added by ruff p50 {_ms(statistics.median(extra))} "
          f"p95 {_ms(_p95(sorted(extra)))}")


OUTPUTS = {  # name -> a python program printing a long output with one line that matters
    "pytest, a failure in the middle": (
        "for i in range(3000): print(f'tests/test_{i}.py::test_ok PASSED')\n"
        "print('tests/test_x.py::test_total FAILED')\n"
        "for i in range(3000): print(f'tests/test_b{i}.py::test_ok PASSED')", "FAILED"),
    "traceback in a server log": (
        "for i in range(5000): print(f'INFO request {i} served in 3 ms')\n"
        "print('Traceback (most recent call last):')\nprint('  File \"app.py\", line 9')\n"
        "print('KeyError: user_id')\n"
        "for i in range(5000): print(f'INFO request {i} served in 3 ms')", "KeyError: user_id"),
    "gcc error early": (
        "print('src/main.c:12:5: error: unknown type name uint')\n"
        "for i in range(8000): print(f'CC build/obj{i}.o')", "unknown type name"),
    "rustc error in the middle": (
        "for i in range(4000): print(f'   Compiling crate{i} v0.1.0')\n"
        "print('error[E0308]: mismatched types')\n"
        "for i in range(4000): print(f'   Compiling more{i} v0.1.0')", "E0308"),
    "tsc errors spread": (
        "for i in range(6000):\n"
        "    print(f'src/f{i}.ts(3,5): error TS2322: bad' if i % 1500 == 7 else f'ok {i}')",
        "TS2322"),
    "npm ERR in the middle": (
        "for i in range(4000): print(f'npm http fetch GET 200 pkg{i}')\n"
        "print('npm ERR! code ERESOLVE')\n"
        "for i in range(4000): print(f'npm http fetch GET 200 more{i}')", "ERESOLVE"),
    "java exception": (
        "for i in range(5000): print(f'[main] DEBUG step {i}')\n"
        "print('Exception in thread main java.lang.NullPointerException')\n"
        "for i in range(3000): print(f'[main] DEBUG after {i}')", "NullPointerException"),
    "go panic": (
        "for i in range(5000): print(f'ok  pkg/{i} 0.01s')\n"
        "print('panic: runtime error: index out of range')\n"
        "for i in range(5000): print(f'ok  more/{i} 0.01s')", "index out of range"),
    "make failure at the end": (
        "for i in range(9000): print(f'gcc -c file{i}.c')\n"
        "print('make: *** [Makefile:3: all] Error 2')", "Error 2"),
    "fatal in the middle": (
        "for i in range(4000): print(f'fetching {i}')\nprint('fatal: not a git repository')\n"
        "for i in range(4000): print(f'fetching more {i}')", "not a git repository"),
    "segfault": (
        "for i in range(6000): print(f'iteration {i} value {i * i}')\n"
        "print('Segmentation fault (core dumped)')\n"
        "for i in range(6000): print(f'cleanup {i}')", "Segmentation fault"),
    "assertion in unittest": (
        "for i in range(4000): print(f'test_{i} (tests.Case) ... ok')\n"
        "print('AssertionError: 3 != 4')\n"
        "for i in range(4000): print(f'test_b{i} (tests.Case) ... ok')", "3 != 4"),
    "json flood, no error": ("import json\nfor i in range(8000): print(json.dumps({'id': i, "
                             "'name': 'row' + str(i), 'tags': ['a', 'b']}))", "row7999"),
    "csv flood, no error": ("for i in range(20000): print(f'{i},{i * 3},{i % 7},name{i}')",
                            "19999,"),
    "long lines": ("for i in range(400): print('x' * 1000 + str(i))", "399"),
    "binary-ish noise": ("import random\nrandom.seed(1)\nfor i in range(3000): "
                         "print(''.join(chr(random.randint(33, 126)) for _ in range(60)))",
                         None),
    "two failures far apart": (
        "print('ERROR first thing broke')\nfor i in range(8000): print(f'line {i}')\n"
        "print('ERROR second thing broke')\nfor i in range(8000): print(f'line {i}')",
        "second thing broke"),
    "many errors": ("for i in range(6000): print(f'error: problem {i}' if i % 10 == 0 "
                    "else f'fine {i}')", "problem 3000"),
    "pip install log": (
        "for i in range(5000): print(f'Collecting package{i}')\n"
        "print('ERROR: Could not find a version that satisfies the requirement foo')\n"
        "for i in range(100): print('  Downloading something')", "satisfies the requirement"),
    "docker build": (
        "for i in range(5000): print(f'#{i} [stage {i}] RUN step')\n"
        "print('#5001 ERROR: process did not complete successfully: exit code 1')\n"
        "for i in range(3000): print(f'#{i} CACHED')", "did not complete successfully"),
}


def outputs() -> None:
    before_settings = Settings(outputs=OutputsSettings(keep_whole=False, stream_tokens=1_000_000),
                               diagnostics=DiagnosticsSettings(enabled=False))
    after_settings = Settings(diagnostics=DiagnosticsSettings(enabled=False))
    print(f"\n{'output':32} {'tokens before':>14} {'after':>7} {'ratio':>6}  line that matters "
          "(before / after)")
    sums = [0, 0]
    found = [0, 0]
    wanted = 0
    with tempfile.TemporaryDirectory(prefix="bench-out-") as top, \
            filesystem_toolbox(top, settings=before_settings) as before, \
            filesystem_toolbox(top, settings=after_settings) as after:
        for name, (code, needle) in OUTPUTS.items():
            old = before.invoke("run_python", {"code": code}).text
            new = after.invoke("run_python", {"code": code}).text
            a, b = tokens.count(old), tokens.count(new)
            sums[0] += a
            sums[1] += b
            seen = ("-", "-")
            if needle is not None:
                wanted += 1
                seen = ("yes" if needle in old else "no", "yes" if needle in new else "no")
                found[0] += needle in old
                found[1] += needle in new
            print(f"{name:32} {a:>14,} {b:>7,} {b / a:>6.2f}  {seen[0]} / {seen[1]}")
    print(f"{'mean':32} {sums[0] // len(OUTPUTS):>14,} {sums[1] // len(OUTPUTS):>7,} "
          f"{sums[1] / sums[0]:>6.2f}  {found[0]}/{wanted} / {found[1]}/{wanted}")


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-lsp", action="store_true", help="ruff only")
    parser.add_argument("--part", choices=("edits", "ruff", "outputs", "all"), default="all")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    if args.part in ("edits", "all"):
        edits(not args.no_lsp)
    if args.part in ("ruff", "all"):
        ruff_latency()
    if args.part in ("outputs", "all"):
        outputs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
