"""What the media worker's readers share: their error, reading a descriptor under a cap,
and a picture opened under the pixel cap and fitted into the budget (re-encoded here, so
nothing of the file's own bytes reaches a model's API unparsed). Worker side only.
"""

from __future__ import annotations

import base64
import io
import os
import re
import warnings
from typing import Any


class MediaError(ValueError):
    """The file cannot be read as asked; the message says why and what is allowed."""


def fd_path(fd: int) -> str:
    proc = f"/proc/self/fd/{fd}"
    return proc if os.path.exists(proc) else f"/dev/fd/{fd}"


def read_all(fd: int, limit: int, what: str) -> bytes:
    size = os.fstat(fd).st_size
    if size > limit:
        raise MediaError(f"{what} is {size_text(size)}; at most {size_text(limit)} are read")
    with os.fdopen(os.dup(fd), "rb") as fh:
        fh.seek(0)
        return fh.read(limit + 1)[:limit]


def size_text(n: float) -> str:
    """yggdrasil.io's human_size, here because importing yggdrasil.io costs the worker's
    start ~40 ms (tests/test_media_images.py checks that both say the same)."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


def cut_text(text: str, limit: int) -> tuple[str, int]:
    return (text, len(text)) if len(text) <= limit else (text[:limit], limit)


def fitted_picture(img: Any, max_width: int, max_height: int) -> dict[str, Any]:
    """``img`` fitted into the budget and encoded: JPEG for photos, PNG otherwise."""
    from PIL import Image

    if img.width > max_width or img.height > max_height:
        img.thumbnail((max_width, max_height), Image.Resampling.LANCZOS, reducing_gap=3.0)
    alpha = img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info)
    if img.mode not in ("RGB", "RGBA", "L", "LA"):
        img = img.convert("RGBA" if alpha else "RGB")
    out = io.BytesIO()
    if img.mode in ("RGB", "L") and img.format == "JPEG":
        img.save(out, "JPEG", quality=85)
        mime = "image/jpeg"
    else:
        img.save(out, "PNG", optimize=False)
        mime = "image/png"
    return {"mime": mime, "data": base64.b64encode(out.getvalue()).decode("ascii"),
            "width": img.width, "height": img.height}


def open_image(source: Any, max_pixels: int, what: str) -> Any:
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(source)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        found = re.search(r"(\d+) pixels", str(exc))
        many = f"{int(found[1]):,} pixels" if found else "too many pixels"
        raise MediaError(f"{what} has {many}; images up to {max_pixels:,} pixels are read "
                         "(a decompression bomb, or an image too large to show)") from None
    except UnidentifiedImageError:
        raise MediaError(f"{what} is not an image Pillow can read (damaged, or another "
                         "format under an image's name)") from None
    except (ValueError, OSError, SyntaxError) as exc:  # e.g. a text chunk that inflates to GBs
        raise MediaError(f"{what} is a damaged image, or one that cannot be read safely: "
                         f"{exc}"[:400]) from None
