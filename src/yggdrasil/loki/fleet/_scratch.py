"""A node's fleet cache: scratch folders per attempt, and sweeping up after dead ones.

Each attempt works in ``<cache>/work/<id>.<random>/``, whose ``owner`` file names the
process (host, pid and start time) and the marker its commands carry in their environment
(``LOKI_FLEET_ATTEMPT``). A worker killed mid-task cannot clean up, so every attempt first
sweeps: a folder whose owner is gone is removed, after killing any process still carrying
its marker (a command the dead worker had started), and the mirrors forget its worktrees.
A worker also keeps a ``parked.<random>/`` folder of its own (the working copies it reuses
from one attempt to the next), swept the same way when it is gone, and when a run ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..sandbox import kill_carrying, running_since
from ._git import GitError, git, mirror_lock

__all__ = ["MARKER", "Workspace", "default_cache", "kill_marked", "prune"]

MARKER = "LOKI_FLEET_ATTEMPT"
ABANDONED = 600.0  # seconds after which a scratch folder that never got an owner is swept
_PARKING: dict[tuple[Path, int], Path] = {}  # (cache, pid): that process's parking folder


def default_cache() -> str:
    """Where a node keeps its mirrors and working copies unless told otherwise."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "yggdrasil-loki", "fleet")


def alive(pid: int, start: str) -> bool:
    return bool(start) and running_since(pid) == start


def kill_marked(marker: str) -> int:
    """SIGKILL every process whose environment carries ``MARKER=marker``; how many."""
    return kill_carrying(f"{MARKER}={marker}".encode())


class Workspace:
    """The fleet cache of this node: ``mirrors/`` (bare git mirrors) and ``work/``."""

    def __init__(self, cache: str | os.PathLike[str] = "") -> None:
        self.root = Path(cache or default_cache()).expanduser().resolve()
        self.mirrors = self.root / "mirrors"
        self.work = self.root / "work"
        for folder in (self.mirrors, self.work):
            folder.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def scratch(self, task_id: str, marker: str) -> Iterator[Path]:
        """A fresh folder for one attempt, owned by this process; removed afterwards."""
        folder = self._owned(f"{task_id}.", marker)
        try:
            yield folder
        finally:
            remove_owned(folder)

    def parking(self) -> Path:
        """This process's folder for what it keeps from one attempt to the next (its
        working copies), made on first use: owned like a scratch folder, so it is swept
        once the process is gone, and by ``sweep(parked=True)`` when a run ends."""
        key = (self.root, os.getpid())
        folder = _PARKING.get(key)
        if folder is None or not folder.is_dir():
            folder = self._owned("parked.", secrets.token_hex(8), parked=True)
            _PARKING[key] = folder
        return folder

    def _owned(self, prefix: str, marker: str, **more: object) -> Path:
        """A new folder in ``work/`` owned by this process (``owner`` says who: what
        ``sweep`` judges it by)."""
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=self.work))
        owner = {"pid": os.getpid(), "start": running_since(os.getpid()), "marker": marker,
                 "host": socket.gethostname(), **more}
        (folder / "owner").write_text(json.dumps(owner))
        return folder

    def sweep(self, parked: bool = False) -> int:
        """Remove the folders of attempts whose process is gone (``parked``: and what
        live processes keep between attempts, at the end of a run); how many."""
        with self._lock() as locked:
            if not locked:
                return 0  # another worker on this node is sweeping right now
            removed = 0
            for folder in self.work.iterdir():
                owner = _owner(folder)
                if owner is None:
                    if not _abandoned(folder):
                        continue  # not a scratch folder, or one being made right now
                elif owner["host"] != socket.gethostname():
                    continue  # not ours to judge (a cache shared by nodes)
                elif alive(owner["pid"], owner["start"]):
                    if not (parked and owner.get("parked") is True):
                        continue
                else:
                    kill_marked(owner["marker"])
                remove_owned(folder)
                removed += 1
            if removed:
                self.prune()
            return removed

    def prune(self) -> None:
        """Let every mirror forget worktrees whose folder is gone."""
        for mirror in self.mirrors.glob("*.git"):
            prune(mirror)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[bool]:
        with open(self.work / ".sweep.lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True


def prune(mirror: Path) -> None:
    """Let ``mirror`` forget worktrees whose folder is gone (under the mirror's lock: git
    does not guard its list of worktrees against concurrent writers)."""
    with mirror_lock(mirror), contextlib.suppress(GitError):
        git(["--git-dir", str(mirror), "worktree", "prune"])


def remove_owned(folder: Path) -> None:
    """Remove an owned folder, its owner record last: a process killed half-way through
    (a worker whose driver died) leaves a folder that still says whose it was, swept as
    soon as that process is gone, not one that waits :data:`ABANDONED` seconds."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.name == "owner":
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    shutil.rmtree(folder, ignore_errors=True)


def _abandoned(folder: Path) -> bool:
    """A scratch folder whose owner died between making it and writing ``owner``."""
    try:
        made = folder.lstat()
    except OSError:
        return False
    return (folder.is_dir() and not folder.is_symlink() and "." in folder.name
            and not folder.name.startswith(".") and time.time() - made.st_mtime > ABANDONED
            and not (folder / "owner").exists())


def _owner(folder: Path) -> dict[str, Any] | None:
    """The owner record of a scratch folder; None for what is not one (or is being made)."""
    if not folder.is_dir() or folder.is_symlink():
        return None
    try:
        owner = json.loads((folder / "owner").read_text())
    except (OSError, ValueError):
        return None
    ok = (isinstance(owner, dict) and isinstance(owner.get("pid"), int)
          and all(isinstance(owner.get(k), str) for k in ("start", "marker", "host")))
    return owner if ok else None
