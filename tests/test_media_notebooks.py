"""Notebooks: read_file shows cells with ids, types, sources and outputs; edit_notebook
changes one cell, keeps the file valid nbformat, and is covered by changed, undo,
confirm, protected files and the stale-view guard like edit_file. Notebooks are made
here with nbformat (media_files)."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path

import nbformat
import pytest
from PIL import Image

from media_files import write_notebook
from yggdrasil.loki.results import NotebookEdited, NotebookRead
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), "red").save(buf, "PNG")
    return buf.getvalue()


def test_a_notebook_reads_as_cells_with_ids_and_outputs(root: Path, box: Toolbox) -> None:
    ids = write_notebook(root / "nb.ipynb", png=_png())
    out = box.call("read_file", {"path": "nb.ipynb"})
    assert out == "\n".join([
        "nb.ipynb: Jupyter notebook (nbformat 4.5, python), 4 cells",
        f"--- cell 0 id={ids[0]} markdown ---", "# Title",
        f"--- cell 1 id={ids[1]} code [1] ---", "print('hi')", "1 + 1",
        "--- output ---", "hi", "2",
        f"--- cell 2 id={ids[2]} code [2] ---", "1/0",
        "--- output ---", "ZeroDivisionError: division by zero",  # colours stripped
        f"--- cell 3 id={ids[3]} code [3] ---", "plot()",
        "[1 image output: read_file(path='nb.ipynb', as_images=true) shows it]"])
    result = box.invoke("read_file", {"path": "nb.ipynb", "as_images": True})
    (picture,) = result.images
    assert (picture.width, picture.height) == (64, 48)
    assert isinstance(result.data, NotebookRead) and result.data.cells[1].outputs == ("hi\n2",)


def test_a_notebook_without_ids_names_cells_by_index(root: Path, box: Toolbox) -> None:
    write_notebook(root / "old.ipynb", minor=4)
    out = box.call("read_file", {"path": "old.ipynb"})
    assert "--- cell 1 id=#1 code [1] ---" in out
    box.call("edit_notebook", {"path": "old.ipynb", "cell_id": "#0", "new_source": "new",
                               "mode": "insert"})
    nb = nbformat.read(root / "old.ipynb", as_version=4)
    nbformat.validate(nb)  # an id in a 4.4 notebook would not be valid
    assert [c.source for c in nb.cells][:2] == ["# Title", "new"] and "id" not in nb.cells[1]


def test_long_outputs_are_cut_per_cell(root: Path, box: Toolbox) -> None:
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    nb = new_notebook(cells=[new_code_cell("spam()", outputs=[
        new_output("stream", name="stdout", text="line\n" * 100_000)])])
    (root / "long.ipynb").write_text(nbformat.writes(nb))
    out = box.call("read_file", {"path": "long.ipynb"})
    assert "[outputs cut: 497999 more characters]" in out and len(out) < 3_000


def test_edit_notebook_replaces_a_cell_and_clears_its_outputs(root: Path, box: Toolbox) -> None:
    ids = write_notebook(root / "nb.ipynb")
    box.call("read_file", {"path": "nb.ipynb"})
    result = box.invoke("edit_notebook", {"path": "nb.ipynb", "cell_id": ids[1],
                                          "new_source": "x = 3"})
    assert result.text == (f"edited nb.ipynb: replaced code cell 1 id={ids[1]}; its outputs and "
                           "execution count cleared (3 cells now)")
    assert isinstance(result.data, NotebookEdited) and result.changed == ("nb.ipynb",)
    nb = nbformat.read(root / "nb.ipynb", as_version=4)
    nbformat.validate(nb)
    cell = nb.cells[1]
    assert (cell.id, cell.source, cell.outputs, cell.execution_count) == (ids[1], "x = 3", [],
                                                                          None)
    assert nb.metadata.custom == {"kept": True} and nb.cells[2].outputs  # the rest kept


def test_edit_notebook_says_what_the_edit_introduced_like_edit_file(
        root: Path, box: Toolbox) -> None:
    """Diagnostics after a notebook edit (issue 35): ruff reads the notebook as one, the
    new undefined name is reported in its cell, the cell's old code is not."""
    ids = write_notebook(root / "nb.ipynb")
    box.call("read_file", {"path": "nb.ipynb"})
    result = box.invoke("edit_notebook", {"path": "nb.ipynb", "cell_id": ids[1],
                                          "new_source": "print(not_defined_here)"})
    assert isinstance(result.data, NotebookEdited)
    assert [(d.code, d.source, d.severity) for d in result.data.diagnostics] == [
        ("F821", "ruff", "error")]
    assert "not_defined_here" in result.data.diagnostics[0].message
    assert "diagnostics: this change introduced 1 (1 error)" in result.text
    clean = box.invoke("edit_notebook", {"path": "nb.ipynb", "cell_id": ids[1],
                                         "new_source": "x = 3"})
    assert clean.data.diagnostics == [] and "introduced" not in clean.text


def test_edit_notebook_inserts_deletes_and_changes_types(root: Path, box: Toolbox) -> None:
    ids = write_notebook(root / "nb.ipynb")
    box.call("edit_notebook", {"path": "nb.ipynb", "cell_id": "", "new_source": "first",
                               "cell_type": "markdown", "mode": "insert"})
    box.call("edit_notebook", {"path": "nb.ipynb", "cell_id": ids[2], "mode": "delete"})
    box.call("edit_notebook", {"path": "nb.ipynb", "cell_id": ids[0], "new_source": "x = 1",
                               "cell_type": "code"})
    nb = nbformat.read(root / "nb.ipynb", as_version=4)
    nbformat.validate(nb)
    assert [(c.cell_type, c.source) for c in nb.cells] == [
        ("markdown", "first"), ("code", "x = 1"), ("code", "print('hi')\n1 + 1")]
    assert nb.cells[1].outputs == [] and nb.cells[1].id == ids[0]
    assert len({c.id for c in nb.cells}) == 3


def test_edit_notebook_refuses_what_does_not_fit(root: Path, box: Toolbox) -> None:
    ids = write_notebook(root / "nb.ipynb")
    before = (root / "nb.ipynb").read_bytes()
    for args, said in (
            ({"cell_id": "nope"}, f"nb.ipynb has no cell with id 'nope'; its cells: {ids[0]}"),
            ({"cell_id": ids[0], "mode": "move"}, "mode"),
            ({"cell_id": ids[0], "cell_type": "python"}, "cell_type")):
        result = box.invoke("edit_notebook", {"path": "nb.ipynb", "new_source": "x", **args})
        assert result.is_error and said in result.text, result.text
    (root / "plain.txt").write_text("x\n")
    result = box.invoke("edit_notebook", {"path": "plain.txt", "cell_id": "a"})
    assert result.is_error and "plain.txt is not a notebook (.ipynb)" in result.text
    (root / "broken.ipynb").write_text('{"cells": [')
    result = box.invoke("edit_notebook", {"path": "broken.ipynb", "cell_id": "a"})
    assert result.is_error and "broken.ipynb is not a notebook: it is not JSON" in result.text
    assert (root / "nb.ipynb").read_bytes() == before and box.changed == []


def test_edit_notebook_is_undone_declined_and_protected_like_edit_file(
        root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # the root's files are the user's, not scratch files in the system temp dir
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("systemtmp")))
    ids = write_notebook(root / "nb.ipynb")
    before = (root / "nb.ipynb").read_bytes()
    with filesystem_toolbox(root, confirm=lambda question: False) as box:
        result = box.invoke("edit_notebook", {"path": "nb.ipynb", "cell_id": ids[0],
                                              "new_source": "no"})
        assert result.refused and result.text == "REFUSED: user declined to overwrite nb.ipynb"
    with filesystem_toolbox(root) as box:
        box.call("edit_notebook", {"path": "nb.ipynb", "cell_id": ids[0], "new_source": "yes"})
        assert box.changed == ["nb.ipynb"]
        assert box.call("undo_edit", {"path": "nb.ipynb"}).startswith("restored nb.ipynb")
        assert (root / "nb.ipynb").read_bytes() == before
    with filesystem_toolbox(root, protect=["*.ipynb"]) as box:
        result = box.invoke("edit_notebook", {"path": "nb.ipynb", "cell_id": ids[0],
                                              "new_source": "no"})
        assert result.is_error and "protected" in result.text
    assert (root / "nb.ipynb").read_bytes() == before


def test_a_notebook_changed_since_it_was_read_is_refused(root: Path, box: Toolbox) -> None:
    ids = write_notebook(root / "nb.ipynb")
    box.call("read_file", {"path": "nb.ipynb"})
    nb = json.loads((root / "nb.ipynb").read_text())
    nb["cells"][0]["source"] = "# changed by the user"
    (root / "nb.ipynb").write_text(json.dumps(nb, indent=1))
    result = box.invoke("edit_notebook", {"path": "nb.ipynb", "cell_id": ids[0],
                                          "new_source": "mine"})
    assert result.is_error and "nb.ipynb changed since you last read it" in result.text
    box.call("read_file", {"path": "nb.ipynb"})
    assert box.invoke("edit_notebook", {"path": "nb.ipynb", "cell_id": ids[0],
                                        "new_source": "mine"}).ok


@pytest.mark.parametrize("name", ["huge.ipynb"])
def test_a_notebook_of_a_gigabyte_is_refused_unread(root: Path, box: Toolbox, name: str) -> None:
    path = root / name
    with open(path, "wb") as fh:  # a sparse file: 1 GB on paper, nothing on disk
        fh.write(b'{"cells": [{"cell_type": "code", "outputs": [{"text": "')
        fh.seek(1 << 30)
        fh.write(b'"}]}]}')
    for tool, args in (("read_file", {}), ("edit_notebook", {"cell_id": "a"})):
        result = box.invoke(tool, {"path": name, **args})
        assert result.is_error and "huge.ipynb is 1.0 GB; at most 64.0 MB are read" in result.text
    assert os.path.getsize(path) > 1 << 30


def test_a_picture_output_that_is_a_bomb_is_named_not_fatal(root: Path, box: Toolbox) -> None:
    from test_media_images import bomb_png

    bomb_png(root / "bomb.png")
    write_notebook(root / "nb.ipynb", png=(root / "bomb.png").read_bytes())
    result = box.invoke("read_file", {"path": "nb.ipynb", "as_images": True})
    assert result.ok and not result.images
    assert ("[image/png output not shown: an image output has 2,500,000,000 pixels; images "
            "up to 40,000,000 pixels are read") in result.text


def test_ids_stay_as_the_file_has_them_and_an_invalid_notebook_is_not_edited(
        root: Path, box: Toolbox) -> None:
    write_notebook(root / "twins.ipynb")
    nb = json.loads((root / "twins.ipynb").read_text())
    nb["cells"][1]["id"] = nb["cells"][0]["id"]  # two cells with one id: not valid nbformat
    (root / "twins.ipynb").write_text(json.dumps(nb))
    before = (root / "twins.ipynb").read_bytes()
    out = box.call("read_file", {"path": "twins.ipynb"})
    assert out.count(f"id={nb['cells'][0]['id']} ") == 2  # shown as they are, not renamed
    result = box.invoke("edit_notebook", {"path": "twins.ipynb", "cell_id": "#2",
                                          "new_source": "x"})
    assert result.is_error and "twins.ipynb is not a valid notebook" in result.text
    assert "write_file can rewrite it" in result.text
    (root / "odd.ipynb").write_text('{"nbformat": 4, "nbformat_minor": 5, "metadata": [], '
                                    '"cells": [1, {"cell_type": "code", "outputs": [7]}]}')
    out = box.call("read_file", {"path": "odd.ipynb"})  # hostile shapes: read, not crashed
    assert out.startswith("odd.ipynb: Jupyter notebook (nbformat 4.5, no kernel), 2 cells")
    assert (root / "twins.ipynb").read_bytes() == before


def test_pages_pick_a_notebooks_cells_by_index(root: Path, box: Toolbox) -> None:
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell(f"x = {i}") for i in range(600)])
    (root / "many.ipynb").write_text(nbformat.writes(nb))
    out = box.call("read_file", {"path": "many.ipynb"})
    assert out.splitlines()[0] == ("many.ipynb: Jupyter notebook (nbformat 4.5, no kernel), "
                                   "600 cells; cells 0-499")
    assert out.endswith("[100 more cells: read_file(path='many.ipynb', pages='500-599'); at "
                        "most 500 cells a call]")
    out = box.call("read_file", {"path": "many.ipynb", "pages": "598-"})
    assert out.splitlines()[1:] == [f"--- cell 598 id={nb.cells[598].id} code ---", "x = 598",
                                    f"--- cell 599 id={nb.cells[599].id} code ---", "x = 599"]
    assert "none in the range asked (its cells are numbered 0-599)" in box.call(
        "read_file", {"path": "many.ipynb", "pages": "700"})
    result = box.invoke("read_file", {"path": "many.ipynb", "pages": "5-2"})
    assert result.is_error and "for a notebook, the cells by index" in result.text
