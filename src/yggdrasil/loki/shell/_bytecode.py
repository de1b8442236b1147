"""The installed modules' bytecode, seen through a command's private bytecode cache.

Commands keep their bytecode in a cache of their shell (``PYTHONPYCACHEPREFIX``), so that
bytecode planted in the root never runs. The prefix hides the installed modules' own
``__pycache__`` too: every Python a command starts compiled again, from source, what the
interpreter imports as it starts (its site's ``.pth`` files can pull in ``re``,
``pathlib``, ``zipfile``...): 0.1-0.2 s of CPU per start, and at every start where
``PYTHONDONTWRITEBYTECODE`` is set (nothing is ever written to the cache then). The shell's
first command of a fresh toolbox paid it always (a fleet: twice per attempt).

:func:`seed` links, in a new cache, the bytecode files of those start-up modules where
Python looks for them: a symlink per file, to the installed ``.pyc``. Only modules of
the interpreter's own library folders are linked, never one under a place commands may
write (the root among them). A command cannot write through a link (the fence allows no
write there), and Python replaces a stale one by renaming its own file over it.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from ._fence import _under_any

__all__ = ["seed"]

_PROBE = ("import json, sys; print(json.dumps([(m.__file__, m.__cached__) for m in "
          "list(sys.modules.values()) if isinstance(getattr(m, '__file__', None), str) "
          "and isinstance(getattr(m, '__cached__', None), str)]))")
_PROBE_TIMEOUT = 20.0


@functools.cache
def startup_bytecode() -> tuple[tuple[str, str, str], ...]:
    """(source folder, its real path, installed .pyc) of each module this interpreter
    imports as it starts, from its library folders, whose bytecode is on disk; () when it
    cannot say."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPYCACHEPREFIX", "PYTHONPATH", "PYTHONSTARTUP")}
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=_PROBE_TIMEOUT, check=True,
                              cwd="/")
        found = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return ()
    paths = sysconfig.get_paths()
    tops = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")
            if k in paths}
    kept = []
    for source, cached in found:
        folder = os.path.dirname(source)
        real = os.path.realpath(folder)
        usual = os.path.join(folder, "__pycache__", os.path.basename(cached))
        if (os.path.isabs(source) and cached == usual and os.path.isfile(cached)
                and _under_any(real, tops)):
            kept.append((folder, real, cached))
    return tuple(kept)


def seed(prefix: Path, writable: Sequence[str]) -> None:
    """Link the start-up modules' installed bytecode into the new cache ``prefix``,
    leaving out any under ``writable`` (where a command could have planted it). Each
    folder is made once (on a busy disk a folder or a link can cost a millisecond)."""
    places = [os.path.realpath(p) for p in writable]
    made: set[str] = set()
    for folder, real, cached in startup_bytecode():
        if _under_any(real, places):
            continue
        home = os.path.join(prefix, folder.lstrip(os.sep))
        try:
            if home not in made:
                os.makedirs(home, exist_ok=True)
                made.add(home)
            os.symlink(cached, os.path.join(home, os.path.basename(cached)))
        except OSError:
            return  # a cache without them only costs time
