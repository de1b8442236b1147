"""Python's findings from ruff: undefined names, unused or wrong imports, syntax.

ruff has no Python API, so its binary runs on a text given on its stdin (~7 ms), or on
private copies of several texts at once (a change's "before" and "after", a patch's
files: one process for all); a text seen lately, such as the "before" that was the last
edit's "after", is answered from memory. It runs with ``--isolated`` so that no
configuration of the project is read: the rules are ours (pyflakes' ``F``), the same in
every repository; syntax errors are the syntax gate's. Stdin and copies keep each
file's name, so ``__init__.py`` and notebooks (``.ipynb``, which ruff reads as
notebooks) are judged as what they are.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..results import Diagnostic

__all__ = ["RUFF_SUFFIXES", "Ruff", "RuffFailed", "find_ruff"]

RUFF_SUFFIXES = (".py", ".pyi", ".ipynb")
_RULES = "F"
_TARGET = "py313"  # the newest syntax is no error: a project on older Python has its own CI
_OUTPUT_LIMIT = 64 << 20  # bytes of ruff's JSON read at most
_ON_STDIN = 4  # texts checked each on a ruff's stdin at most; more: one ruff over copies
_SEEN = 256  # texts whose findings are remembered (by file name and content)
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
    _seen: dict[tuple[str, str], list[Diagnostic]] = field(default_factory=dict, repr=False)

    @classmethod
    def found(cls, timeout: float = 10.0) -> Ruff:
        return cls(find_ruff(), timeout)

    @property
    def available(self) -> bool:
        return self.binary is not None

    def check(self, texts: Mapping[str, str]) -> dict[str, list[Diagnostic]]:
        """The findings of each text, by its key (a root-relative path, maybe suffixed
        to tell a "before" apart: the file name is the key's last part). Texts seen
        lately are answered from memory (an edit's "before" is the last one's "after");
        up to four others each on a ruff's stdin, all at once (~7 ms), more by one ruff
        over private copies (a process each cost 15-30 ms of start-up apiece, 2.1 s for
        the 100 texts of a 50-file patch, against ~0.2 s for one ruff over copies)."""
        if self.binary is None or not texts:
            return {key: [] for key in texts}
        out: dict[str, list[Diagnostic]] = {}
        unseen: dict[str, tuple[str, str]] = {}
        for key, text in texts.items():
            seen = _hash(key, text)
            if seen in self._seen:
                out[key] = [d.model_copy(update={"path": _path_of(key)})
                            for d in self._seen[seen]]
            else:
                unseen[key] = seen
        if len(unseen) <= _ON_STDIN:
            found = self._stdin({key: texts[key] for key in unseen})
        else:
            found = self._copies({key: texts[key] for key in unseen})
        for key, items in found.items():
            lines = texts[key].splitlines()
            diagnostics = [_diagnostic(item, _path_of(key), lines)
                           for item in items if not _syntax(item)]
            self._remember(unseen[key], diagnostics)
            out[key] = diagnostics
        return out

    def _argv(self) -> list[str]:
        assert self.binary is not None
        return [self.binary, "check", "--isolated", "--no-cache", "--exit-zero", "--quiet",
                "--select", _RULES, "--target-version", _TARGET, "--output-format", "json"]

    def _stdin(self, texts: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
        """Ruff's findings on a few texts, each given on the stdin of a ruff of its own,
        all running at once."""
        running: list[tuple[str, subprocess.Popen[bytes]]] = []
        try:
            for key in texts:
                argv = [*self._argv(), "--stdin-filename", _file_name(key), "-"]
                running.append((key, self._start(argv, None)))
            return {key: self._answer(process, texts[key].encode("utf-8", "surrogatepass"))
                    for key, process in running}
        finally:
            for _, process in running:
                _stop(process)

    def _copies(self, texts: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
        """Ruff's findings on several texts at once: each written under its own file name
        in a folder of its own (``<n>/<name>``: a before and an after share a name) of a
        private temporary folder, one ruff reads them all; the folder is gone after."""
        keys = list(texts)
        for place in (*_scratch(), None):
            try:
                with tempfile.TemporaryDirectory(prefix="loki-ruff-", dir=place) as top:
                    paths = [_copy(top, n, key, texts[key]) for n, key in enumerate(keys)]
                    process = self._start([*self._argv(), "--", *paths], top)
                    try:
                        items = self._answer(process, b"")
                    finally:
                        _stop(process)
                break
            except OSError as exc:  # /dev/shm full: the temp dir then
                if place is None:
                    raise RuffFailed("ruff's copies could not be written: "
                                     f"{exc.strerror or exc}") from None
        found: dict[str, list[dict[str, Any]]] = {key: [] for key in keys}
        for item in items:
            folder = os.path.basename(os.path.dirname(str(item.get("filename") or "")))
            if folder.isdigit() and int(folder) < len(keys):
                found[keys[int(folder)]].append(item)
        return found

    def _start(self, argv: list[str], cwd: str | None) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=cwd or tempfile.gettempdir())
        except OSError as exc:
            raise RuffFailed(f"ruff could not start: {exc.strerror or exc}") from None

    def _answer(self, process: subprocess.Popen[bytes], given: bytes) -> list[dict[str, Any]]:
        try:
            out, err = process.communicate(given, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise RuffFailed(f"ruff did not answer within {self.timeout:g}s") from None
        if process.returncode != 0 or len(out) > _OUTPUT_LIMIT:
            why = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
            raise RuffFailed(f"ruff failed (exit {process.returncode}): {why[0][:200]}")
        try:
            items = json.loads(out or b"[]")
        except ValueError:
            raise RuffFailed("ruff's answer was not JSON") from None
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def _remember(self, seen: tuple[str, str], found: list[Diagnostic]) -> None:
        self._seen[seen] = found
        while len(self._seen) > _SEEN:
            del self._seen[next(iter(self._seen))]


def _scratch() -> tuple[str, ...]:
    """Where the copies go first: memory (/dev/shm) when it is there and writable (on
    ext4 under load, making and removing 100 files cost ~0.25 s, in memory ~0.04 s);
    the temp dir after."""
    shm = "/dev/shm"
    return (shm,) if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else ()


def _copy(top: str, n: int, key: str, text: str) -> str:
    """``text`` written as ``top/<n>/<its file name>``; that path."""
    os.mkdir(os.path.join(top, str(n)), 0o700)
    path = os.path.join(top, str(n), _file_name(key))
    with open(path, "xb") as file:
        file.write(text.encode("utf-8", "surrogatepass"))
    return path


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def _hash(key: str, text: str) -> tuple[str, str]:
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return _file_name(key), digest


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


def _diagnostic(item: dict[str, Any], path: str, lines: Sequence[str]) -> Diagnostic:
    code = str(item.get("code") or "")
    start = item.get("location") or {}
    end = item.get("end_location") or {}
    line, column = int(start.get("row") or 1), int(start.get("column") or 1)
    cell = item.get("cell")
    severity = "error" if code in _ERRORS else "warning"
    symbol = "" if cell else _symbol(lines, line, column, end)
    return Diagnostic(path=path, line=line, column=column, severity=severity,
                      code=code,
                      message=str(item.get("message") or code or "syntax error"),
                      source="ruff", symbol=symbol, cell=int(cell) if cell else None)


def _symbol(lines: Sequence[str], line: int, column: int, end: Mapping[str, Any]) -> str:
    """The text of a finding's range when it lies on one line (a name), else ""."""
    if int(end.get("row") or 0) != line:
        return ""
    if not 0 < line <= len(lines):
        return ""
    return lines[line - 1][column - 1 : int(end.get("column") or column) - 1][:200]
