"""Which files define a name: the index ``find_symbol`` answers from without reading files.

Keys are definition names lowercased (``find_symbol`` matches exact case first, else
ignoring case, and ``NameQuery.match`` decides which). A name defined in one file maps
to that file's path (a string, the common case, costing no list); in several, to a list.
Kept current by :class:`Index` as it remembers and forgets entries.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Iterable

from ._extract import Outline
from ._match import NameQuery

__all__ = ["NameIndex"]


class NameIndex:
    def __init__(self) -> None:
        self.files: dict[str, str | list[str]] = {}

    def add(self, rel: str, outline: Outline | None) -> None:
        for name in _names(outline):
            have = self.files.get(name)
            if have is None:
                self.files[name] = rel
            elif isinstance(have, str):
                self.files[name] = [have, rel]
            else:
                have.append(rel)

    def remove(self, rel: str, outline: Outline | None) -> None:
        for name in _names(outline):
            have = self.files.get(name)
            if have == rel:
                del self.files[name]
            elif isinstance(have, list):
                if rel in have:
                    have.remove(rel)
                if len(have) == 1:
                    self.files[name] = have[0]

    def files_for(self, query: NameQuery) -> set[str]:
        """The files defining a name ``query`` may match (a superset: match() decides)."""
        want = query.parts[-1].lower()
        if not query.is_glob:
            return set(_each(self.files.get(want)))
        test = re.compile(fnmatch.translate(want)).match
        found: set[str] = set()
        for name, rels in self.files.items():
            if test(name):
                found.update(_each(rels))
        return found


def _names(outline: Outline | None) -> set[str]:
    if outline is None:
        return set()
    # interned: one string per name across files, and the same as the ranker's when the
    # name is lowercase already (most are)
    return {sys.intern(name.lower()) for name in outline.names()}


def _each(rels: str | list[str] | None) -> Iterable[str]:
    if rels is None:
        return ()
    return (rels,) if isinstance(rels, str) else rels
