"""A page loaded in a real browser: headless Chromium (Debian's ``chromium``), as a subprocess.

``load`` gives the DOM after the page's scripts ran (``--dump-dom``), a screenshot, and
every console message the page produced (Chromium logs them on stderr as ``CONSOLE``
lines with ``--enable-logging=stderr``): errors, uncaught exceptions, content security
policy refusals. A page of ours should log nothing at all.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=8000"]
_CONSOLE = re.compile(r':CONSOLE[:(]?\d*\)?\]\s*"(.*)", source: (.*)$')


@dataclass
class Loaded:
    dom: str
    console: list[str]  # "message (source)" per console line
    screenshot: Path


def chromium() -> str:
    """The browser, or a skip (a failure under CI, whose .ci/run installs it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def load(page: Path, scratch: Path, *, dom: bool = True, screenshot: bool = True,
         size: tuple[int, int] = (1280, 2200)) -> Loaded:
    """``page`` (a file) opened from its ``file://`` URL: its DOM, console and a screenshot
    (one browser run for each: Chromium does one of them per run)."""
    scratch.mkdir(parents=True, exist_ok=True)
    url = page.resolve().as_uri()
    found, console = _chromium(scratch, "--dump-dom", url) if dom else ("", [])
    shot = scratch / "screenshot.png"
    if screenshot:
        _, more = _chromium(scratch, f"--window-size={size[0]},{size[1]}",
                            f"--screenshot={shot}", "--hide-scrollbars", url)
        console += more
        assert shot.is_file(), "chromium wrote no screenshot"
    return Loaded(found, console, shot)


def _chromium(scratch: Path, *args: str) -> tuple[str, list[str]]:
    profile = scratch / f"profile-{len(list(scratch.glob('profile-*')))}"
    command = [chromium(), *FLAGS, f"--user-data-dir={profile}", *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace", start_new_session=True,
                          env={**os.environ, "HOME": str(scratch)}) as browser:
        try:
            out, err = browser.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(browser.pid, signal.SIGKILL)  # the browser and its helper processes
            browser.communicate()
            raise AssertionError(f"chromium did not finish in 120s: {' '.join(args)}") from None
    assert browser.returncode == 0, err[-2000:]
    console = [f"{m.group(1)} ({m.group(2)})" for line in err.splitlines()
               if (m := _CONSOLE.search(line))]
    return out, console


def colours(png: Path) -> tuple[int, float]:
    """(distinct colours, share of pixels unlike the most common one) of a screenshot."""
    from PIL import Image

    with Image.open(png) as image:
        pixels = image.convert("RGB")
        counts = pixels.getcolors(maxcolors=1 << 24) or []
    total = sum(n for n, _ in counts)
    most = max(n for n, _ in counts)
    return len(counts), 1 - most / total


def pixels_near(png: Path, colour: str, tolerance: int = 12) -> int:
    """How many pixels of the screenshot are within ``tolerance`` of ``colour`` (#rrggbb)."""
    from PIL import Image

    want = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    with Image.open(png) as image:
        counts = image.convert("RGB").getcolors(maxcolors=1 << 24) or []
    return sum(n for n, rgb in counts
               if all(abs(a - b) <= tolerance for a, b in zip(rgb, want, strict=True)))
