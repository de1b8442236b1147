"""Corpora of bench_code.py under bench/.corpus/ (gitignored), built once, reused.

``stdlib()``: a copy of this Python's standard library (no site-packages, no caches).
``ts_tree()``: a seeded TypeScript/TSX/JavaScript project: classes with methods,
interfaces, exported functions and arrow constants, callbacks, imports between modules.
``long_python()``: one 10,000-line Python file of classes and methods.
``large_tree()``: this Python's library folder with its site-packages (no caches, no
mkdocs-material icons): ~58,000 files, the monorepo-scale tree of ``--large``.
``npm_tree()``: real packages installed from the npm registry (only with --npm).
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sysconfig
from pathlib import Path

from _corpus import CORPUS, _ready, _stamp

VERSION = 1
_WORDS = ["account", "order", "cart", "price", "user", "session", "token", "cache", "queue", "event", "stream", "buffer", "record", "index", "table", "column", "filter", "render", "layout", "widget", "button", "panel", "route", "request", "response", "client", "server", "socket", "channel", "message", "parser", "lexer", "symbol", "scope", "module", "bundle", "asset", "image", "color", "theme", "store", "action", "reducer", "effect"]


def stdlib() -> Path:
    """A copy of the interpreter's library folder without site-packages."""
    return _library_copy("stdlib", "site-packages", "__pycache__", "*.pyc")


def _library_copy(name: str, *ignored: str) -> Path:
    """``CORPUS/name``: a copy of the interpreter's library folder less ``ignored``
    (real copies, not links), made once and reused while the recipe holds."""
    root = CORPUS / name
    source = Path(sysconfig.get_paths()["stdlib"])
    recipe = {"version": VERSION, "source": str(source)}
    if _ready(root, recipe):
        return root
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(source, root, symlinks=True, ignore=shutil.ignore_patterns(*ignored))
    _stamp(root, recipe)
    return root


def _name(rng: random.Random, parts: int, title: bool) -> str:
    words = [rng.choice(_WORDS) for _ in range(parts)]
    if title:
        return "".join(w.title() for w in words)
    return words[0] + "".join(w.title() for w in words[1:])


def _ts_file(rng: random.Random, i: int, exported: list[list[str]], jsx: bool) -> str:
    lines: list[str] = []
    for j in rng.sample(range(max(1, i)), min(i, 3)):
        names = exported[j]
        lines.append(f"import {{ {', '.join(names[:2])} }} from '../m{j // 50}/file{j}';")
    mine: list[str] = []
    for k in range(rng.randint(1, 3)):
        name = f"{_name(rng, 2, True)}Props{i}_{k}"
        mine.append(name)
        lines.append(f"export interface {name} {{")
        lines += [f"  {_name(rng, 2, False)}: {rng.choice(['string', 'number', 'boolean'])};"
                  for _ in range(rng.randint(3, 6))]
        lines += ["  update(value: number): void;", "}", ""]
    for k in range(rng.randint(1, 2)):
        name = f"{_name(rng, 2, True)}Service{i}_{k}"
        mine.append(name)
        lines.append(f"export class {name} {{")
        lines.append("  private items: number[] = [];")
        for _ in range(rng.randint(5, 12)):
            method = _name(rng, 2, False)
            lines.append(f"  {method}(input: number, label = '{rng.choice(_WORDS)}'): number {{")
            lines.append("    const total = this.items")
            lines.append(f"      .filter((x) => x > {rng.randint(0, 9)})")
            lines.append("      .map((x) => x * input)")
            lines.append("      .reduce((a, b) => a + b, 0);")
            for _ in range(rng.randint(2, 8)):
                other = rng.choice(exported[rng.randrange(max(1, i))] if i else ["Math.max"])
                lines.append(f"    if (total > {rng.randint(0, 99)}) {{ console.log(label, '{other}'); }}")
            lines += ["    return total;", "  }", ""]
        lines += ["}", ""]
    for _ in range(rng.randint(3, 8)):
        fn = f"{_name(rng, 3, False)}{i}"
        mine.append(fn)
        if rng.random() < 0.5:
            lines.append(f"export function {fn}(a: number, b: number): number {{")
        else:
            lines.append(f"export const {fn} = async (a: number, b: number): Promise<number> => {{")
        lines += ["  const values = [a, b].map((v) => v + 1);",
                  "  return values.reduce((x, y) => x + y, 0);", "};" if "const" in lines[-1] else "}", ""]
    if jsx:
        comp = f"{_name(rng, 2, True)}View{i}"
        mine.append(comp)
        lines += [f"export function {comp}({{ title }}: {{ title: string }}) {{",
                  "  return <div className=\"view\"><h1>{title}</h1></div>;", "}", ""]
    exported.append(mine)
    return "\n".join(lines) + "\n"


def ts_tree(files: int = 3_000, seed: int = 11) -> Path:
    """~3,000 modules, ~20 MB: .ts, .tsx and (one in five) .js files."""
    root = CORPUS / "tstree"
    recipe = {"version": VERSION, "files": files, "seed": seed}
    if _ready(root, recipe):
        return root
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(seed)
    exported: list[list[str]] = []
    for i in range(files):
        folder = root / f"m{i // 50}"
        folder.mkdir(parents=True, exist_ok=True)
        kind = rng.random()
        jsx = 0.6 <= kind < 0.8
        ext = "tsx" if jsx else ("js" if kind >= 0.8 else "ts")
        text = _ts_file(rng, i, exported, jsx)
        if ext == "js":  # strip the type annotations a .js file cannot have
            text = text.replace(": number[]", "").replace(": Promise<number>", "")
            text = text.replace("(a: number, b: number)", "(a, b)").replace("): number {", ") {")
            text = text.replace("(input: number,", "(input,")
            text = "\n".join(line for line in text.split("\n")
                             if not line.startswith(("export interface", "  update(")))
        (folder / f"file{i}.{ext}").write_text(text)
    _stamp(root, recipe)
    return root


def long_python(lines: int = 10_000, seed: int = 5) -> Path:
    path = CORPUS / "long_module.py"
    recipe = {"version": VERSION, "lines": lines, "seed": seed}
    if _ready(path, recipe):
        return path
    CORPUS.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    out = ['"""A long module."""', "import os", ""]
    while len(out) < lines - 20:
        out += [f"class {_name(rng, 2, True)}{len(out)}:", '    """A class."""', ""]
        for _ in range(rng.randint(4, 12)):
            out += [f"    def {_name(rng, 2, False)}_{len(out)}(self, value, *, strict=False):",
                    "        result = [v * 2 for v in range(value) if v % 3]",
                    "        if strict and not result:",
                    "            raise ValueError(value)",
                    "        return sum(result)", ""]
        out += [f"def {_name(rng, 3, False)}_{len(out)}(path: str) -> bool:",
                "    return os.path.exists(path)", "", ""]
    path.write_text("\n".join(out[:lines]) + "\n")
    _stamp(path, recipe)
    return path


def large_tree() -> Path:
    """A copy of the interpreter's library folder and site-packages (real copies, not
    links: an edit must not reach the interpreter, and a hard link is re-read often)."""
    return _library_copy("large", "__pycache__", "*.pyc", "material")


NPM_PACKAGES = ["rxjs@7.8.1", "typescript@5.4.5", "@angular/core@17.3.0", "lodash-es@4.17.21"]


def npm_tree() -> Path | None:
    """Real JavaScript/TypeScript packages from the npm registry; None without npm."""
    root = CORPUS / "npm"
    recipe = {"version": VERSION, "packages": NPM_PACKAGES}
    if _ready(root, recipe):
        return root
    if shutil.which("npm") is None:
        return None
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts",
                    "--prefix", str(root), *NPM_PACKAGES], check=True, capture_output=True)
    _stamp(root, recipe)
    return root
