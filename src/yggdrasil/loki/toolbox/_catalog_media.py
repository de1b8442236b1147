"""read_file's reach into images, PDFs, notebooks and office documents (``media/``), and
edit_notebook, in the model's words.

read_file stays the one reader: a file whose first bytes say it is an image, a PDF, a
notebook or an office document goes to ``MediaReader``; anything else to the text reader
it wraps, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from annotated_types import Ge, MaxLen

from ..code import MAX_NAME
from ..errors import ToolError
from ..files import Files
from ..media import MediaReader
from ..results import DocumentRead, FileRead, ImageRead, NotebookEdited, NotebookRead, PdfRead
from ._tool import Tool

__all__ = ["edit_notebook_tool", "with_media"]

_MEDIA = ("Images (PNG, JPEG, GIF, WebP, BMP) are shown as pictures, PDFs as text per page, "
          "notebooks (.ipynb) as cells with ids and outputs, .docx/.pptx/.xlsx as Markdown; "
          ".html/.htm as source, or as Markdown with rendered=true.")


def with_media(read_file: Tool, files: Files, media: MediaReader | None) -> Tool:
    """``read_file`` that also reads media files (itself when ``media`` is None)."""
    if media is None:
        return read_file
    text_read = read_file.run

    def read(path: str, start: Annotated[int, Ge(1)] = 1, end: Annotated[int, Ge(0)] = 0,
             symbol: Annotated[str, MaxLen(MAX_NAME)] = "", pages: Annotated[str, MaxLen(40)] = "",
             as_images: bool = False, rendered: bool = False,
             ) -> FileRead | ImageRead | PdfRead | NotebookRead | DocumentRead:
        if rendered and (symbol.strip() or start != 1 or end != 0):
            raise ToolError("rendered shows the whole page as Markdown (cut at "
                            f"{media.limits.document_chars:,} characters); start, end and "
                            "symbol apply to the source: leave them out", category="argument")
        if rendered or (not symbol.strip() and not path.strip().startswith("output://")):
            shown = media.read(files, path, pages, as_images, rendered)
            if shown is not None:
                return shown
        return text_read(path, start, end, symbol)

    read.__name__ = "read_file"
    params = {**read_file.params,
              "pages": f"PDF pages to show, e.g. '3-7' or '4' (default the first "
                       f"{media.limits.pdf_pages}; at most {media.limits.pdf_pages} a call); "
                       "for a notebook, cells by index ('40-59')",
              "as_images": "PDF: show the pages as images (for scans and drawings); notebook: "
                           "show image outputs as images (default false)",
              "rendered": "HTML: show the page as Markdown text (headings, links, lists, "
                          "tables) instead of its source (default false)"}
    return Tool("read_file", f"{read_file.description} {_MEDIA}", params, read,
                title=read_file.title)


def edit_notebook_tool(files: Files, media: MediaReader,
                       checked: Callable[[Callable[..., Any]], Callable[..., Any]],
                       ) -> Tool:
    def edit_notebook(path: str, cell_id: str, new_source: str = "",
                      cell_type: Literal["", "code", "markdown", "raw"] = "",
                      mode: Literal["replace", "insert", "delete"] = "replace",
                      ) -> NotebookEdited:
        return media.edit_notebook(files, path, cell_id, new_source, cell_type, mode)

    return Tool(
        "edit_notebook", "Change one cell of a Jupyter notebook (.ipynb): replace its source, "
        "insert a new cell after it, or delete it. The notebook is checked with nbformat "
        "before it is written; ids and metadata are kept, a replaced code cell's outputs "
        "cleared. read_file shows the cells' ids.",
        {"path": "the notebook, relative to the root",
         "cell_id": "the cell's id as read_file shows it (id=...); for insert, the new cell "
                    "goes after it ('' inserts at the start)",
         "new_source": "the cell's new source (replace, insert)",
         "cell_type": "code, markdown or raw: the new cell's type (insert; default code), or "
                      "a new type for the replaced cell (default: unchanged)",
         "mode": "replace (default), insert or delete"},
        checked(edit_notebook), mutates=True, title="Edit a notebook cell")
