"""Python's findings from ruff: undefined names, unused or wrong imports, syntax.

ruff has no Python API, so its binary runs once per check over copies of the texts in a
private temporary folder (a change's "before" and "after" texts in one run: ~15 ms),
with ``--isolated`` so that no configuration of the project is read: the rules are ours
(pyflakes' ``F``), the same in every repository; syntax errors are the syntax gate's. The copies keep
each file's name, so ``__init__.py`` and notebooks (``.ipynb``, which ruff reads as
notebooks) are judged as what they are.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..results import Diagnostic

__all__ = ["RUFF_SUFFIXES", "Ruff", "RuffFailed", "find_ruff"]

RUFF_SUFFIXES = (".py", ".pyi", ".ipynb")
_RULES = "F"
_TARGET = "py313"  # the newest syntax is no error: a project on older Python has its own CI
_OUTPUT_LIMIT = 64 << 20  # bytes of ruff's JSON read at most
# Findings that break the program when the line runs; the rest of pyflakes is a warning.
_ERRORS = frozenset({"F821", "F822", "F823", "F701", "F702", "F704", "F706", "F707", "F631",
                     "F633", "F502", "F503", "F506", "F507", "F508", "F509", "F524", "F525",
                     "F622"})


class RuffFailed(Exception):
    """ruff could not check the files (it crashed, hung or said something unreadable)."""


def find_ruff() -> str | None:
    """The ruff binary of the installed ``ruff`` package, else the one on PATH."""
    try:
        from ruff.__main__ import find_ruff_bin
    except ImportError:
        return shutil.which("ruff")
    try:
        return os.fsdecode(find_ruff_bin())
    except FileNotFoundError:
        return shutil.which("ruff")


@dataclass
class Ruff:
    """Checks Python texts with ruff; ``binary`` None: not installed (checks nothing)."""

    binary: str | None = None
    timeout: float = 10.0

    @classmethod
    def found(cls, timeout: float = 10.0) -> Ruff:
        return cls(find_ruff(), timeout)

    @property
    def available(self) -> bool:
        return self.binary is not None

    def check(self, texts: Mapping[str, str]) -> dict[str, list[Diagnostic]]:
        """The findings of each text, by its key (a root-relative path, maybe suffixed
        to tell a "before" apart: the file name is the key's last part)."""
        if self.binary is None or not texts:
            return {key: [] for key in texts}
        with tempfile.TemporaryDirectory(prefix="loki-ruff-") as folder:
            paths = {}
            for n, (key, text) in enumerate(texts.items()):
                os.mkdir(os.path.join(folder, str(n)))
                path = os.path.join(folder, str(n), _file_name(key))
                with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
                    fh.write(text)
                paths[os.path.realpath(path)] = key
            found = self._run(list(paths))
        out: dict[str, list[Diagnostic]] = {key: [] for key in texts}
        for item in found:
            name = str(item.get("filename", ""))
            owner = paths.get(os.path.realpath(name)) or paths.get(name)
            if owner is not None and not _syntax(item):
                out[owner].append(_diagnostic(item, _path_of(owner), texts[owner]))
        return out

    def _run(self, paths: list[str]) -> list[dict[str, Any]]:
        assert self.binary is not None
        argv = [self.binary, "check", "--isolated", "--no-cache", "--exit-zero", "--quiet",
                "--select", _RULES, "--target-version", _TARGET, "--output-format", "json",
                "--", *paths]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=self.timeout,
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise RuffFailed(f"ruff did not answer within {self.timeout:g}s") from None
        except OSError as exc:
            raise RuffFailed(f"ruff could not start: {exc.strerror or exc}") from None
        if done.returncode != 0 or len(done.stdout) > _OUTPUT_LIMIT:
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
            raise RuffFailed(f"ruff failed (exit {done.returncode}): {why[0][:200]}")
        try:
            items = json.loads(done.stdout or b"[]")
        except ValueError:
            raise RuffFailed("ruff's answer was not JSON") from None
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _syntax(item: dict[str, Any]) -> bool:
    """A syntax error: the syntax gate owns those (it warns, or refuses the change), and a
    file that does not parse has nothing else to say."""
    code = str(item.get("code") or "")
    return code in ("", "invalid-syntax") or code.startswith("E9")


def _file_name(key: str) -> str:
    return _path_of(key).rsplit("/", 1)[-1] or "file.py"


def _path_of(key: str) -> str:
    """The root-relative path of a key (``a.py`` or ``a.py\\x00before``)."""
    return key.split("\0", 1)[0]


def _diagnostic(item: dict[str, Any], path: str, text: str) -> Diagnostic:
    code = str(item.get("code") or "")
    start = item.get("location") or {}
    end = item.get("end_location") or {}
    line, column = int(start.get("row") or 1), int(start.get("column") or 1)
    cell = item.get("cell")
    severity = "error" if code in _ERRORS else "warning"
    symbol = "" if cell else _symbol(text, line, column, end)
    return Diagnostic(path=path, line=line, column=column, severity=severity,
                      code=code,
                      message=str(item.get("message") or code or "syntax error"),
                      source="ruff", symbol=symbol, cell=int(cell) if cell else None)


def _symbol(text: str, line: int, column: int, end: Mapping[str, Any]) -> str:
    """The text of a finding's range when it lies on one line (a name), else ""."""
    if int(end.get("row") or 0) != line:
        return ""
    lines = text.splitlines()
    if not 0 < line <= len(lines):
        return ""
    return lines[line - 1][column - 1 : int(end.get("column") or column) - 1][:200]
