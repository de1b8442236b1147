"""Slipped edits on real code: how many land exactly right, how many are refused, and how
many land wrong (must be 0), per kind of slip, with the exact matcher side by side.

    PYTHONPATH=src python bench/bench_edits.py [--cases 200] [--seed 1]

Corpus: blocks of 3-8 lines cut at random (seeded) from the Python standard library's own
.py files. Each case asks for one real change (a comment appended to one line of the
block) with ``old``/``new`` written with one kind of slip, as a model would copy them
wrongly; the slip is in ``new`` too. A case *lands right* when the file afterwards is
exactly the intended file; *refused* when edit_file answers ERROR and the file is
untouched; *wrong* otherwise. The controls carry a content difference (an identifier or a
number the file does not have there) on top of a slip: they must all be refused.

The exact matcher is edit_file before the forgiving rungs: ``old`` must occur exactly
once (an all-CRLF file was already matched in LF form).
"""

from __future__ import annotations

import argparse
import random
import re
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

from yggdrasil.loki.tools import filesystem_toolbox

Slip = Callable[[str], str]


def _lines_map(fn: Callable[[str], str]) -> Slip:
    return lambda text: "\n".join(fn(line) for line in text.split("\n"))


def _reindent(fn: Callable[[int], str]) -> Slip:
    def one(line: str) -> str:
        body = line.lstrip(" ")
        return fn(len(line) - len(body)) + body if body else line
    return _lines_map(one)


def _curly(text: str) -> str:
    out, single, double = [], False, False
    for ch in text:
        if ch == "'":
            out.append("\u2019" if single else "\u2018")
            single = not single
        elif ch == '"':
            out.append("\u201d" if double else "\u201c")
            double = not double
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True)
class Kind:
    name: str
    slip: Slip
    fits: Callable[[list[str]], bool] = lambda block: True
    tabbed_file: bool = False  # the file's indentation is turned into tabs first
    control: bool = False  # a content difference too: must be refused
    # "numbers": read_file's '<n>\t' in front of old's lines (and new's, every other case);
    # "numbers off": the same, one line off; "twice": the file holds the block again below
    shape: str = ""


def _indents(block: list[str]) -> list[int]:
    return [len(line) - len(line.lstrip(" ")) for line in block if line.strip()]


def _min_indent(block: list[str]) -> int:
    return min(_indents(block), default=0)


def _fours(block: list[str]) -> bool:
    return any(_indents(block)) and all(n % 4 == 0 for n in _indents(block))


def _inner_blank(block: list[str]) -> bool:
    filled = [i for i, s in enumerate(block) if s.strip()]
    return len(filled) >= 2 and any(not s.strip() for s in block[filled[0] : filled[-1]])


def _unblank(text: str) -> str:
    """Without the blank lines between the first and the last non-blank line."""
    lines = text.split("\n")
    filled = [i for i, s in enumerate(lines) if s.strip()]
    inner = [s for s in lines[filled[0] : filled[-1] + 1] if s.strip()]
    return "\n".join(lines[: filled[0]] + inner + lines[filled[-1] + 1 :])


def _numbered(text: str, first: int) -> str:
    return "\n".join(f"{first + i}\t{s}" for i, s in enumerate(text.split("\n")))


def _rename(text: str) -> str:
    return re.sub(r"\b([A-Za-z_]\w{2,})\b", r"\1_zq", text, count=1)


def _renumber(text: str) -> str:
    return re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), text, count=1)


KINDS = [
    Kind("no slip: old copied exactly", lambda t: t),
    Kind("line endings (CRLF in old)", lambda t: t.replace("\n", "\r\n")),
    Kind("trailing spaces in old", _lines_map(lambda s: s + "  " if s.strip() else s)),
    Kind("dedented", lambda t: t, lambda b: _min_indent(b) > 0),  # slip set per case below
    Kind("over-indented by 4", _reindent(lambda n: " " * (n + 4))),
    Kind("2-space indents for 4", _reindent(lambda n: " " * (n // 2)), _fours),
    Kind("tabs where the file has spaces", _reindent(lambda n: "\t" * (n // 4)), _fours),
    Kind("spaces where the file has tabs", lambda t: t, _fours, tabbed_file=True),
    Kind("curly quotes", _curly, lambda b: any("'" in s or '"' in s for s in b)),
    Kind("en dashes for hyphens", lambda t: t.replace("-", "\u2013"), lambda b: any("-" in s for s in b)),
    Kind("non-breaking spaces", lambda t: t.replace(", ", ",\u00a0"), lambda b: any(", " in s for s in b)),
    Kind("line numbers from read_file", lambda t: t, shape="numbers"),
    Kind("a blank line inside left out", _unblank, _inner_blank),
    Kind("control: another identifier (+ indent slip)", _reindent(lambda n: " " * (n + 4)),
         control=True),
    Kind("control: line numbers one line off", lambda t: t, control=True, shape="numbers off"),
    Kind("control: blank line left out + another name", _unblank, _inner_blank, control=True),
    Kind("ambiguous: blank line left out, block twice", _unblank, _inner_blank, control=True,
         shape="twice"),
    Kind("control: another number (+ trailing spaces)",
         _lines_map(lambda s: s + "  " if s.strip() else s),
         lambda b: any(ch.isdigit() for s in b for ch in s), control=True),
]


def stdlib_files() -> list[Path]:
    base = Path(sysconfig.get_paths()["stdlib"])
    found = []
    for path in sorted(base.rglob("*.py")):
        if "site-packages" in path.parts or not 2_000 <= path.stat().st_size <= 200_000:
            continue
        try:
            text = path.read_text("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if "\t" not in text and "\r" not in text:
            found.append(path)
    return found


def tabbed(text: str) -> str:
    return "\n".join(
        "\t" * ((len(s) - len(s.lstrip(" "))) // 4) + " " * ((len(s) - len(s.lstrip(" "))) % 4)
        + s.lstrip(" ") for s in text.split("\n"))


def make_case(rng: random.Random, files: list[Path],
              kind: Kind) -> tuple[str, str, str, str, bool]:
    """(file text, old, new, the file as intended after the edit, whether the block is
    in the file more than once even as it is, without the slip)."""
    while True:
        lines = rng.choice(files).read_text("utf-8").split("\n")
        k = rng.randint(3, 8)
        start = rng.randrange(0, max(1, len(lines) - k))
        block = lines[start : start + k]
        code = [i for i, s in enumerate(block) if s.strip() and not s.strip().startswith("#")]
        if len(code) < 2 or not kind.fits(block) or any(len(s) > 200 for s in block):
            continue
        j = rng.choice(code)
        changed = list(block)
        changed[j] += "  # edited"
        want_lines = lines[:start] + changed + lines[start + k:]
        text, intended = "\n".join(lines), "\n".join(want_lines)
        old, new = "\n".join(block), "\n".join(changed)
        if kind.tabbed_file:
            text, intended = tabbed(text), tabbed(intended)
        twice = text.count(tabbed(old) if kind.tabbed_file else old) > 1
        slip = kind.slip
        if kind.name == "dedented":
            cut = _min_indent(block)
            slip = _lines_map(lambda s, cut=cut: s[cut:] if s.strip() else s.lstrip(" "))
        old, new = slip(old), slip(new)
        if kind.shape.startswith("numbers"):
            first = start + 1 + (kind.shape == "numbers off")
            if kind.shape == "numbers off" and _squash(lines[first - 1 : first - 1 + k]) == _squash(block):
                continue  # the lines one below read the same: no control
            old = _numbered(old, first)
            new = _numbered(new, first) if rng.random() < 0.5 else new
        elif kind.shape == "twice":
            text += "\n\n" + "\n".join(block) + "\n"
        elif kind.control:
            old = _rename(old) if "identifier" in kind.name or "name" in kind.name else _renumber(old)
            if _holds(text, old):
                continue  # the changed old is really in the file somewhere: no control
        return text, old, new, intended, twice


def _squash(lines: list[str]) -> list[str]:
    return [s.strip() for s in lines]


def _holds(text: str, old: str) -> bool:
    """Whether the file holds ``old`` modulo the forgiving rungs (whitespace at line ends,
    blank lines)."""
    squash = lambda s: "\n".join(line.strip() for line in s.split("\n"))  # noqa: E731
    dense = lambda s: "\n".join(line.strip() for line in s.split("\n") if line.strip())  # noqa: E731
    return squash(old) in squash(text) or dense(old) in dense(text)


@dataclass
class Tally:
    right: int = 0
    refused: int = 0
    wrong: int = 0

    def add(self, result: str, text: str, intended: str) -> None:
        if result == intended:
            self.right += 1
        elif result == text:
            self.refused += 1
        else:
            self.wrong += 1


def run(cases: int, seed: int, why: bool = False) -> None:
    files = stdlib_files()
    print(f"corpus: {len(files)} stdlib .py files, {cases} cases per kind, seed {seed}\n")
    header = (f"{'kind of slip':46} | {'ours: right':>11} | {'refused (*)':>11} | {'wrong':>5} | "
              f"{'exact: right':>12} | {'refused':>7} | {'wrong':>5}")
    print(header)
    print("-" * len(header))
    totals = {"slips": (Tally(), Tally()), "controls": (Tally(), Tally())}
    spent, inherent_all = 0.0, 0
    with TemporaryDirectory() as tmp:
        root = Path(tmp)
        box = filesystem_toolbox(root)
        for number, kind in enumerate(KINDS):
            rng = random.Random(f"{seed}-{kind.name}")
            ours, exact, inherent = Tally(), Tally(), 0
            for n in range(cases):
                text, old, new, intended, twice = make_case(rng, files, kind)
                inherent += twice and not kind.control
                path = root / f"kind{number}-case{n}.py"  # new: never seen by the toolbox
                path.write_text(text)
                started = time.perf_counter()
                out = box.call("edit_file", {"path": path.name, "old": old, "new": new})
                spent += time.perf_counter() - started
                if why and out.startswith("ERROR") and not kind.control:
                    print(f"  {kind.name}: {out.splitlines()[0][:150]}")
                ours.add(path.read_text(), text, intended)
                if why and path.read_text() not in (text, intended):
                    print(f"  WRONG {kind.name}: {out.splitlines()[0]}\n{old!r}\n{new!r}")
                before = text.count(old) == 1
                exact.add(text.replace(old, new, 1) if before else text, text, intended)
            group = totals["controls" if kind.control else "slips"]
            for total, one in zip(group, (ours, exact), strict=True):
                total.right, total.refused, total.wrong = (
                    total.right + one.right, total.refused + one.refused, total.wrong + one.wrong)
            print(_row(kind.name, cases, ours, exact, inherent))
            inherent_all += inherent
    print("-" * len(header))
    slips = cases * sum(not kind.control for kind in KINDS)
    print(_row("all slips", slips, *totals["slips"], inherent_all))
    controls = cases * sum(kind.control for kind in KINDS)
    print(_row("all controls (must be 0% right, 0 wrong)", controls, *totals["controls"], 0))
    n = cases * len(KINDS)
    print(f"\nrefused*: of the refusals, how many blocks are in the file twice or more even "
          f"without the slip\nedit_file time: {spent / n * 1000:.1f} ms per case (mean, {n} cases)")


def _row(name: str, cases: int, ours: Tally, exact: Tally, inherent: int) -> str:
    refused = f"{ours.refused} ({inherent})"
    return (f"{name:46} | {_pct(ours.right, cases):>11} | {refused:>11} | {ours.wrong:>5} | "
            f"{_pct(exact.right, cases):>12} | {exact.refused:>7} | {exact.wrong:>5}")


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:.0%} ({part})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200, help="cases per kind of slip")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--why", action="store_true", help="print why each slip was refused")
    args = parser.parse_args()
    run(args.cases, args.seed, args.why)


if __name__ == "__main__":
    main()
