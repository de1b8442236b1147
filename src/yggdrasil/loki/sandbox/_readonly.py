"""Run a program that may only read: the launcher for parsers of untrusted input.

The parent starts::

    python -I -S .../_readonly.py --abi N [--read PATH]... [--exec PATH]... -- argv...

and this file, run as a script, fences itself with a Landlock ruleset that allows reading
below the ``--read`` paths and reading and running files below the ``--exec`` paths, and
nothing else: no write anywhere, no TCP (ABI 4+), no signals or abstract UNIX sockets out
of the fence (ABI 6+). It then gives up every capability and ``execvp``s ``argv``. ripgrep
runs this way: it opens paths by name, so a folder swapped for a link to the outside
while it walks could otherwise lead it there; under the fence such a read is refused.

:func:`interpreter_paths` lists what running this Python (or a plain ELF binary) needs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

# Shared libraries, the loader's cache, time zones, and the facts about CPUs and memory
# that thread pools and allocators read. Nothing here is a secret of the user.
SYSTEM_PATHS = ("/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64",
                "/usr/local/lib", "/etc/ld.so.cache", "/etc/localtime", "/usr/share/zoneinfo",
                "/sys/devices/system/cpu", "/sys/fs/cgroup", "/proc/meminfo", "/proc/cpuinfo",
                "/proc/stat", "/dev/null", "/dev/urandom", "/dev/zero")


def interpreter_paths(python_path: Sequence[str] = ()) -> list[str]:
    """Folders this interpreter runs from: its prefixes, stdlib and the ``python_path``
    entries (site-packages, the package's own source) plus :data:`SYSTEM_PATHS`."""
    import sysconfig  # not at the top: the launcher itself must start fast

    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)),
             *(sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib",
                                                           "platlib")),
             *python_path, *SYSTEM_PATHS]
    out: list[str] = []
    for path in found:
        if path and os.path.isabs(path) and os.path.exists(path):
            real = os.path.realpath(path)
            if real != "/" and real not in out:
                out.append(real)
    return out


def binary_paths(binary: str) -> list[str]:
    """What running the ELF ``binary`` needs: itself, the loader and the shared libraries."""
    return [os.path.realpath(binary), *(p for p in SYSTEM_PATHS if os.path.exists(p))]


def read_only_argv(argv: Sequence[str], *, read: Sequence[str], execute: Sequence[str],
                   abi: int) -> list[str]:
    """The argv that runs ``argv`` fenced to reading ``read`` and running ``execute``."""
    rules = ["--abi", str(abi)]
    for flag, paths in (("--read", read), ("--exec", execute)):
        for path in paths:
            rules += [flag, path]
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), *rules, "--", *argv]


def _landlock() -> ModuleType:
    """_landlock.py, loaded by path: under ``-I`` this folder is not on sys.path."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_landlock.py")
    spec = importlib.util.spec_from_file_location("_loki_landlock", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parse(args: list[str]) -> tuple[int, list[str], list[str], list[str]]:
    values: dict[str, list[str]] = {"--abi": [], "--read": [], "--exec": []}
    i = 0
    while i < len(args) and args[i] != "--":
        if args[i] not in values or i + 1 >= len(args):
            raise ValueError(f"unexpected argument {args[i]!r}")
        values[args[i]].append(args[i + 1])
        i += 2
    argv = args[i + 1 :]
    if len(values["--abi"]) != 1 or not values["--abi"][0].isdigit() or not argv:
        raise ValueError("need --abi N and a command after --")
    return int(values["--abi"][0]), values["--read"], values["--exec"], argv


def main(args: list[str]) -> int:
    try:
        abi, read, execute, argv = _parse(args)
    except ValueError as exc:
        print(f"loki read-only fence: {exc}", file=sys.stderr)
        return 2
    if abi:
        landlock = _landlock()
        try:
            landlock.restrict_reads(read, abi=abi, executable=execute)
            landlock.drop_capabilities()
        except OSError as exc:
            print(f"loki read-only fence: refusing to run unfenced: {exc}", file=sys.stderr)
            return 126
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"loki read-only fence: cannot start {argv[0]!r}: {exc.strerror}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
