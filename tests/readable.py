"""A copy of this checkout's ``src`` and ``tests`` that any user can read, for the tests
that run a child as uid 65534: the checkout itself may sit where other users cannot
enter (root's 0700 home, a ``mktemp -d`` folder), and the attack such a test makes must
still be tested from there rather than skipped."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def reachable(path: Path) -> bool:
    """Whether every folder down to ``path`` lets other users through (o+x)."""
    return all(os.stat(folder).st_mode & stat.S_IXOTH for folder in [*reversed(path.parents), path])


def readable_copy(base: Path) -> tuple[Path, Path]:
    """(src, tests) copied below ``base`` (made 0755), folders 0755 and files 0644."""
    base.chmod(0o755)
    copies = []
    for source, name in ((SRC, "src"), (HERE, "tests")):
        target = base / name
        shutil.copytree(source, target, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        for folder, _dirs, files in os.walk(target):
            os.chmod(folder, 0o755)
            for file in files:
                path = os.path.join(folder, file)
                if not os.path.islink(path):
                    os.chmod(path, 0o644)
        copies.append(target)
    return copies[0], copies[1]


def new_base(prefix: str) -> Path | None:
    """A fresh folder in the system temp dir that other users can reach, or None."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o755)
    if reachable(base):
        return base
    shutil.rmtree(base, ignore_errors=True)
    return None
