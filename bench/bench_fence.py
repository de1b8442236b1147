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

``--profile``: where one fenced ``run("true")`` spends its time: the agent's phases
(timed around the toolbox's own functions), each layer of the launcher (replayed step by
step in a forked child of a process that has loaded the launcher, as the warm launcher
has), and the CPU time per command of the agent, of the warm launcher's side (launchers,
PID 1, the command) and of bwrap.

Usage: PYTHONPATH=src python bench/bench_fence.py [--rounds 40] [--profile]
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import resource
import shutil
import statistics
import struct
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
    parser.add_argument("--profile", action="store_true",
                        help="where one fenced run('true') spends its time")
    parser.add_argument("--many", type=int, default=0,
                        help="also time a command creating this many files, vs bash directly")
    args = parser.parse_args()
    iso = isolation_status()
    print(f"{landlock_status()}; {iso}")
    if args.profile:
        profile(max(args.rounds, 20))
        return
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


# -- the profile ---------------------------------------------------------------------------

def _median_table(title: str, times: dict[str, list[float]], total: float | None = None) -> None:
    print(f"\n{title}")
    for name, values in times.items():
        ms = statistics.median(values)
        share = f"  {ms / total:5.1%}" if total else ""
        print(f"  {name:<44} {ms:7.3f} ms{share}")


def launcher_layers(root: Path, rounds: int, *, network: bool) -> dict[str, list[float]]:
    """Each layer of a launch, replayed in a forked child of this process (single-threaded
    here, with the launcher's modules loaded, as the warm launcher is)."""
    from yggdrasil.loki.sandbox import _landlock

    ns, seccomp = _landlock._sibling("_namespace"), _landlock._sibling("_seccomp")
    seccomp.load_library()
    import fcntl  # noqa: F401  (the warm launcher has it loaded)

    home = os.path.expanduser("~")
    hidden = [p for p in (f"{home}/.ssh", f"{home}/.bashrc", f"{home}/.npmrc")
              if os.path.lexists(p)]
    scratch = tempfile.mkdtemp(prefix="loki-tmp-")
    plan = [("tmpfs", "/tmp"), ("tmpfs", "/dev/shm"), ("bind", scratch), ("bind", str(root))]
    names = ["fork the launcher", "namespaces (user, mount, PID" + (")" if network else
             ", network + loopback up)"), "mounts (2 tmpfs, 2 binds)",
             "fork PID 1, mount its /proc", "Landlock ruleset (+ hidden paths)",
             "seccomp setid filter (libseccomp)", "drop capabilities"]
    times: dict[str, list[float]] = {n: [] for n in [*names, "exit, namespaces torn down"]}
    abi = landlock_status().abi
    try:
        for _ in range(rounds):
            readable, writable = os.pipe()
            start = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                marks = [time.perf_counter()]
                ns.enter(network=network)
                marks.append(time.perf_counter())
                ns.apply_mounts(plan)
                marks.append(time.perf_counter())
                init = os.fork()
                if init:
                    os.waitpid(init, 0)
                    os._exit(0)
                ns._mount(b"proc", "/proc", b"proc", ns.MS_NOSUID | ns.MS_NODEV | ns.MS_NOEXEC)
                marks.append(time.perf_counter())
                _landlock.restrict_self([str(root), scratch], network=network, abi=abi,
                                        hidden=hidden)
                marks.append(time.perf_counter())
                seccomp.forbid_setid_bits()
                marks.append(time.perf_counter())
                _landlock.drop_capabilities()
                marks.append(time.perf_counter())
                os.write(writable, struct.pack(f"{len(marks)}d", *marks))
                os._exit(0)
            os.close(writable)
            marks = struct.unpack(f"{len(names)}d", os.read(readable, 8 * len(names)))
            os.waitpid(pid, 0)
            end = time.perf_counter()
            os.close(readable)
            for name, mark in zip(names, marks, strict=True):
                times[name].append((mark - start) * 1000)
                start = mark
            times["exit, namespaces torn down"].append((end - start) * 1000)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return times


def agent_phases(root: Path, rounds: int) -> tuple[dict[str, list[float]], list[float]]:
    """The agent's side of run('true') (no network: every layer), timed around the
    functions it is made of; and the whole calls."""
    from yggdrasil.loki.sandbox import _proc
    from yggdrasil.loki.shell import _shell

    times: dict[str, list[float]] = collections.defaultdict(list)
    patched: list[tuple[object, str, object]] = []

    def timed(owner: object, attr: str, label: str) -> None:
        original = getattr(owner, attr)

        @functools.wraps(original)
        def wrapper(*a: object, **k: object) -> object:
            start = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                times[label].append((time.perf_counter() - start) * 1000)
        patched.append((owner, attr, original))
        setattr(owner, attr, wrapper)

    shell_cls = _shell.Shell
    timed(shell_cls, "check_command", "command rules (words)")
    timed(shell_cls, "run", "the tool (all the agent does below the toolbox)")
    timed(shell_cls, "_env", "environment scrubbed")
    timed(_shell.ChangeTracker, "begin", "change tracking: begin")
    timed(shell_cls, "_session", "supervisor session (connect checks)")
    timed(shell_cls, "hidden_paths", "hidden paths resolved")
    timed(_shell, "mount_plan", "mount plan")
    timed(_proc, "_start", "start: hand the warm launcher the command")
    timed(_proc, "_wait", "wait: the launcher and the command run")
    timed(_proc, "kill_tree", "after: leftovers killed (group; /proc sweep if needed)")
    timed(_proc, "_join", "after: output pumps joined")
    timed(_shell.ChangeTracker, "end", "change tracking: end")
    timed(_shell, "command_result", "the typed result")
    box = filesystem_toolbox(root, network=False)
    calls: list[float] = []
    try:
        for _ in range(3):
            box.call("run", {"command": "true"})
        times.clear()
        for _ in range(rounds):
            start = time.perf_counter()
            box.call("run", {"command": "true"})
            calls.append((time.perf_counter() - start) * 1000)
    finally:
        for owner, attr, original in patched:
            setattr(owner, attr, original)
        box.close()
    return dict(times), calls


def cpu_split(root: Path, rounds: int) -> None:
    """CPU time per command (less disturbed by other work than wall time): the agent,
    the warm launcher's side (its launchers, PID 1s and commands: reaped by it), bwrap."""
    tick = os.sysconf("SC_CLK_TCK")

    def cpu_of(pid: int) -> float:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / tick * 1000  # utime stime cutime cstime

    box = filesystem_toolbox(root, network=False)
    try:
        box.call("run", {"command": "true"})
        warm = shell_of(box).warm._process
        assert warm is not None
        before, side = resource.getrusage(resource.RUSAGE_SELF), cpu_of(warm.pid)
        for _ in range(rounds):
            box.call("run", {"command": "true"})
        after, side = resource.getrusage(resource.RUSAGE_SELF), cpu_of(warm.pid) - side
    finally:
        box.close()
    agent = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    print(f"\nCPU per run('true') (no network): agent {agent / rounds:.2f} ms, warm launcher "
          f"side {side / rounds:.2f} ms", end="")
    argv = bwrap_argv(root)
    if argv is None:
        print()
        return
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(rounds):
        subprocess.run(argv, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    print(f"; bwrap --unshare-all bash -c true {spent / rounds:.2f} ms")


def profile(rounds: int) -> None:
    with tempfile.TemporaryDirectory(dir="/var/tmp") as small:
        root = Path(small)
        for network in (True, False):
            layers = launcher_layers(root, rounds, network=network)
            _median_table(f"launcher layers, network={'on' if network else 'off'} "
                          "(forked child, median ms)", layers)
        phases, calls = agent_phases(root, rounds)
        total = statistics.median(calls)
        _median_table(f"agent phases of run('true'), no network (whole call {total:.1f} ms)",
                      dict(sorted(phases.items(), key=lambda kv: -statistics.median(kv[1]))),
                      total)
        cpu_split(root, rounds * 3)


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
