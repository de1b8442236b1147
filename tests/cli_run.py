"""Running the `loki` command as a real subprocess, on this checkout's source."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
# seconds: a guard against a hang, not a timing (a fleet rerun took over 60 s on a machine
# running several suites at once)
GUARD = 300


def child_env(tmp_path: Path) -> dict[str, str]:
    """Our source first on the path; a system temp dir apart from the root, so that
    existing files in the root count as real assets and edits to them are gated."""
    scratch = tmp_path / "system-tmp"
    scratch.mkdir(exist_ok=True)
    # no COLUMNS (pytest's workers may set it): a child's stdout is a pipe, as in a script
    inherited = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return {**inherited, "PYTHONPATH": str(SRC), "TMPDIR": str(scratch),
            "LOKI_STATE_DIR": str(tmp_path / "loki-state")}  # transcripts of `loki do` runs


def loki(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m yggdrasil.loki ARGS` with stdin that is not a terminal."""
    return subprocess.run([sys.executable, "-m", "yggdrasil.loki", *args],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=child_env(tmp_path), timeout=GUARD)
