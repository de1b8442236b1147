"""read_file on PDFs: text per page with markers, page ranges, renders on request, and
hostile PDFs (malformed, encrypted, 100,000 pages) answered with a clear error or a cap.
The PDFs are written here with pypdfium2 (media_files)."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from media_files import write_blank_pdf, write_encrypted_pdf, write_pdf
from yggdrasil.loki.results import PdfRead
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def test_a_pdf_reads_as_text_per_page(root: Path, box: Toolbox) -> None:
    write_pdf(root / "spec.pdf", [["Intro", "The first page."], ["Second page"]])
    assert box.call("read_file", {"path": "spec.pdf"}) == (
        "spec.pdf: PDF, 2 pages; pages 1-2\n--- page 1 ---\nIntro\nThe first page.\n"
        "--- page 2 ---\nSecond page")
    result = box.invoke("read_file", {"path": "spec.pdf"})
    assert isinstance(result.data, PdfRead) and not result.images
    assert [p.text for p in result.data.text] == ["Intro\nThe first page.", "Second page"]


def test_pages_pick_a_range_and_the_rest_is_offered(root: Path, box: Toolbox) -> None:
    write_pdf(root / "long.pdf", [[f"text of page {n}"] for n in range(1, 31)])
    out = box.call("read_file", {"path": "long.pdf", "pages": "3-5"})
    assert out.splitlines()[0] == "long.pdf: PDF, 30 pages; pages 3-5"
    assert "--- page 3 ---\ntext of page 3" in out and "page 6" not in out.split("[")[0]
    assert out.endswith("[25 more pages: read_file(path='long.pdf', pages='6-25'); at most "
                        "20 pages a call]")
    default = box.call("read_file", {"path": "long.pdf"})
    assert "--- page 20 ---" in default and "--- page 21 ---" not in default


def test_page_arguments_outside_what_is_allowed_are_refused(root: Path, box: Toolbox) -> None:
    write_pdf(root / "two.pdf", [["a"], ["b"]])
    for pages, said in (("1-21", "is 21 pages; at most 20 a call (e.g. pages='1-20')"),
                        ("7", "two.pdf has 2 pages; pages start at 1 and end at 2"),
                        ("5-3", "a range goes up"), ("first", "give one page ('4') or a range")):
        result = box.invoke("read_file", {"path": "two.pdf", "pages": pages})
        assert result.is_error and said in result.text, (pages, result.text)


def test_the_pages_a_call_are_a_setting(root: Path) -> None:
    write_pdf(root / "ten.pdf", [[f"p{n}"] for n in range(10)])
    with filesystem_toolbox(root, pdf_pages=3) as box:
        out = box.call("read_file", {"path": "ten.pdf"})
        assert "--- page 3 ---" in out and "--- page 4 ---" not in out
        assert "at most 3 a call" in box.call("read_file", {"path": "ten.pdf", "pages": "1-4"})


def test_a_page_without_text_says_so_and_renders_as_an_image(root: Path, box: Toolbox) -> None:
    write_pdf(root / "scan.pdf", [["typed"], []], drawing=True)
    out = box.call("read_file", {"path": "scan.pdf"})
    assert "--- page 2: no text layer (a scan or a drawing) ---" in out
    assert ("[pages without text: 2; read_file(path='scan.pdf', pages='2', as_images=true) "
            "shows them as images]") in out
    result = box.invoke("read_file", {"path": "scan.pdf", "pages": "2", "as_images": True})
    (picture,) = result.images
    assert (picture.mime, picture.width, picture.height) == ("image/png", 594, 768)
    shown = Image.open(io.BytesIO(picture.data)).convert("RGB")
    assert shown.getpixel((int(150 * 594 / 612), 768 - int(150 * 768 / 792))) == (40, 90, 200)
    assert "--- page 2: image 594x768 px ---" in result.text


def test_a_malformed_pdf_is_a_clear_error(root: Path, box: Toolbox) -> None:
    (root / "bad.pdf").write_bytes(b"%PDF-1.7\n" + b"garbage " * 1000)
    result = box.invoke("read_file", {"path": "bad.pdf"})
    assert result.is_error and "bad.pdf is not a PDF that can be read" in result.text


def test_an_encrypted_pdf_is_a_clear_error(root: Path, box: Toolbox) -> None:
    write_encrypted_pdf(root / "locked.pdf")
    result = box.invoke("read_file", {"path": "locked.pdf"})
    assert result.is_error
    assert "locked.pdf is an encrypted PDF (it needs a password)" in result.text


def test_a_pdf_of_100000_pages_reads_one_window(root: Path, box: Toolbox) -> None:
    write_blank_pdf(root / "huge.pdf", 100_000)
    out = box.call("read_file", {"path": "huge.pdf", "pages": "99999-"})
    assert out.splitlines()[0] == "huge.pdf: PDF, 100000 pages; pages 99999-100000"
    out = box.call("read_file", {"path": "huge.pdf"})
    assert "pages 1-20" in out and "[99980 more pages" in out
