"""Media through read_file: what a PDF costs a model as text against page images, and how
long reading one page of a long PDF (or one large image) takes, against the library
called in this process.

    PYTHONPATH=src python bench/bench_media.py            # ~1 min
    PYTHONPATH=src python bench/bench_media.py --reps 9

Corpus (deterministic, made with pypdfium2 under bench/.corpus/media/):
- slides.pdf: 44 landscape pages like a slide deck (a title, 4 bullet lines, a drawing):
  the shape of the user report in issue 33 (44 pages, 73,500 tokens as images, 2,400 as
  text);
- spec.pdf: 44 letter pages of dense text (45 lines of ~90 characters);
- long.pdf: 500 pages of that dense text; shot.png: a 4000x3000 screenshot-like image.

Tokens: text by the toolbox's own counter (o200k_base when tiktoken has its table, else
4 characters a token, as it says); an image by Anthropic's rule for images that fit
(width x height / 750), for the pages as read_file renders them (as_images=True, fitted to
the default 2048x768 budget) and as the provider's own PDF reading renders a page
legibly (150 dpi, the long side capped at 1568 px, Anthropic's cap).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from _timing import interleaved_ms  # noqa: E402
from media_files import write_pdf  # noqa: E402

CORPUS = HERE / ".corpus" / "media"
WORDS = ["agent", "tool", "file", "read", "page", "image", "token", "model", "notebook",
         "cell", "output", "worker", "fence", "limit", "budget", "pixel", "render", "text",
         "layer", "scan", "table", "sheet", "slide", "deck", "spec"]


def _line(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 13) % len(WORDS)] for i in range(words))


def build() -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    if not (CORPUS / "slides.pdf").exists():
        pages = [[f"Slide {n}: {_line(n, 4)}", *(f"- {_line(n + b, 6)}" for b in range(4))]
                 for n in range(44)]
        _landscape(CORPUS / "slides.pdf", pages)
    if not (CORPUS / "spec.pdf").exists():
        write_pdf(CORPUS / "spec.pdf", [[_line(n * 45 + i, 14) for i in range(45)]
                                        for n in range(44)], size=10)
    if not (CORPUS / "long.pdf").exists():
        write_pdf(CORPUS / "long.pdf", [[_line(n * 45 + i, 14) for i in range(45)]
                                        for n in range(500)], size=10)
    if not (CORPUS / "shot.png").exists():
        from PIL import Image, ImageDraw

        img = Image.new("RGB", (4000, 3000), "white")
        draw = ImageDraw.Draw(img)
        for i in range(0, 3000, 40):
            draw.rectangle((20, i, 20 + (i * 7) % 3900, i + 30), fill=(i % 255, 90, 200))
        img.save(CORPUS / "shot.png")


def _landscape(path: Path, pages: list[list[str]]) -> None:
    """Slides: 960x540 pt pages with big text and a drawing."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    from media_files import _text_object

    doc = pdfium.PdfDocument.new()
    for lines in pages:
        page = doc.new_page(960, 540)
        for i, line in enumerate(lines):
            size = 32 if i == 0 else 20
            raw.FPDFPage_InsertObject(page.raw, _text_object(doc, line, 60, 460 - i * 50, size))
        box = raw.FPDFPageObj_CreateNewRect(600, 60, 300, 200)
        raw.FPDFPageObj_SetFillColor(box, 40, 90, 200, 255)
        raw.FPDFPath_SetDrawMode(box, raw.FPDF_FILLMODE_ALTERNATE, 0)
        raw.FPDFPage_InsertObject(page.raw, box)
        raw.FPDFPage_GenerateContent(page.raw)
        page.close()
    doc.save(str(path))
    doc.close()


def _legible_tokens(path: Path) -> int:
    """Image tokens of every page rendered at 150 dpi, long side capped at 1568 px."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(path))
    total = 0
    for i in range(len(doc)):
        w, h = doc.get_page_size(i)
        w, h = w * 150 / 72, h * 150 / 72
        scale = min(1.0, 1568 / max(w, h))
        total += int(w * scale) * int(h * scale) // 750
    doc.close()
    return total


def tokens(box: object, name: str) -> tuple[int, int, int, int]:
    """(pages, text tokens, tokens of read_file's page images, tokens of legible images)."""
    from yggdrasil.loki.tools import Toolbox

    assert isinstance(box, Toolbox)
    count = box.outputs.tokens.count
    text = image = 0
    first, pages = 1, None
    while pages is None or first <= pages:
        span = f"{first}-{first + 19}"
        read = box.invoke("read_file", {"path": name, "pages": span})
        assert read.ok, read.text
        pages = read.data.pages  # type: ignore[union-attr]
        text += count(read.text)
        shown = box.invoke("read_file", {"path": name, "pages": span, "as_images": True})
        image += sum(p.width * p.height // 750 for p in shown.images)
        first += 20
    return pages, text, image, _legible_tokens(CORPUS / name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    build()
    from yggdrasil.loki.tools import filesystem_toolbox

    print(f"corpus: {CORPUS}")
    with filesystem_toolbox(CORPUS, read_only=True) as box:
        print(f"tokens counted by {box.outputs.tokens.counter}")
        print("| PDF | pages | text tokens | page images (read_file, 2048x768) | ratio "
              "| legible page images (150 dpi, <= 1568 px) | ratio |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name in ("slides.pdf", "spec.pdf"):
            pages, text, image, legible = tokens(box, name)
            print(f"| {name} | {pages} | {text:,} | {image:,} | 1/{image / text:.1f} "
                  f"| {legible:,} | 1/{legible / text:.1f} |")
    _times(args.reps)


def _times(reps: int) -> None:
    from yggdrasil.loki.tools import filesystem_toolbox

    with filesystem_toolbox(CORPUS, read_only=True) as box:
        start = time.perf_counter()
        first = box.invoke("read_file", {"path": "long.pdf", "pages": "1"})
        cold = (time.perf_counter() - start) * 1000
        assert first.ok and "PDF, 500 pages" in first.text, first.text

        def ours() -> None:
            box.invoke("read_file", {"path": "long.pdf", "pages": "1"})

        def ours_png() -> None:
            box.invoke("read_file", {"path": "shot.png"})

        times = interleaved_ms({"ours": ours, "pdfium": _pdfium_page_one, "png": ours_png,
                                "pillow": _pillow_fit}, reps)
    print()
    print("| case | ours (read_file, fenced worker) | in this process | ratio |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| page 1 of a 500-page PDF, first call (the media worker starts) | {cold:.0f} ms "
          "| - | - |")
    print(f"| page 1 of a 500-page PDF, warm | {times['ours']:.1f} ms | "
          f"{times['pdfium']:.1f} ms (pypdfium2) | x{times['ours'] / times['pdfium']:.2f} |")
    print(f"| 4000x3000 PNG fitted to 2048x768 | {times['png']:.1f} ms | "
          f"{times['pillow']:.1f} ms (Pillow thumbnail + PNG) | "
          f"x{times['png'] / times['pillow']:.2f} |")


def _pdfium_page_one() -> str:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(CORPUS / "long.pdf"))
    page = doc[0]
    text = page.get_textpage().get_text_range()
    page.close()
    doc.close()
    return str(text)


def _pillow_fit() -> bytes:
    import io

    from PIL import Image

    img = Image.open(CORPUS / "shot.png")
    img.thumbnail((2048, 768))
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


if __name__ == "__main__":
    main()
