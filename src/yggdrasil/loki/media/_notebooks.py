"""Notebooks in the media worker: cells with ids, types, sources and outputs for
read_file, and one cell changed for edit_notebook (validated by nbformat; the agent writes
the text this returns). Worker side only.
"""

from __future__ import annotations

import base64
import io
import re
import warnings
from typing import Any

from ._decode import MediaError, cut_text, fitted_picture, open_image, read_all

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _text_of(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _load_notebook(fd: int, label: str, max_bytes: int, *, node: bool = False) -> Any:
    """The notebook as nbformat's dict (v4; an older one converted), read as plain JSON:
    nbformat.reads would validate it (slow on a big notebook) and quietly give new ids to
    cells whose ids repeat, where the file's own ids must stay as they are."""
    import json

    import nbformat

    data = read_all(fd, max_bytes, label)
    try:
        raw = json.loads(data)
    except UnicodeDecodeError:
        raise MediaError(f"{label} is not a notebook: it is not UTF-8 text") from None
    except ValueError as exc:
        raise MediaError(f"{label} is not a notebook: it is not JSON ({exc})"[:400]) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("cells", raw.get("worksheets")),
                                                    list):
        raise MediaError(f"{label} is not a notebook: its JSON has no list of cells")
    major = raw.get("nbformat")
    if major != 4:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return nbformat.reads(data.decode("utf-8"), as_version=4)  # v3 and older
        except Exception as exc:
            raise MediaError(f"{label} is a notebook of nbformat {major!r}, which cannot be "
                             f"read ({type(exc).__name__}: {exc})"[:400]) from None
    return nbformat.from_dict(raw) if node else raw  # NotebookNodes copy every dict


def _outputs(cell: Any, output_chars: int, as_images: bool, budget: list[int],
             max_width: int, max_height: int, max_pixels: int) -> dict[str, Any]:
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    pictures = 0
    for out in cell.get("outputs", []) or []:
        out = _dict(out)
        kind = out.get("output_type", "")
        if kind == "stream":
            texts.append(_text_of(out.get("text")))
        elif kind == "error":
            trace = "\n".join(_text_of(t) for t in out.get("traceback", []) or [])
            texts.append(_ANSI.sub("", trace) or f"{out.get('ename')}: {out.get('evalue')}")
        elif kind in ("execute_result", "display_data"):
            data = _dict(out.get("data"))
            picture = next((m for m in ("image/png", "image/jpeg", "image/gif")
                            if m in data), None)
            if picture:
                pictures += 1
                if as_images and budget[0] > 0:
                    budget[0] -= 1
                    try:
                        images.append(_output_image(data[picture], max_width, max_height,
                                                    max_pixels))
                    except MediaError as exc:
                        texts.append(f"[{picture} output not shown: {exc}]")
            if "text/plain" in data and not picture:
                texts.append(_text_of(data["text/plain"]))
            elif "text/markdown" in data:
                texts.append(_text_of(data["text/markdown"]))
    whole = "\n".join(t.rstrip("\n") for t in texts)
    joined, _ = cut_text(whole, output_chars)
    return {"outputs": [joined] if joined else [], "cut": len(whole) - len(joined),
            "images": pictures, "pictures": images}


def _output_image(data: Any, max_width: int, max_height: int, max_pixels: int) -> dict[str, Any]:
    try:
        raw = base64.b64decode(_text_of(data), validate=False)
    except ValueError:
        raise MediaError("an image output of the notebook is not base64") from None
    img = open_image(io.BytesIO(raw), max_pixels, "an image output")
    fmt = img.format
    img.load()
    img.format = fmt
    return fitted_picture(img, max_width, max_height)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def notebook(fds: list[int], label: str, first: int, last: int, max_bytes: int,
             max_cells: int, cell_chars: int, output_chars: int, as_images: bool,
             max_images: int, max_width: int, max_height: int, max_pixels: int,
             ) -> dict[str, Any]:
    """Cells ``first``-``last`` (0-based; ``last`` -1: up to ``max_cells``) with ids, types,
    sources and outputs (text cut per cell; picture outputs counted, or shown when
    ``as_images``)."""
    (fd,) = fds
    nb = _load_notebook(fd, label, max_bytes)
    meta = _dict(nb.get("metadata"))
    kernel = _dict(meta.get("kernelspec"))
    language = str(kernel.get("language") or kernel.get("name") or
                   _dict(meta.get("language_info")).get("name") or "")
    budget = [max_images]
    cells, images = [], []
    end = min(len(nb["cells"]), first + max_cells, last + 1 if last >= 0 else len(nb["cells"]))
    for index in range(first, end):
        cell = _dict(nb["cells"][index])
        source, _ = cut_text(_text_of(cell.get("source")), cell_chars)
        shown: dict[str, Any] = {"index": index, "id": str(cell.get("id") or f"#{index}"),
                                 "type": str(cell.get("cell_type", "?")), "source": source}
        if shown["type"] == "code":
            got = _outputs(cell, output_chars, as_images, budget, max_width, max_height,
                           max_pixels)
            images += got.pop("pictures")
            count = cell.get("execution_count")
            shown.update(got, execution_count=count if isinstance(count, int) else None)
        cells.append(shown)
    return {"language": language,
            "nbformat": f"{nb.get('nbformat')}.{nb.get('nbformat_minor', 0)}",
            "cells": cells, "total": len(nb["cells"]), "images": images}


def edit_notebook(fds: list[int], label: str, max_bytes: int, cell_id: str, new_source: str,
                  cell_type: str, mode: str) -> dict[str, Any]:
    """The notebook's new text after one cell edit, validated by nbformat; the agent writes
    it (this worker writes nothing)."""
    import nbformat

    (fd,) = fds
    nb = _load_notebook(fd, label, max_bytes, node=True)
    _unique_ids(nb, label)  # nbformat.validate would quietly rename a repeated id
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        raise MediaError(f"{label} is not a valid notebook ({str(exc).splitlines()[0][:300]}): "
                         "edit_notebook changes valid notebooks; write_file can rewrite it"
                         ) from None
    original = nbformat.writes(nb)
    index = _cell_index(nb, cell_id, label, allow_start=mode == "insert")
    cleared = False
    if mode == "delete":
        cell = nb.cells.pop(index)
    elif mode == "insert":
        kind = cell_type or "code"
        cell = _new_cell(nbformat, kind, new_source, nb)
        index += 1
        nb.cells.insert(index, cell)
    else:
        cell = nb.cells[index]
        cleared = _replace(cell, new_source, cell_type or cell.cell_type)
    try:
        _unique_ids(nb, label)
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        raise MediaError(f"the edit would leave {label} an invalid notebook: "
                         f"{str(exc).splitlines()[0][:300]}; nothing was written") from None
    text = nbformat.writes(nb) + "\n"
    return {"text": text, "index": index, "cell_id": str(cell.get("id") or f"#{index}"),
            "cell_type": str(cell.get("cell_type")), "cells": len(nb.cells),
            "cleared": cleared, "same": text.rstrip("\n") == original.rstrip("\n")}


def _unique_ids(nb: Any, label: str) -> None:
    seen: set[str] = set()
    for cell in nb.cells:
        found = cell.get("id") if isinstance(cell, dict) else None
        if isinstance(found, str) and found in seen:
            raise MediaError(f"{label} is not a valid notebook (two cells have the id "
                             f"{found!r}): edit_notebook changes valid notebooks; write_file "
                             "can rewrite it")
        seen.add(str(found))


def _cell_index(nb: Any, cell_id: str, label: str, *, allow_start: bool) -> int:
    wanted = cell_id.strip()
    if not wanted and allow_start:
        return -1  # insert at the start
    for index, cell in enumerate(nb.cells):
        if str(cell.get("id") or "") == wanted or wanted == f"#{index}":
            return index
    known = ", ".join(str(c.get("id") or f"#{i}") for i, c in enumerate(nb.cells[:30]))
    raise MediaError(f"{label} has no cell with id {wanted!r}; its cells: {known or 'none'}"
                     + (" (cell_id '' inserts at the start)" if allow_start else ""))


def _new_cell(nbformat: Any, kind: str, source: str, nb: Any) -> Any:
    made = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
            "raw": nbformat.v4.new_raw_cell}[kind](source)
    if (nb.nbformat, nb.nbformat_minor) < (4, 5):
        made.pop("id", None)  # ids came with nbformat 4.5: an older notebook stays valid
    return made


def _replace(cell: Any, source: str, kind: str) -> bool:
    """Set the cell's source and type; a code cell's outputs and count are cleared."""
    cell.source = source
    if kind != cell.cell_type:
        if cell.cell_type == "code":
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
        cell.cell_type = kind
        if kind == "code":
            cell.outputs, cell.execution_count = [], None
            return False
        cell.pop("attachments", None) if kind != "markdown" else None
        return False
    if kind == "code":
        had = bool(cell.get("outputs")) or cell.get("execution_count") is not None
        cell.outputs, cell.execution_count = [], None
        return had
    return False

