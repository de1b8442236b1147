"""A griffe extension for the API reference: Sphinx roles in docstrings read as code.

The docstrings say :class:`Toolbox` or :func:`~yggdrasil.loki.engine.create_engine`, which
Markdown would show as typed; this turns each into `Toolbox` / `create_engine` (a leading
``~`` keeps the last name only, as Sphinx does), and a paragraph ending in ``::`` (reST's
"a literal block follows", which Markdown reads from the indentation alone) ends in ``:``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

LITERAL = re.compile(r"::$", re.MULTILINE)
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj|const):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            text = ROLE.sub(_code, obj.docstring.value)
            obj.docstring.value = LITERAL.sub(":", text)
