"""How big a message ``loki mcp`` accepts, and the error that answers a bigger one.

One limit for both transports: a JSON-RPC line on stdin, a request body over HTTP. A
message over it is never held whole (stdin drops it chunk by chunk; HTTP stops reading
the body), so a hostile client cannot grow the server's memory past the limit.
"""

from __future__ import annotations

import json
import re

__all__ = ["INVALID_REQUEST", "MAX_MESSAGE_BYTES", "request_id", "too_large"]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # 16 MiB: a large file written whole fits, with room
INVALID_REQUEST = -32600  # JSON-RPC: the message is not a valid request

_COLON = re.compile(r"\s*:\s*")


def too_large(head: bytes, size: int, limit: int) -> tuple[str, int | str | None]:
    """The JSON-RPC error line for a message of ``size`` bytes (or more) whose first
    bytes are ``head``, and the request id it answers (None when the head names none)."""
    rid = request_id(head)
    error = {"jsonrpc": "2.0", "id": rid, "error": {
        "code": INVALID_REQUEST, "data": {"limit": limit},
        "message": f"message too large: {size} bytes or more, over the limit of {limit} "
                   f"bytes ({limit // (1024 * 1024)} MiB); send smaller messages "
                   "(e.g. write a big file in parts)"}}
    return json.dumps(error), rid


def request_id(head: bytes) -> int | str | None:
    """The top-level ``"id"`` of a JSON object from its first bytes, if they hold it.

    Strings are read whole (a key inside a string is not a key) and nesting is counted,
    so an ``"id"`` inside ``params`` is not taken for the request's.
    """
    text = head.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    depth, i = 0, 0
    while i < len(text):
        char = text[i]
        if char == '"':
            try:
                key, i = decoder.raw_decode(text, i)
            except ValueError:
                return None  # the head ends inside this string
            colon = _COLON.match(text, i)
            if depth == 1 and key == "id" and colon:
                return _id_value(decoder, text, colon.end())
            continue
        depth += (char in "{[") - (char in "}]")
        i += 1
    return None


def _id_value(decoder: json.JSONDecoder, text: str, at: int) -> int | str | None:
    try:
        value, _ = decoder.raw_decode(text, at)
    except ValueError:
        return None
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None
