"""One index per root (and protected list), shared by the toolboxes of this process, and
its disk copy.

A root's :class:`Held` keeps its :class:`Index`, its :class:`Ranker` and, when asked
for, the :class:`Store` that saves the index to the user's cache folder: after the
first build, then at most every ``_SAVE_EVERY`` seconds, and at exit. At most
``_MAX_ROOTS`` roots are held; the least recently used is dropped.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections import OrderedDict
from contextlib import suppress
from dataclasses import dataclass, field

from ..files import Root
from ..results import RepoMap, SymbolsFound
from ._index import Index
from ._rank import Ranker
from ._store import Store

__all__ = ["Held", "cache_wanted", "held_for"]

_SAVE_EVERY = 30.0  # seconds between writes of a changed on-disk index


@dataclass
class Held:
    index: Index
    store: Store | None = None
    saved_at: float = 0.0
    ranker: Ranker = field(default_factory=Ranker)
    rank_lock: threading.Lock = field(default_factory=threading.Lock)
    maps: dict[tuple[str, int], tuple[int, RepoMap]] = field(default_factory=dict)  # repo maps
    #      by (folder, budget): (index version, map), reused while nothing changed
    found: dict[tuple[str, str, str, bool], tuple[int, SymbolsFound]] = field(
        default_factory=dict)  # find_symbol's answers that found definitions, by (name,
    #      kind, folder, include_ignored): (index version, answer), the same way

    def saved(self) -> None:
        """Write the index to disk when it changed, at most every _SAVE_EVERY seconds."""
        if self.store is None or not self.index.changed:
            return
        now = time.monotonic()
        if self.saved_at and now - self.saved_at < _SAVE_EVERY:
            return
        with self.index.lock:
            entries = dict(self.index.entries)
            self.index.changed = 0
        try:
            self.store.save(entries)
        except OSError:
            self.store = None  # an unwritable cache folder: go on without one
        self.saved_at = now


def _save_all() -> None:
    """At exit, write what changed since the last throttled save."""
    for held in list(_held_by_root.values()):
        held.saved_at = 0.0
        with suppress(Exception):  # a cache: never fail an exit over it
            held.saved()


_MAX_ROOTS = 8
_exit_hook: list[object] = []  # filled once the exit save is registered
_held_by_root: OrderedDict[tuple[str, tuple[str, ...]], Held] = OrderedDict()
_registry_lock = threading.Lock()


def held_for(root: Root, cache: bytes | None) -> Held:
    """The shared state of ``root``, made on first use (loaded from disk when ``cache``,
    the key the disk copy is signed with, is given).

    Shared by the toolboxes of one root *with the same protected files*: the index walks
    with the Root it was made with, so a toolbox with ``protect=()`` must not answer
    another toolbox's ``find_symbol`` or ``repo_map`` with a ``secrets.py`` it parsed."""
    key = (str(root.path), root.protect.globs if root.protect else ())
    with _registry_lock:
        found = _held_by_root.get(key)
        if found is None:
            if cache and not _exit_hook:
                _exit_hook.append(atexit.register(_save_all))
            store = Store.for_root(root.path, cache, root.protect) if cache else None
            found = Held(Index(root, store.load() if store else None), store)
            _held_by_root[key] = found
            while len(_held_by_root) > _MAX_ROOTS:
                _held_by_root.popitem(last=False)
        elif cache and found.store is None:
            found.store = Store.for_root(root.path, cache, root.protect)
        _held_by_root.move_to_end(key)
        return found


def cache_wanted(cache: bool | None) -> bool:
    """``cache`` as given, or (None) whether ``LOKI_CODE_CACHE`` says yes."""
    if cache is not None:
        return cache
    return os.environ.get("LOKI_CODE_CACHE", "").strip().lower() in ("1", "true", "yes", "on")
