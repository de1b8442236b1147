"""The spill folder: the whole of every output a tool had to cut, for read_file and grep.

Each toolbox (a session) gets a folder of its own, ``<session>/``, under the user's cache
folder (``$XDG_CACHE_HOME/loki/outputs``, or the system temp folder when the cache lies
inside the root), never inside the root; it is hidden from commands by the fence (the
toolbox adds it to the hidden paths), mode 0700. An output is kept as ``<n>`` in it and
named to the model by an id, ``output://<session>/<n>``: an id of another session, or
anything else that is not exactly such an id (``../``, a path) is refused.

What is kept expires: a session's folder is removed once nothing was written to it for
``max_age`` seconds, and when all folders together hold more than ``max_total`` bytes the
oldest outputs go first (a session's own open outputs never). One output keeps at most
``max_bytes`` (its start; the observation says so). A sweep reads every folder, so it runs
at most once a minute across the toolboxes sharing the folder (a ``.swept`` file says when
the last one ran), and sooner only when a session has kept a sixteenth of ``max_total``
since its own last sweep; a session that kept nothing removes its folder when closed.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ID_PATTERN", "Spill", "SpillError", "Spilled", "spill_base"]

ID_PATTERN = re.compile(r"output://([0-9a-f]{8})/([1-9][0-9]{0,8})")
_SESSION = re.compile(r"[0-9a-f]{8}")
_SWEEP_EVERY = 60.0  # seconds between sweeps of the shared folder (each reads all of it)
_SWEPT = ".swept"  # its mtime: when the last sweep ran


class SpillError(ValueError):
    """An id that is not one of this session's kept outputs; the message says why."""


def spill_base(root: Path | None = None) -> Path:
    """Where sessions' spill folders live: the user's cache, or the temp folder when
    the cache lies inside ``root``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    base = Path(os.path.realpath(cache)) / "loki" / "outputs"
    if root is not None and _inside(base, Path(os.path.realpath(root))):
        base = Path(os.path.realpath(tempfile.gettempdir())) / f"loki-outputs-{os.getuid()}"
    return base


def _inside(path: Path, top: Path) -> bool:
    return path == top or path.is_relative_to(top)


class Spilled:
    """One output being kept: bytes are written as they come, up to ``limit``."""

    def __init__(self, spill: Spill, number: int, path: Path, limit: int) -> None:
        self.spill, self.number, self.path, self.limit = spill, number, path, limit
        self.size = 0  # bytes written
        self.dropped = 0  # bytes past the limit, not kept
        self._fh = open(path, "wb", buffering=1 << 16)  # noqa: SIM115 - closed by close()

    @property
    def id(self) -> str:
        return f"output://{self.spill.session}/{self.number}"

    def write(self, data: bytes) -> None:
        room = self.limit - self.size
        if room <= 0 or self._fh.closed:
            self.dropped += len(data)
            return
        part = data[:room]
        self._fh.write(part)
        self.size += len(part)
        self.dropped += len(data) - len(part)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        self.spill.closed(self)

    def discard(self) -> None:
        """Not needed after all (the output was not cut): removed."""
        if not self._fh.closed:
            self._fh.close()
        self.path.unlink(missing_ok=True)
        self.spill.closed(self)


@dataclass(frozen=True)
class SpillLimits:
    max_bytes: int = 256 << 20
    max_total: int = 1 << 30
    max_age: float = 3 * 86400.0


class Spill:
    """The spill folder of one session (see the module docstring). The folder is made,
    and old ones swept, on the first output kept."""

    def __init__(self, base: Path, limits: SpillLimits | None = None) -> None:
        self.base = base
        self.session = secrets.token_hex(4)
        self.limits = limits or SpillLimits()
        self._count = 0
        self._open: set[int] = set()
        self._lock = threading.Lock()
        self._made = False
        self._unswept = 0  # bytes this session kept since its last sweep

    @property
    def folder(self) -> Path:
        return self.base / self.session

    def prepare(self) -> bool:
        """Make the folder now (so a fence made from here on hides it), and sweep what
        expired; False when it cannot be made (nothing is kept then)."""
        with self._lock:
            try:
                if not self._made:
                    self._make()
            except OSError:
                return False
        return True

    def new(self) -> Spilled | None:
        """A new output to write; None when the folder cannot be made."""
        with self._lock:
            try:
                if not self._made:
                    self._make()
                self._count += 1
                number = self._count
                path = self.folder / str(number)
                spilled = Spilled(self, number, path, self.limits.max_bytes)
            except OSError:
                return None
            self._open.add(number)
        return spilled

    def keep(self, text: str) -> str | None:
        """Keep ``text`` whole; its id (None when it cannot be kept)."""
        spilled = self.new()
        if spilled is None:
            return None
        spilled.write(text.encode("utf-8", "surrogateescape"))
        spilled.close()
        return spilled.id

    def closed(self, spilled: Spilled) -> None:
        with self._lock:
            self._open.discard(spilled.number)
            self._unswept += spilled.size
            due = self._unswept >= self.limits.max_total // 16
        self.sweep(force=due)

    def _make(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder.mkdir(mode=0o700)
        self._made = True
        self.sweep()

    def path_of(self, output_id: str) -> Path:
        """The file of one of this session's outputs; SpillError says why not."""
        match = ID_PATTERN.fullmatch(output_id.strip())
        if match is None:
            raise SpillError(f"{output_id!r} is not an output id; ids look like "
                             f"output://{self.session}/1 and come from a cut output's note")
        session, number = match.groups()
        if session != self.session:
            raise SpillError(f"{output_id} is not an output of this session (its outputs are "
                             f"output://{self.session}/<n>)")
        path = self.folder / number
        if not path.is_file():
            raise SpillError(f"{output_id} is not kept (any more): outputs of this session "
                             f"are output://{self.session}/1 to /{self._count}, and old ones "
                             "expire")
        return path

    def sweep(self, *, force: bool = False) -> None:
        """Remove other sessions' folders past the age limit, then the oldest outputs
        while all folders together hold more than the size limit; unless ``force``, not
        when a sweep of the folder ran less than a minute ago."""
        marker = self.base / _SWEPT
        now = time.time()
        if not force and 0 <= now - _mtime(marker) < _SWEEP_EVERY:
            return
        self._unswept = 0  # (no lock: _make sweeps while holding it)
        try:
            marker.touch(mode=0o600)  # (its mtime: now)
            folders = [p for p in self.base.iterdir() if _SESSION.fullmatch(p.name)]
        except OSError:
            return
        files: list[tuple[float, int, Path]] = []
        for folder in folders:
            try:
                entries = [(e, e.stat()) for e in folder.iterdir()]
            except OSError:
                continue
            newest = max((st.st_mtime for _, st in entries), default=_mtime(folder))
            if folder.name != self.session and now - newest > self.limits.max_age:
                shutil.rmtree(folder, ignore_errors=True)
                continue
            files += [(st.st_mtime, st.st_size, e) for e, st in entries]
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files, key=lambda f: f[0]):
            if total <= self.limits.max_total:
                break
            if path.parent.name == self.session and path.name.isdigit() \
                    and int(path.name) in self._open:
                continue
            path.unlink(missing_ok=True)
            total -= size

    def close(self) -> None:
        """What was kept stays until it expires (a later look at an output of a closed
        session's transcript may still read it); a folder that holds nothing goes now (made
        again if an output is kept later)."""
        with self._lock:
            if self._made and self._count == 0:
                try:
                    self.folder.rmdir()
                    self._made = False
                except OSError:
                    pass


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
