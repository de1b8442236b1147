"""What the proxy refused for one command, in the observation's own ``proxy:`` section.

The proxy appends each refusal, one whole line, to a file beside the command's scratch
folder (in the agent's temp folder, which commands do not see; the launcher names it
when it hands its listener over), before it answers the command, never to the
command's stderr, where it could split a line the command writes itself (``cloki proxy:
refused ...url: (56)``). The shell reads what came since the last read into the
observation, after ``stderr:``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["ProxyNotes"]

MAX_NOTES = 16_384  # bytes of refusals shown per observation; the rest is counted


class ProxyNotes:
    """The refusals file of the command whose scratch folder is ``scratch``."""

    def __init__(self, scratch: Path) -> None:
        self.path = scratch.with_name(scratch.name + ".proxy-notes")
        self._seen = 0
        self._left = ""  # read when the command ended, before the file was removed

    def create(self) -> str:
        """Make the (empty, private) file for the proxy to append to; its path."""
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        os.close(fd)
        return str(self.path)

    def take(self) -> str:
        """The whole lines appended since the last take (capped)."""
        if self._left:
            text, self._left = self._left, ""
            return text
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._seen)
                data = fh.read()
        except OSError:
            return ""
        data = data[: data.rfind(b"\n") + 1]  # a line still being written waits
        self._seen += len(data)
        text = data[:MAX_NOTES].decode("utf-8", "replace")
        if len(data) > MAX_NOTES:
            text += f"[... {len(data) - MAX_NOTES} more bytes of refusals not shown]\n"
        return text

    def finish(self) -> None:
        """The command ended: keep what was not read yet, remove the file."""
        self._left += self.take()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
