"""What this toolbox last saw of each file, so that a change based on a stale view is refused.

``read_file`` and every write or edit note the file's signature (inode, size, mtime and
ctime, as ``stat`` gives them). Before an edit or overwrite, a file whose signature has
changed since (another process, the user, a formatter, a command the agent ran) is
refused until it is read again. A file the toolbox never read can still be changed: the
edit matcher then guards it by content.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..errors import ToolError

__all__ = ["Views"]


@dataclass(frozen=True)
class _Signature:
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> _Signature:
        return cls(st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Views:
    def __init__(self) -> None:
        self._seen: dict[str, _Signature] = {}

    def saw(self, rel: str, st: os.stat_result | None) -> None:
        """The model now knows ``rel`` as it is (None: it is gone)."""
        if st is None:
            self._seen.pop(rel, None)
        else:
            self._seen[rel] = _Signature.of(st)

    def check(self, rel: str, st: os.stat_result | None) -> None:
        """Raise when ``rel`` changed since it was last read or written here."""
        seen = self._seen.get(rel)
        if seen is None or st is None:
            return
        now = _Signature.of(st)
        if now != seen:
            raise ToolError(f"{rel} changed since you last read it ({_how(seen, now)}); "
                            "read it again")


def _how(seen: _Signature, now: _Signature) -> str:
    if now.ino != seen.ino:
        return "another file was put in its place"
    if now.size != seen.size:
        return f"it is now {now.size} bytes; it was {seen.size}"
    if now.mtime_ns != seen.mtime_ns:
        return f"it was modified at {time.strftime('%H:%M:%S', time.localtime(now.mtime_ns / 1e9))}"
    return "its status changed: permissions, owner or links"
