"""Images, PDFs, notebooks and office documents for read_file, and edit_notebook (internal).

Owns telling such a file from text by its first bytes, opening it through ``Root`` and
handing the descriptor to the toolbox's fenced, limited media worker (``sandbox.FencedWorker``
running ``_worker_ops``: Pillow, pypdfium2, nbformat, python-docx/-pptx, openpyxl, from the
``media`` extra), with caps on pixels, pages, characters and unzipped bytes; the results
(``results``: image parts, pages, cells, Markdown). Imports ``files``, ``errors``,
``results`` and ``sandbox``; the parsers only in the worker.

The names below are loaded on first use: the worker imports ``_worker_ops`` through this
package, and must not pay for the agent's side (pydantic, the results) at every start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._reader import MediaLimits, MediaReader, cell_span, kind_of, page_span

__all__ = ["MediaLimits", "MediaReader", "cell_span", "kind_of", "page_span"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("._reader", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
