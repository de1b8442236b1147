"""Text edits that keep what the model did not ask to change, and help when they miss.

``replace`` works on decoded text. A file whose every line ends in CRLF is edited in LF
form and written back in CRLF, so a model that writes ``\\n`` neither misses nor mangles
it. When ``old`` is not found, the error points at the closest near-match.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Callable

from .errors import ToolError

_NEAR_MIN_RATIO = 0.6
_NEAR_SCAN_LINES = 50_000
_NEAR_CANDIDATES = 40
_SHOW_LINES = 12


def replace(text: str, old: str, new: str, rel: str, *, replace_all: bool = False) -> tuple[str, int]:
    """``text`` with ``old`` replaced by ``new``, and the count; ToolError leaves no change."""
    if not old:
        raise ToolError("old must not be empty; to create or rewrite a whole file use write_file")
    if old == new:
        raise ToolError("old and new are the same; there is nothing to change")
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    if crlf:
        text, old, new = (s.replace("\r\n", "\n") for s in (text, old, new))
    count = text.count(old)
    if count == 0:
        raise ToolError(f"old was not found in {rel}. {near_miss(text, old)}")
    if count > 1 and not replace_all:
        raise ToolError(
            f"old appears {count}x in {rel} (at lines {_lines_of(text, old)}); include more "
            "surrounding lines so it is unique, or pass replace_all=true to replace every one"
        )
    edited = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return (edited.replace("\n", "\r\n") if crlf else edited), count


def _lines_of(text: str, needle: str, most: int = 10) -> str:
    found: list[str] = []
    pos = text.find(needle)
    while pos >= 0 and len(found) < most:
        found.append(str(text.count("\n", 0, pos) + 1))
        pos = text.find(needle, pos + 1)
    return ", ".join(found)


def _numbered(lines: list[str], first: int) -> str:
    shown = lines[:_SHOW_LINES]
    body = "\n".join(f"{first + i}\t{line}" for i, line in enumerate(shown))
    return body if len(lines) <= _SHOW_LINES else f"{body}\n[... {len(lines) - _SHOW_LINES} more lines]"


def near_miss(text: str, old: str) -> str:
    """Where the file holds something close to ``old``, and what differs."""
    lines = text.split("\n")[:_NEAR_SCAN_LINES]
    want = old.strip("\n").split("\n")
    k = len(want)

    def squash(s: str) -> str:
        return " ".join(s.split())

    target = [squash(s) for s in want]
    squashed = [squash(s) for s in lines]
    for i in range(len(lines) - k + 1):
        if squashed[i : i + k] == target:
            return (
                f"Lines {i + 1}-{i + k} match it except for whitespace (indentation, tabs or "
                f"trailing spaces); copy them exactly:\n{_numbered(lines[i : i + k], i + 1)}"
            )
    best = _closest_window(lines, want)
    if best is None:
        return "Nothing in the file resembles it; read_file the region you mean to edit first."
    ratio, i = best
    window = lines[i : i + k]
    diff = list(difflib.unified_diff(want, window, "old (yours)", "file", lineterm="", n=0))
    return (
        f"The closest match is lines {i + 1}-{i + k} ({ratio:.0%} similar):\n"
        f"{_numbered(window, i + 1)}\nWhat differs:\n" + "\n".join(diff[2 : 2 + _SHOW_LINES])
    )


def _closest_window(lines: list[str], want: list[str]) -> tuple[float, int] | None:
    """(similarity, start) of the k-line window most like ``want``, if close enough."""
    k = len(want)
    if k > len(lines):
        return None
    anchor = next((s.strip() for s in want if s.strip()), "")
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(anchor)

    def anchor_score(i: int) -> float:
        matcher.set_seq1(lines[i].strip())
        return matcher.quick_ratio()

    offset = next((j for j, s in enumerate(want) if s.strip()), 0)
    starts = range(0, len(lines) - k + 1)
    ranked = sorted(starts, key=lambda i: anchor_score(min(i + offset, len(lines) - 1)), reverse=True)
    joined = "\n".join(want)
    scored = [
        (difflib.SequenceMatcher(None, "\n".join(lines[i : i + k]), joined, autojunk=False).ratio(), i)
        for i in ranked[:_NEAR_CANDIDATES]
    ]
    best = max(scored, default=None)
    return best if best and best[0] >= _NEAR_MIN_RATIO else None


# -- cheap syntax checks after a write ---------------------------------------------------


def _python(text: str) -> None:
    compile(text, "<file>", "exec", dont_inherit=True)


def _yaml(text: str) -> None:
    try:
        import yaml
    except ImportError:
        return
    yaml.safe_load(text)


_CHECKS: dict[str, Callable[[str], object]] = {
    ".py": _python,
    ".json": json.loads,
    ".toml": tomllib.loads,
    ".yaml": _yaml,
    ".yml": _yaml,
}


def syntax_problem(rel: str, text: str) -> str | None:
    """A one-line parse error for formats that are cheap to check, else None."""
    suffix = rel[rel.rfind(".") :].lower() if "." in rel else ""
    check = _CHECKS.get(suffix)
    if check is None:
        return None
    try:
        check(text)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except json.JSONDecodeError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except Exception as exc:  # tomllib / yaml errors carry the position in their message
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None
