"""What the per-command namespaces and the setid filter cost, side by side with today's fence.

Times, as medians over many rounds on a small root (so that change tracking costs
nothing), ``true`` run:

- directly (``bash -c true``), and through the launcher with Landlock only (the fence
  before namespaces), + the seccomp setid filter, + namespaces with the toolbox's mount
  plan, + a network namespace (``network=False``);
- through the toolbox, ``run("true")``, with namespaces turned off and on, with the
  network off too (a network namespace and Landlock's TCP rules: every layer), and
  with the warm launcher turned off (a Python start per command: how it was before);

- through bubblewrap (``bwrap --unshare-all``, Debian's ``bubblewrap``), the same
  ``bash -c true`` with every namespace, the root bound writable, a private /tmp: the
  baseline the fence per command is measured against (skipped, with a message, when bwrap
  is missing or cannot make namespaces here).

Ratios are against the launcher with Landlock only: the cost added per command; the last
lines put ours beside bwrap and bare bash.

Usage: PYTHONPATH=src python bench/bench_fence.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from _timing import interleaved_ms
from yggdrasil.loki.sandbox import (
    WarmLauncher,
    _isolation,
    isolation_status,
    landlock_status,
    launcher_argv,
)
from yggdrasil.loki.shell import Shell
from yggdrasil.loki.toolbox import Toolbox
from yggdrasil.loki.tools import filesystem_toolbox


def launched(root: Path, **layers: object) -> Callable[[], object]:
    abi = landlock_status().abi
    mounts = [("tmpfs", "/tmp"), ("tmpfs", "/dev/shm"), ("bind", str(root))] if layers.get(
        "namespaces") else []
    argv = launcher_argv(sys.executable, [str(root)], network=bool(layers.get("network", True)),
                         abi=abi, argv=["true"], namespaces=bool(layers.get("namespaces")),
                         mounts=mounts, no_setid=bool(layers.get("no_setid")))
    return partial(subprocess.run, argv, cwd=root, check=True, capture_output=True)


def bwrap_argv(root: Path) -> list[str] | None:
    """bubblewrap with every namespace running ``bash -c true`` in ``root``; None (after
    saying why) when bwrap is missing or cannot run here."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        print("bwrap not found (apt-get install bubblewrap): no bwrap baseline")
        return None
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
            "--proc", "/proc", "--tmpfs", "/tmp", "--bind", str(root), str(root),
            "--chdir", str(root), "bash", "-c", "true"]
    tried = subprocess.run(argv, capture_output=True, text=True)
    if tried.returncode:
        print(f"bwrap cannot run here ({tried.stderr.strip()}): no bwrap baseline")
        return None
    return argv


def shell_of(box: Toolbox) -> Shell:
    return next(r for r in box._resources if isinstance(r, Shell))


def _box_run(root: Path, status: _isolation.IsolationStatus, *, network: bool = True,
             warm: bool = True) -> Callable[[], object]:
    """run('true') through a toolbox built (and run) under the given isolation status."""
    real = _isolation._cached
    _isolation._cached = status
    box = filesystem_toolbox(root, network=network)
    _isolation._cached = real
    if not warm:
        shell_of(box).warm = WarmLauncher(sys.executable, enabled=False)

    def call() -> object:
        _isolation._cached = status
        try:
            return box.call("run", {"command": "true"})
        finally:
            _isolation._cached = real
    return call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--many", type=int, default=0,
                        help="also time a command creating this many files, vs bash directly")
    args = parser.parse_args()
    iso = isolation_status()
    print(f"{landlock_status()}; {iso}")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as small:
        root = Path(small)
        off = _isolation.IsolationStatus(False, "bench", iso.setid_filter, iso.setid_reason)
        cases: dict[str, Callable[[], object]] = {
            "bash -c true (no launcher)": partial(subprocess.run, ["bash", "-c", "true"],
                                                  check=True),
            "launcher: Landlock only (before)": launched(root),
            "launcher: + setid filter": launched(root, no_setid=True),
            "launcher: + namespaces, mounts": launched(root, no_setid=True, namespaces=True),
            "launcher: + network namespace": launched(root, no_setid=True, namespaces=True,
                                                      network=False),
            "run('true'), namespaces off": _box_run(root, off),
            "run('true'), all layers": _box_run(root, iso),
            "run('true'), all layers, no network": _box_run(root, iso, network=False),
            "run('true'), all layers, cold launcher": _box_run(root, iso, warm=False),
            "run('true'), no network, cold launcher": _box_run(root, iso, network=False,
                                                               warm=False),
        }
        bwrap = bwrap_argv(root)
        if bwrap is not None:
            cases["bwrap --unshare-all bash -c true"] = partial(
                subprocess.run, bwrap, check=True, capture_output=True)
        found = interleaved_ms(cases, args.rounds)
    base = found["launcher: Landlock only (before)"]
    for name, ms in found.items():
        print(f"{name:<40} {ms:8.1f} ms   vs Landlock only {ms / base:5.2f}x   "
              f"(+{ms - base:6.1f} ms)")
    bash = found["bash -c true (no launcher)"]
    wrapped = found.get("bwrap --unshare-all bash -c true")
    print()
    for name in ("run('true'), all layers", "run('true'), all layers, no network",
                 "run('true'), all layers, cold launcher",
                 "run('true'), no network, cold launcher"):
        ours = found[name]
        line = f"{name:<40} {ours:6.1f} ms = {ours / bash:5.1f}x bare bash ({bash:.1f} ms)"
        if wrapped is not None:
            line += f", {ours / wrapped:5.2f}x bwrap --unshare-all ({wrapped:.1f} ms; goal <= 2x)"
        print(line)
    if args.many:
        many(args.many)


def many(count: int) -> None:
    """A command that creates ``count`` files: through the toolbox (tracked, recorded) and
    straight through bash, each in a fresh folder."""
    command = f"mkdir d && cd d && seq {count} | xargs touch"
    for name in ("bash directly", "toolbox run (tracked)", "bash directly", "toolbox run (tracked)"):
        with tempfile.TemporaryDirectory(dir="/var/tmp") as folder:
            box = filesystem_toolbox(folder)
            box.call("run", {"command": "true"})  # the watched view, built before timing
            start = time.perf_counter()
            if name.startswith("bash"):
                subprocess.run(["bash", "-c", command], cwd=folder, check=True)
            else:
                box.call("run", {"command": command, "timeout": 3600})
                assert len(box.changed) == count
            print(f"{count} files, {name:<24} {time.perf_counter() - start:8.2f} s")


if __name__ == "__main__":
    main()
