"""The web_* tools (internal): fetch a page, preview a remote table, inspect an image.

Owns the guarded transport that checks every address at connect time against the
address policy (``netproxy``'s: no private, loopback or metadata addresses unless opted
in), capped and decoded downloads, and page text. httpx, trafilatura and pillow (extra
``web``) are imported when a tool first runs. Imports ``files`` (Root,
``Files.write_bytes`` for ``save``), ``netproxy`` (the policy), ``yggdrasil.io`` (table
previews) and ``errors``.
"""

from __future__ import annotations

from ._page import MAX_LINKS
from ._policy import AddressPolicy, Limits
from ._tools import Web

__all__ = ["MAX_LINKS", "AddressPolicy", "Limits", "Web"]
