"""Model tokens: counted by tiktoken's o200k_base where it is installed with its table,
estimated (1 token per 4 bytes of UTF-8, rounded up) where not.

tiktoken downloads its tables on first use, which must not happen in the middle of a
tool call (offline machines, a fence without network): the table is used only when it is
already in tiktoken's cache. A text whose UTF-8 bytes fit a budget fits it in any count
(a token is at least one byte), so most texts are never counted at all.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from typing import Any

__all__ = ["ESTIMATE", "Tokens", "tokens"]

ENCODING = "o200k_base"
_URL = f"https://openaipublic.blob.core.windows.net/encodings/{ENCODING}.tiktoken"
ESTIMATE = "an estimate: 1 token per 4 bytes of UTF-8"


def _cached_table() -> bool:
    """tiktoken's table is in its cache (so loading it downloads nothing)."""
    folder = (os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
              or os.path.join(tempfile.gettempdir(), "data-gym-cache"))
    return bool(folder) and os.path.isfile(
        os.path.join(folder, hashlib.sha1(_URL.encode()).hexdigest()))


class Tokens:
    """Counts and cuts text in model tokens (see the module docstring)."""

    def __init__(self) -> None:
        self._encoding: Any = None
        self._looked = False
        self._lock = threading.Lock()

    def _encoder(self) -> Any:
        if not self._looked:
            with self._lock:
                if not self._looked:
                    self._encoding = _load()
                    self._looked = True
        return self._encoding

    @property
    def counter(self) -> str:
        """Which count is used: ``o200k_base (tiktoken)`` or the estimate."""
        return f"{ENCODING} (tiktoken)" if self._encoder() is not None else ESTIMATE

    def count(self, text: str) -> int:
        encoding = self._encoder()
        if encoding is None:
            return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4
        return len(encoding.encode(text, disallowed_special=()))

    def fits(self, text: str, budget: int) -> bool:
        if len(text) <= budget // 4 or len(text.encode("utf-8", "surrogatepass")) <= budget:
            return True
        return self.count(text) <= budget

    def head(self, text: str, budget: int) -> str:
        """The longest start of ``text`` within ``budget`` tokens, ended at a line end
        when one is in its last half."""
        return _at_line(self._take(text, budget, end=False), end=False)

    def tail(self, text: str, budget: int) -> str:
        """The longest end of ``text`` within ``budget`` tokens, started at a line start
        when one is in its first half."""
        return _at_line(self._take(text, budget, end=True), end=True)

    def _take(self, text: str, budget: int, *, end: bool) -> str:
        if budget <= 0:
            return ""
        if self.fits(text, budget):
            return text
        encoding = self._encoder()
        if encoding is None:
            data = text.encode("utf-8", "surrogatepass")
            part = data[-budget * 4:] if end else data[: budget * 4]
            return part.decode("utf-8", "ignore")
        ids = encoding.encode(text, disallowed_special=())
        part = encoding.decode(ids[-budget:] if end else ids[:budget])
        return part.lstrip("\ufffd") if end else part.rstrip("\ufffd")


def _at_line(part: str, *, end: bool) -> str:
    if end:
        cut = part.find("\n")
        return part[cut + 1:] if 0 <= cut < len(part) // 2 else part
    cut = part.rfind("\n")
    return part[: cut + 1] if cut >= len(part) // 2 else part


def _load() -> Any:
    if not _cached_table():
        return None
    try:
        import tiktoken

        return tiktoken.get_encoding(ENCODING)
    except Exception:  # an old tiktoken, a damaged cache: the estimate
        return None


tokens = Tokens()  # one per process: the table is loaded once
