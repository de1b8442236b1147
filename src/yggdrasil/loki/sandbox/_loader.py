"""The program the dynamic loader runs when a command starts it by hand.

``/lib64/ld-linux-x86-64.so.2 /usr/bin/git push`` is an exec of the loader, which then
maps and runs git in the same process: no second exec to stop. So an exec of a loader
(``ld-linux*.so*``, ``ld-*.so*``, ``ld.so``, ``ld64.so*``, ``ld-musl-*``) is judged as
the program it loads: its first word after the loader's own options, found the way the
loader finds it (a path from the working folder; a bare name along ``--library-path``
and ``LD_LIBRARY_PATH``), with ``--argv0`` as its argv[0]. A bare name found nowhere
keeps only its name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

LOADER = re.compile(r"^(ld-linux[\w.-]*\.so[\d.]*|ld-[\w.-]*\.so[\d.]*|ld\.so|ld64\.so[\d.]*"
                    r"|ld-musl-[\w.-]*)$")
_VALUED = frozenset({"--library-path", "--glibc-hwcaps-prepend", "--glibc-hwcaps-mask",
                     "--inhibit-rpath", "--audit", "--preload", "--argv0"})
Reach = Callable[[str, str], "tuple[str, os.stat_result] | int"]  # (path, start) -> found


def is_loader(name: str) -> bool:
    return bool(LOADER.match(name))


def loaded(argv: Sequence[str], env: Sequence[str], cwd: str, reach: Reach,
           ) -> tuple[str, str, os.stat_result | None, tuple[str, ...]] | None:
    """(path, file name reached or '', its stat, argv) of the program a loader run with
    ``argv`` would run; None when it runs none (``--list``, ``--help``, no program)."""
    i, argv0, dirs = 1, None, []
    while i < len(argv) and argv[i].startswith("--"):
        if argv[i] in _VALUED and i + 1 < len(argv):
            if argv[i] == "--argv0":
                argv0 = argv[i + 1]
            elif argv[i] == "--library-path":
                dirs += argv[i + 1].split(":")
            i += 2
        else:
            i += 1
    if i >= len(argv):
        return None
    program = argv[i]
    for entry in env:
        if entry.startswith("LD_LIBRARY_PATH="):
            dirs += entry.partition("=")[2].split(":")
            break
    tries = [program] if "/" in program else [os.path.join(d or ".", program) for d in dirs]
    found: tuple[str, os.stat_result] | int = 2
    for path in tries:
        found = reach(path, cwd)
        if not isinstance(found, int):
            break
    name, st = found if not isinstance(found, int) else ("", None)
    return program, name, st, (argv0 if argv0 is not None else program, *argv[i + 1:])
