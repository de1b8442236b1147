"""read_file on images: a picture the model sees, fitted to the pixel budget, its size said.

Real image files made here with Pillow (and one crafted by hand: a PNG whose header
claims 50,000 x 50,000 pixels), read through a real toolbox whose media worker is a
real fenced process.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from yggdrasil.loki.results import ImagePart, ImageRead, TextPart
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def bomb_png(path: Path, width: int = 50_000, height: int = 50_000) -> None:
    """A small PNG whose header says ``width`` x ``height`` (its data is a few zeros)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                     + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b""))


def test_a_large_screenshot_is_shown_downscaled_with_its_size(root: Path, box: Toolbox) -> None:
    Image.new("RGB", (4000, 3000), (200, 30, 30)).save(root / "shot.png")
    result = box.invoke("read_file", {"path": "shot.png"})
    assert result.ok, result.text
    assert result.text == ("shot.png: PNG image, 4000x3000 px, "
                           f"{_size(root / 'shot.png')}; shown downscaled to 1024x768 px")
    text, picture = result.parts
    assert isinstance(text, TextPart) and isinstance(picture, ImagePart)
    assert (picture.mime, picture.width, picture.height) == ("image/png", 1024, 768)
    shown = Image.open(io.BytesIO(picture.data))
    assert shown.size == (1024, 768) and shown.getpixel((10, 10)) == (200, 30, 30)
    assert isinstance(result.data, ImageRead) and result.data.width == 4000
    assert "images" not in (result.structured() or {})  # no bytes in events or transcripts


@pytest.mark.parametrize(("fmt", "mime"), [("JPEG", "image/jpeg"), ("GIF", "image/png"),
                                           ("WEBP", "image/png"), ("BMP", "image/png")])
def test_each_image_format_is_shown(root: Path, box: Toolbox, fmt: str, mime: str) -> None:
    Image.new("RGB", (320, 200), (10, 120, 40)).save(root / f"pic.{fmt.lower()}", fmt)
    result = box.invoke("read_file", {"path": f"pic.{fmt.lower()}"})
    assert result.text.startswith(f"pic.{fmt.lower()}: {fmt} image, 320x200 px"), result.text
    (picture,) = result.images
    assert (picture.mime, picture.width, picture.height) == (mime, 320, 200)
    assert Image.open(io.BytesIO(picture.data)).size == (320, 200)


def test_the_pixel_budget_is_a_setting(root: Path) -> None:
    Image.new("RGB", (1000, 1000), "white").save(root / "square.png")
    with filesystem_toolbox(root, image_width=300, image_height=300) as box:
        (picture,) = box.invoke("read_file", {"path": "square.png"}).images
    assert (picture.width, picture.height) == (300, 300)


def test_an_animated_gif_shows_its_first_frame_and_says_so(root: Path, box: Toolbox) -> None:
    frames = [Image.new("RGB", (50, 40), c) for c in ("red", "green", "blue")]
    frames[0].save(root / "anim.gif", save_all=True, append_images=frames[1:])
    result = box.invoke("read_file", {"path": "anim.gif"})
    assert "3 frames (the first shown)" in result.text and len(result.images) == 1


def test_a_decompression_bomb_is_refused_unread(root: Path, box: Toolbox) -> None:
    bomb_png(root / "bomb.png")
    result = box.invoke("read_file", {"path": "bomb.png"})
    assert result.is_error and not result.images
    assert "bomb.png has 2,500,000,000 pixels; images up to 40,000,000 pixels" in result.text
    Image.new("RGB", (10, 10)).save(root / "ok.png")
    assert box.invoke("read_file", {"path": "ok.png"}).ok  # the worker still serves


def test_a_damaged_image_is_a_clear_error(root: Path, box: Toolbox) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (400, 400), "red").save(buf, "PNG")
    (root / "cut.png").write_bytes(buf.getvalue()[:200])
    result = box.invoke("read_file", {"path": "cut.png"})
    assert result.is_error and "cut.png is a damaged PNG image" in result.text, result.text


def test_files_are_known_by_content_not_name(root: Path, box: Toolbox) -> None:
    (root / "notes.png").write_text("just text\n")  # a text file under an image's name
    assert box.call("read_file", {"path": "notes.png"}) == "1\tjust text"
    Image.new("RGB", (30, 20)).save(root / "data.txt", "PNG")  # a picture named .txt
    assert box.invoke("read_file", {"path": "data.txt"}).text.startswith(
        "data.txt: PNG image, 30x20 px")


def test_pages_and_as_images_are_refused_on_text_and_images(root: Path, box: Toolbox) -> None:
    (root / "a.txt").write_text("x\n")
    Image.new("RGB", (30, 20)).save(root / "b.png")
    for path in ("a.txt", "b.png"):
        result = box.invoke("read_file", {"path": path, "pages": "2"})
        assert result.is_error and "pages" in result.text, result.text


def _size(path: Path) -> str:
    from yggdrasil.loki.results import human_size

    return human_size(path.stat().st_size)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_the_largest_image_allowed_stays_under_500_mb(root: Path, box: Toolbox) -> None:
    """40 M pixels of RGBA (160 MB decoded), the most read_file decodes: the worker's peak
    resident memory (VmHWM) stays under 500 MB."""
    from yggdrasil.loki.media import MediaReader

    Image.new("RGBA", (8000, 5000), (10, 20, 30, 255)).save(root / "big.png", compress_level=1)
    result = box.invoke("read_file", {"path": "big.png"})
    assert result.text.endswith("shown downscaled to 1229x768 px"), result.text
    media = next(r for r in box._resources if isinstance(r, MediaReader))
    status = Path(f"/proc/{media.worker.pid()}/status").read_text()
    peak_kb = int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1])
    assert peak_kb < 500 * 1024, f"the media worker peaked at {peak_kb // 1024} MB"


def test_loki_call_says_what_it_got_and_prints_no_bytes(root: Path) -> None:
    from cli_run import loki

    Image.new("RGB", (3000, 1500), "navy").save(root / "x.png")
    done = loki(root.parent, "call", "read_file", "path=x.png", "--root", str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"x.png: PNG image, 3000x1500 px, {_size(root / 'x.png')}; shown downscaled to "
        "1536x768 px",
        done.stdout.splitlines()[1]]
    assert done.stdout.splitlines()[1].startswith("[image part: image/png, 1536x768 px, ")
    assert done.stdout.splitlines()[1].endswith("; not printed]")
    assert all(ch == "\n" or 32 <= ord(ch) < 127 for ch in done.stdout)  # no bytes


def test_a_text_chunk_that_inflates_to_200_mb_is_refused(root: Path, box: Toolbox) -> None:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", 10, 10, 8, 2, 0, 0, 0)
    text = b"Comment\0\0" + zlib.compress(b"A" * (200 << 20), 9)
    pixels = zlib.compress(b"\0" * 31 * 10)
    (root / "text.png").write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                                    + chunk(b"zTXt", text) + chunk(b"IDAT", pixels)
                                    + chunk(b"IEND", b""))
    result = box.invoke("read_file", {"path": "text.png"})
    assert result.is_error
    assert "text.png is a damaged image, or one that cannot be read safely: Decompressed " \
           "data too large" in result.text


def test_the_workers_sizes_read_as_the_toolboxs() -> None:
    """The media worker says sizes with its own copy of yggdrasil.io's human_size (no
    import of yggdrasil.io at its start): both say the same."""
    from yggdrasil.io import human_size
    from yggdrasil.loki.media._decode import size_text

    for n in (0, 1, 1023, 1024, 1536, 5 << 20, 64_000_000, 3 << 30):
        assert size_text(n) == human_size(n)
