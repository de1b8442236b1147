"""Put tiktoken's o200k_base table in its cache, from the npm package js-tiktoken.

tiktoken downloads its tables from a host CI cannot reach; js-tiktoken (npm) ships the
same ranks in a compact form. This rebuilds tiktoken's file from it and writes it where
tiktoken looks, only when its SHA-256 is the one tiktoken expects (so the table is the
real one, byte for byte). Usage: python .ci/tiktoken_table.py <js-tiktoken/dist/ranks/o200k_base.js>
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile

URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # tiktoken's own


def table(source: str) -> bytes:
    with open(source, encoding="utf-8") as fh:
        text = fh.read()
    ranks = json.loads(text[text.index("{"): text.rindex("}") + 1])["bpe_ranks"].split(" ")
    lines, rank, i = [], 0, 0
    while i < len(ranks):
        if ranks[i] == "!":  # "! <offset>": the tokens that follow count up from it
            rank, i = int(ranks[i + 1]), i + 2
            continue
        lines.append(f"{ranks[i]} {rank}\n")
        rank, i = rank + 1, i + 1
    return "".join(lines).encode()


def main(source: str) -> int:
    data = table(source)
    if hashlib.sha256(data).hexdigest() != SHA256:
        print("tiktoken_table: the rebuilt table is not tiktoken's; not installed", file=sys.stderr)
        return 1
    folder = (os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
              or os.path.join(tempfile.gettempdir(), "data-gym-cache"))
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, hashlib.sha1(URL.encode()).hexdigest())
    with open(path, "wb") as fh:
        fh.write(data)
    print(f"tiktoken_table: o200k_base in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
