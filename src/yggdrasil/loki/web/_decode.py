"""Content decoding for the web tools, with the output bounded before it is made.

httpx inflates a whole network chunk, layer after layer, before a cap can look at it, so
a 1 KB body can become gigabytes. We ask for gzip and deflate only, refuse stacked or
other codings, read the raw bytes and inflate them with an output limit, so memory stays
within the cap plus one chunk whatever the compression ratio.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Protocol

from ..errors import ToolError

ACCEPT_ENCODING = "gzip, deflate"  # what inflated() decodes; never br or zstd
DECODED = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}
INFLATE_STEP = 1 << 16  # most decoded bytes made per zlib call


class Headers(Protocol):
    def get_list(self, key: str, split_commas: bool = ...) -> list[str]: ...


def content_coding(headers: Headers, url: str) -> str:
    """'gzip', 'deflate' or '' (none): the one coding we decode; ToolError for the rest."""
    codings = [c.strip().lower() for c in headers.get_list("content-encoding", split_commas=True)]
    codings = [c for c in codings if c not in ("", "identity")]
    if len(codings) > 1:
        raise ToolError(f"{url} stacks {len(codings)} content codings ({', '.join(codings)}); "
                        "only one layer of gzip or deflate is decoded, since stacked layers "
                        "can hide a decompression bomb")
    if codings and codings[0] not in DECODED:
        raise ToolError(f"{url} is sent with content coding {codings[0]!r}, which the web "
                        "tools do not decode; only gzip and deflate are asked for and accepted")
    return DECODED[codings[0]] if codings else ""


def inflated(raw: Iterable[bytes], coding: str, limit: int, url: str) -> Iterator[bytes]:
    """The decoded body in chunks, at most ``limit + 1`` bytes in all, whatever the ratio."""
    if not coding:
        yield from raw
        return
    head = b""  # the first two bytes tell a zlib 'deflate' body from a raw one
    inflater: zlib._Decompress | None = None
    left = limit + 1
    for chunk in raw:
        if inflater is None:
            head += chunk
            if len(head) < 2:
                continue
            inflater, chunk = _inflater(coding, head), head
        try:
            while chunk and left > 0:
                out = inflater.decompress(chunk, min(left, INFLATE_STEP))
                left -= len(out)
                chunk = inflater.unconsumed_tail
                yield out
        except zlib.error as exc:
            raise ToolError(f"{url} sent a body that is not valid {coding} ({exc}); "
                            "try another source") from None
        if left <= 0 or inflater.eof:
            return  # over the cap, or past the end of the stream (trailing bytes ignored)


def _inflater(coding: str, head: bytes) -> zlib._Decompress:
    """A zlib decompressor: gzip or zlib (header detected), else raw deflate, as browsers do."""
    zlib_header = head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
    raw_deflate = coding == "deflate" and not zlib_header
    return zlib.decompressobj(wbits=-zlib.MAX_WBITS if raw_deflate else 32 + zlib.MAX_WBITS)
