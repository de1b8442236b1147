"""Starting Python worker processes (multiprocessing's spawn) without re-running the
caller's script in them."""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def main_not_rerun() -> Iterator[None]:
    """While processes start, present the main script as a package's ``__main__``.

    multiprocessing re-runs the main script in every new process (as ``__mp_main__``),
    which runs the caller's work again (a fleet, a build) unless the script guards it with
    ``if __name__ == "__main__":``. Workers that run library code need nothing from it,
    and a package's ``__main__`` is never re-run. Whatever a worker must call (an engine
    factory) has to live in an importable module."""
    main = sys.modules.get("__main__")
    if main is None or getattr(getattr(main, "__spec__", None), "name", None):
        yield  # run with -m (or no script): nothing is re-run anyway
        return
    saved = getattr(main, "__spec__", None)
    main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)
    try:
        yield
    finally:
        main.__spec__ = saved
