"""apply_patch of a 50-file patch vs ``git apply`` of the same patch, side by side.

    PYTHONPATH=src python bench/bench_patch.py [--reps 9] [--files 50] [--variants core,ruff,default]

Corpus: a git repository of the 50 largest-but-reasonable (20-200 KB) .py files of the
standard library, copied; each gets 3 seeded changes (a line changed, one added, one
removed) and ``git diff`` writes the patch. Each round puts the 50 files back, then times
one of: ``filesystem_toolbox(root, settings=...).call("apply_patch", ...)`` (a fresh
toolbox: it keeps the originals for undo, stages all 50 files and renames them, and
answers with the summary and diff), or ``git apply`` run as a process (start-up
included: that is what an agent pays when it shells out). Both write the same bytes,
checked every round. Three toolboxes are timed, each beside a ``git apply``:

- ``core``: diagnostics off (``DiagnosticsSettings(enabled=False)``): the patch itself,
  atomic, with the syntax gate and the stale-view guard. The goal (<= 3x) is this one's.
  It is the toolbox's first call, which also starts the run's first checkpoint (a walk
  of the root in a thread, and the store's pruning in another).
- ``core-later``: the same, as a later call of a run: the toolbox made one call before
  (a ``read_file``) and its first checkpoint is taken, outside the timer.
- ``ruff``: diagnostics on, no language server: ruff checks the 50 files before and after.
- ``default``: the default settings: ruff, plus the language servers found on PATH
  (basedpyright here), started by the first edit of a fresh toolbox; an edit waits for
  them ``diagnostics.wait`` seconds (1.5) at most, and a cold server never answers a
  50-file check sooner, so this one pays the whole wait (its findings come later).

The rounds are interleaved (ours, git's, ours, ...) and each figure is the median. The
breakdown times the phases of apply_patch inside the same calls (wrapped methods): parse
the patch; plan it (read the files, find every hunk); the syntax gate (each changed
definition compiled alone; the whole file only when that fails); stage (each new text
written to a temp file beside its target); wait for the flush (one syncfs, started in a
thread when the staging is done, runs while the gate does); keep the originals for undo
(a copy each); rename every file over its target and fsync the folders; the diagnostics
(the texts kept before, then the report: the texts read after, ruff, the changed lines,
the wait for the servers); and the rest: the stale-view and writability checks (a stat
each), the summary and diffs of the answer, the toolbox's bookkeeping (journal, views).

Where the remaining time goes (bench/README.md has the figures): the syntax gate is the
largest phase and is now mostly ``compile()`` itself, of the changed definitions
(~170 KB of the 2.5 MB, in 48 pieces; a line changed at module level makes the whole
class above it a piece); the plan is reading and decoding 2.5 MB, then splitting each
file into lines and joining it back; staging creates 50 files beside their targets (the
kernel's work, which a busy disk makes slow); the undo copies go to one pack file; the
renames are cheap (the files they replace are freed in a thread afterwards) and one
``fsync`` per folder makes them durable; the rest is a stat per file before and after
(stale views), the diffs of the answer and bookkeeping. ``git apply`` does none of the
syntax check, the flush to disk, the undo copies or the diff back: its time is mostly
its process start-up, which is why the ratio moves with the machine's load.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import statistics
import subprocess
import sysconfig
import time
import warnings
from pathlib import Path
from tempfile import TemporaryDirectory

from yggdrasil.loki.diagnostics import _engine, _ruff
from yggdrasil.loki.files import _files, _journal, _root
from yggdrasil.loki.files.edits import _apply
from yggdrasil.loki.settings import DiagnosticsSettings, Settings
from yggdrasil.loki.tools import filesystem_toolbox

VARIANTS = {  # name -> the settings of the toolbox it times
    "core": Settings(diagnostics=DiagnosticsSettings(enabled=False)),
    "core-later": Settings(diagnostics=DiagnosticsSettings(enabled=False)),
    "ruff": Settings(diagnostics=DiagnosticsSettings(default_servers=False)),
    "default": Settings(),
}
PHASES: dict[str, dict[str, list[float]]] = {name: {} for name in VARIANTS}
_NOW = ["core"]  # the variant being timed


def _timed(owner: object, name: str, phase: str) -> None:
    """Wrap ``owner.name`` so each call adds its time to the phase (this round, this
    variant); a call inside another timed one is counted in both (the diagnostics' own
    phases are inside ``diagnostics``)."""
    inner = getattr(owner, name)

    def wrapper(*args: object, **kwargs: object) -> object:
        started = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent = PHASES[_NOW[0]].setdefault(phase, [0.0])
            spent[-1] += time.perf_counter() - started
    setattr(owner, name, wrapper)


_timed(_files, "parse_patch", "parse the patch")
_timed(_apply.Plan, "apply", "plan: read files, find hunks")
_timed(_files.Files, "_patch_syntax", "syntax gate")
_timed(_root.Root, "stage", "stage (write beside each file)")
_timed(_files._Flush, "wait", "wait for the flush (syncfs)")
_timed(_journal.Journal, "before_write", "keep originals (undo)")
_timed(_root.Root, "commit", "rename, fsync the folders")
_timed(_root.Root, "sync_folders", "rename, fsync the folders")
_timed(_engine.Diagnostician, "before", "diagnostics: keep texts before")
_timed(_engine.Diagnostician, "report", "diagnostics: report (all below)")
_timed(_engine.Diagnostician, "_current", "  read the texts after")
_timed(_ruff.Ruff, "check", "  ruff (before and after)")
_timed(_engine, "changed_spans", "  changed lines (for ruff, LSP)")
_timed(_engine, "_wait", "  wait for the language servers")
DIAGNOSTICS = ("diagnostics: keep texts before", "diagnostics: report (all below)")


def build(repo: Path, count: int, seed: int) -> tuple[dict[str, bytes], dict[str, bytes], str]:
    """(originals, changed, patch) for ``count`` stdlib files copied into ``repo``."""
    base = Path(sysconfig.get_paths()["stdlib"])
    sources = sorted(p for p in base.glob("*.py") if 20_000 <= p.stat().st_size <= 200_000)
    rng = random.Random(seed)
    picked = rng.sample(sources, count)
    for i, source in enumerate(picked):
        shutil.copy(source, repo / f"m{i:02}_{source.name}")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    originals = {p.name: p.read_bytes() for p in sorted(repo.glob("*.py"))}
    for name in originals:
        lines = (repo / name).read_text().split("\n")
        for at in sorted(rng.sample(range(10, len(lines) - 10), 3), reverse=True):
            what = rng.choice(("change", "add", "remove"))
            if what == "change":
                lines[at] = lines[at] + "  # changed"
            elif what == "add":
                lines.insert(at, "# added line")
            else:
                del lines[at]
        (repo / name).write_text("\n".join(lines))
    changed = {name: (repo / name).read_bytes() for name in originals}
    patch = _git(repo, "diff")
    return originals, changed, patch


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=b@b", "-c", "user.name=b", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout


def reset(repo: Path, originals: dict[str, bytes]) -> None:
    for name, data in originals.items():
        (repo / name).write_bytes(data)


def ours(repo: Path, patch: str, variant: str) -> float:
    """One apply_patch on a fresh toolbox (made once per agent run: not timed; closed
    after the timer, which stops its language servers)."""
    _NOW[0] = variant
    with filesystem_toolbox(repo, settings=VARIANTS[variant]) as box:
        if variant.endswith("-later"):  # not the run's first call: that one started the
            box.call("read_file", {"path": next(repo.glob("*.py")).name})  # first
            if box.checkpointing is not None:  # checkpoint's walk, now done
                box.checkpointing.wait_baseline()
        for spent in PHASES[variant].values():
            spent.append(0.0)
        started = time.perf_counter()
        out = box.call("apply_patch", {"patch": patch})
        spent = time.perf_counter() - started
    assert out.startswith("M "), out[:300]
    return spent


def git_apply(repo: Path, patch_file: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["git", "apply", str(patch_file)], cwd=repo, check=True)
    return time.perf_counter() - started


def syntax_check(changed: dict[str, bytes]) -> float:
    """What the syntax check costs alone: compile() of every patched file, as it does."""
    started = time.perf_counter()
    for data in changed.values():
        with contextlib.suppress(SyntaxError), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(data.decode(), "<file>", "exec", dont_inherit=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="which toolboxes to time: core (diagnostics off), core-later "
                             "(the same, not the run's first call), ruff (ruff only), "
                             "default (ruff + the language servers on PATH)")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    with TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        originals, changed, patch = build(repo, args.files, args.seed)
        patch_file = Path(tmp) / "change.diff"
        patch_file.write_text(patch)
        size = sum(map(len, originals.values()))
        print(f"{args.files} files, {size / 1e6:.1f} MB, patch {len(patch) / 1e3:.0f} KB "
              f"({patch.count(chr(10) + '@@ ')} hunks); median of {args.reps} rounds, in turn\n")
        times: dict[str, list[float]] = {name: [] for name in (*variants, "git apply")}
        checks: list[float] = []
        for _ in range(args.reps):
            for variant in variants:
                for name, run in ((variant, lambda v=variant: ours(repo, patch, v)),
                                  ("git apply", lambda: git_apply(repo, patch_file))):
                    reset(repo, originals)
                    times[name].append(run())
                    assert all((repo / n).read_bytes() == data
                               for n, data in changed.items()), name
            checks.append(syntax_check(changed))
        base = statistics.median(times["git apply"])
        print(f"{'git apply':44} {base * 1000:8.1f} ms")
        for variant in variants:
            mine = statistics.median(times[variant])
            print(f"{'apply_patch, toolbox ' + variant:44} {mine * 1000:8.1f} ms  "
                  f"{mine / base:6.2f}x git apply")
        print(f"{'compile() of all 50 files (before)':44} {statistics.median(checks) * 1000:8.1f}"
              " ms (what the syntax gate cost when it compiled every file whole)")
        for variant in variants:
            mine = statistics.median(times[variant])
            print(f"\nwhere apply_patch's time goes, toolbox {variant} (median per phase):")
            shown = 0.0
            for phase, spent in PHASES[variant].items():
                value = statistics.median(spent[1:] if len(spent) > 1 else spent)
                if not phase.startswith(" "):
                    shown += value
                print(f"  {phase:36} {value * 1000:8.1f} ms")
            print(f"  {'the rest (checks, diffs, books)':36} {(mine - shown) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
