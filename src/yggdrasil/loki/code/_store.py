"""The code index on disk, so a new process (``loki call``, a new MCP server) starts warm.

One JSON file per root under the user's cache folder (``$XDG_CACHE_HOME`` or
``~/.cache``, then ``yggdrasil-loki/code/``), named by a hash of the root's path; it
records the protected globs it was made under, and one made under other protection is
never served (it is rebuilt and rewritten). Never inside the root: when the cache folder is inside it (a root of ``~``),
nothing is stored. The file is a cache, not a source of truth: each entry is used only
while the file's size, mtime, ctime and inode still match, and a file that does not load
(another version, damaged, edited by hand) is ignored and rewritten.

The cache is the user's, never the commands': the toolbox hides its folder from them (as
it hides credential stores). Hiding is not enough when the user makes the cache folder
writable to commands (``writable=["~/.cache"]`` for pip's and npm's caches), or when
another toolbox does: so every file is signed (HMAC-SHA256) with a key kept in a file of
the user's configuration folder, which no writable grant reaches and commands never see
(the caller passes it only then), and a file whose signature does not match is never
served. A file that any toolbox would protect by default
(``DEFAULT_PROTECTED``: ``.env``, ``secrets.*``, keys...) or that this one protects is
never written to it, so a constant's value from ``secrets.py`` indexed by a toolbox with
``protect=()`` stays in that process's memory.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files import DEFAULT_PROTECTED, Protection
from ..search import protection
from ._extract import Outline, Symbol
from ._index import Entry, key_fields, make_key

__all__ = ["CACHE_KEY", "Store", "cache_folder", "cache_hidden", "cache_key"]

CACHE_KEY = "code-cache.key"  # the file name of the signing key in the user's config folder
_KEY_BYTES = 32

_FORMAT = 4  # raise when the entries or what is extracted changes (4: signed files)


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "yggdrasil-loki" / "code"


def _version() -> str:
    try:
        from importlib.metadata import version

        grammars = version("tree-sitter-language-pack")
    except Exception:  # not installed: nothing parsed, nothing worth keeping apart
        grammars = "none"
    return f"{_FORMAT}/{grammars}"


_DEFAULT = protection(DEFAULT_PROTECTED)


def cache_hidden(root: Path) -> list[str]:
    """The cache folder, to hide from the commands of a toolbox rooted at ``root`` (none
    when it lies inside the root: then nothing is stored there)."""
    folder = Path(os.path.realpath(cache_folder()))
    return [] if folder == root or folder.is_relative_to(root) else [str(folder)]


def cache_key(path: Path) -> bytes:
    """The signing key in ``path``, made (random, 0600, in a 0700 folder) when missing.
    Raises OSError when it cannot be read or made, ValueError when it is not a key."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(_KEY_BYTES))
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        key = fh.read(_KEY_BYTES + 1)
    if len(key) != _KEY_BYTES:
        raise ValueError(f"{path} is not a code cache key ({len(key)} bytes)")
    return key


@dataclass(frozen=True)
class Store:
    path: Path  # the JSON file of one root
    root: str
    key: bytes = field(repr=False)  # signs the file: only what this user's toolboxes wrote
    protect: Protection | None = None  # what the toolbox writing it protects

    @classmethod
    def for_root(cls, root: Path, key: bytes, protect: Protection | None = None,
                 ) -> Store | None:
        """The store of ``root`` under ``protect``, signed with ``key``; None when the
        cache folder would be inside the root."""
        folder = Path(os.path.realpath(cache_folder()))
        if folder == root or folder.is_relative_to(root):
            return None
        name = hashlib.sha256(os.fsencode(root)).hexdigest()[:24]
        return cls(folder / f"{name}.json", str(root), key, protect)

    def _mac(self, body: bytes) -> bytes:
        return hmac.new(self.key, body, hashlib.sha256).hexdigest().encode("ascii")

    def _globs(self) -> list[str]:
        return list(self.protect.globs) if self.protect else []

    def keeps(self, rel: str) -> bool:
        """Whether ``rel`` may be written: no toolbox protects it by default, nor this one."""
        if _DEFAULT.covering(rel, False) is not None:
            return False
        return self.protect is None or self.protect.covering(rel, False) is None

    def load(self) -> dict[str, Entry]:
        try:
            with open(self.path, "rb") as fh:
                mac, _, body = fh.read().partition(b"\n")
            if not hmac.compare_digest(mac, self._mac(body)):
                return {}  # not written by this user's toolboxes (a command's): never served
            data = json.loads(body)
            if data.get("version") != _version() or data.get("root") != self.root:
                return {}
            if data.get("protect", []) != self._globs():
                return {}  # made under other protection: never served
            return {rel: _entry(raw) for rel, raw in data["files"].items()}
        except Exception:  # a damaged or foreign cache file is ignored, then rewritten
            return {}

    def save(self, entries: dict[str, Entry]) -> None:
        data = {"version": _version(), "root": self.root, "protect": self._globs(),
                "files": {rel: _raw(e) for rel, e in entries.items() if self.keeps(rel)}}
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".index-", suffix=".tmp")
        try:
            body = json.dumps(data, separators=(",", ":")).encode("utf-8")
            with os.fdopen(fd, "wb") as fh:
                fh.write(self._mac(body) + b"\n" + body)
            os.replace(tmp, self.path)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp)
            raise


def _raw(entry: Entry) -> list[Any]:
    outline = entry.outline
    parsed = None if outline is None else [
        outline.language, outline.lines, list(outline.errors), outline.dropped, outline.cut,
        [[s.kind, s.name, s.scope, s.signature, s.line, s.end, s.first, s.depth]
         for s in outline.symbols]]
    return [list(key_fields(entry.key)), entry.language, entry.names,
            base64.b64encode(entry.counts).decode("ascii"), entry.note, parsed]


def _entry(raw: list[Any]) -> Entry:
    key, language, names, counts, note, parsed = raw
    outline = None
    if parsed is not None:
        lang, lines, errors, dropped, cut, symbols = parsed
        outline = Outline.of(str(lang), int(lines),
                             [Symbol(str(k), str(n), str(sc), str(sig), int(li), int(e), int(f),
                                     int(d)) for k, n, sc, sig, li, e, f, d in symbols],
                             tuple(int(x) for x in errors), int(dropped), int(cut))
    size, mtime, ctime, inode = (int(x) for x in key)
    key = make_key(size, mtime, ctime, inode)
    names, counts = (None if names is None else str(names)), base64.b64decode(counts)
    if names is not None and names.count("\n") - 1 != len(counts):
        raise ValueError("names and counts do not line up")
    return Entry(key, str(language), names, counts, outline, str(note))
