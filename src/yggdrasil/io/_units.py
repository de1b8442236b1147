"""Sizes as people read them; shared by yggdrasil.io and the loki observations."""

from __future__ import annotations


def human_size(n: float) -> str:
    """``512 bytes``, ``1.5 KB``, ``2.0 GB`` (binary multiples)."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"
