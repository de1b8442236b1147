"""The files grep would search, for other hands that read files one by one (code/).

Same start-path checks, same walk, same ignore rules and the same skipped counts as
``grep``, so a tool built on it skips exactly what grep skips and says so the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..files import Root
from ._found import Skips
from ._search import Search
from ._walk import Visit, Walker


@dataclass
class Listing:
    """The files under ``start`` (root-relative), walked lazily; ``skips`` fills as it goes."""

    start: str
    skips: Skips
    visits: Iterator[Visit]

    def skipped(self) -> dict[str, int]:
        return self.skips.counts()


def list_files(root: Root, path: str = ".", *, include_ignored: bool = False) -> Listing:
    """The regular files grep would search under ``path`` (a file or folder), in walk order.

    Raises PathError for a path outside the root, missing, inside ``.git`` or special.
    Each ``Visit`` holds the open descriptor of its folder, valid until the next one.
    """
    query = Search(root)._query(path, include_ignored)
    skips = Skips()
    return Listing(query.start, skips, Walker(root, query, skips).files())
