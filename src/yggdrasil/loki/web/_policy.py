"""How much and how long a web tool may fetch; which addresses is ``netproxy``'s policy."""

from __future__ import annotations

from dataclasses import dataclass

from ..netproxy import OPT_IN, AddressPolicy, Resolver, resolve_host

__all__ = ["OPT_IN", "AddressPolicy", "Limits", "Resolver", "resolve_host"]


@dataclass(frozen=True)
class Limits:
    """Bounds of one web tool call. Sizes count bytes after content decoding."""

    max_page_bytes: int = 5 << 20  # web_fetch
    max_file_bytes: int = 50 << 20  # web_table, web_image
    connect: float = 10.0  # seconds per connection attempt
    read: float = 30.0  # seconds of silence while waiting for bytes
    total: float = 60.0  # seconds for the whole call, redirects included
    redirects: int = 5
