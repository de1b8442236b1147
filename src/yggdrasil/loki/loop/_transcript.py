"""The run's JSONL transcript, written line by line as the run goes."""

from __future__ import annotations

import os
from typing import IO, Any

from ..files import json_text

__all__ = ["Transcript"]


class Transcript:
    """A JSONL log written line by line as the run goes (nothing when ``path`` is None)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._file: IO[str] | None = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115

    def write(self, kind: str, **fields: Any) -> None:
        if self._file is not None:
            self._file.write(json_text({"type": kind, **fields}) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
