"""The program the dynamic loader runs when a command starts it by hand.

``/lib64/ld-linux-x86-64.so.2 /usr/bin/git push`` is an exec of the loader, which then
maps and runs git in the same process: no second exec to stop. So an exec of a loader
(``ld-linux*.so*``, ``ld-*.so*``, ``ld.so``, ``ld64.so*``, ``ld-musl-*``) is judged as
the program it loads: its first word after the loader's own options, found the way the
loader finds it (a path from the working folder; a bare name along ``--library-path``
and ``LD_LIBRARY_PATH``), with ``--argv0`` as its argv[0]. A bare name found nowhere
keeps only its name.

A loader is known by its name, and by its content: a copy under another name (``cp
ld-linux-x86-64.so.2 ./L; ./L /usr/bin/git push``) has the size and SHA-256 of one of the
system's loaders (:class:`Loaders`: the files ``ld-*.so*`` and ``ld64.so*`` in the
library folders, and the interpreter this Python was started by).
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import threading
from collections.abc import Callable, Sequence

LOADER = re.compile(r"^(ld-linux[\w.-]*\.so[\d.]*|ld-[\w.-]*\.so[\d.]*|ld\.so|ld64\.so[\d.]*"
                    r"|ld-musl-[\w.-]*)$")
_VALUED = frozenset({"--library-path", "--glibc-hwcaps-prepend", "--glibc-hwcaps-mask",
                     "--inhibit-rpath", "--audit", "--preload", "--argv0"})
Reach = Callable[[str, str], "tuple[str, os.stat_result] | int"]  # (path, start) -> found


_SHEBANG = re.compile(rb"[ \t]*([^ \t\0]*)[ \t]*([^\0]*)")
_FOLDERS = ("/lib", "/lib64", "/lib32", "/libx32", "/usr/lib", "/usr/lib64", "/usr/lib32",
            "/usr/libx32", "/usr/local/lib")
_PATTERNS = ("ld-*.so*", "ld64.so*", "ld.so", "ld-musl-*")


def is_loader(name: str) -> bool:
    return bool(LOADER.match(name))


class Loaders:
    """The system's dynamic loaders by identity, and by size then SHA-256 (found once)."""

    def __init__(self) -> None:
        self.identities: set[tuple[int, int]] = set()
        self.digests: dict[int, set[bytes]] = {}  # size -> SHA-256s
        self._found = False
        self._lock = threading.Lock()

    def _find(self) -> None:
        with self._lock:
            if self._found:
                return
            paths = {os.path.realpath(p) for folder in _FOLDERS for pattern in _PATTERNS
                     for p in [*glob.glob(os.path.join(folder, pattern)),
                               *glob.glob(os.path.join(folder, "*", pattern))]}
            for path in paths:
                try:
                    with open(path, "rb") as fh:
                        st = os.fstat(fh.fileno())
                        digest = hashlib.file_digest(fh, "sha256").digest()
                except OSError:
                    continue
                self.identities.add((st.st_dev, st.st_ino))
                self.digests.setdefault(st.st_size, set()).add(digest)
            self._found = True

    def holds(self, st: os.stat_result, digest: Callable[[], bytes]) -> bool:
        """Whether the file of ``st`` is one of them or a copy of one (``digest`` is
        asked only when its size is a loader's)."""
        self._find()
        if (st.st_dev, st.st_ino) in self.identities:
            return True
        same = self.digests.get(st.st_size)
        return same is not None and digest() in same


LOADERS = Loaders()


def shebang(head: bytes) -> tuple[str, str | None] | None:
    """(interpreter, its one optional argument) of a script's ``#!`` line as the kernel
    reads it (the rest of the line after the interpreter is one word); None if none."""
    if not head.startswith(b"#!"):
        return None
    found = _SHEBANG.match(head[2:].split(b"\n", 1)[0])  # matches any line
    interpreter = found.group(1) if found else b""
    rest = found.group(2).rstrip(b" \t") if found else b""
    if not interpreter:
        return None
    return os.fsdecode(interpreter), os.fsdecode(rest) if rest else None


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
