"""The ripgrep engine: ``rg`` walks and searches; we read its JSON and its debug log.

Skipped entries are not found by walking twice: ``rg --debug`` logs each one on
stderr (``ignoring ./x: Ignore(IgnoreMatch(Hidden))``, ``... found binary data at
offset 3``), which goes to a temp file (no pipe to deadlock on) and is parsed after.

grep runs ripgrep in parallel and unsorted; when there are more hits than we count,
it stops it and runs again with ``--sort path`` up to the first hits not shown, so the
hits shown are the first ones in walk order, exactly as the Python engine finds them.
"""

from __future__ import annotations

import base64
import fcntl
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import IO, Any

from ..errors import ToolError
from ..files import Root
from ..results import MAX_ENTRIES, MAX_HITS, clip_line
from ..sandbox import binary_paths, landlock_status, read_only_argv
from ._found import Accept, Found, Hit, HitCollector, PathCollector, Pattern, Query, Skips
from ._globs import glob_test
from ._protected import Rules
from ._pysearch import COUNT_LIMIT, is_binary

_WALK = re.compile(rb"^rg: DEBUG\|ignore::walk\|\S*: ignoring (.*?): Ignore\(IgnoreMatch\((\w+)(.*)$")
_BINARY = re.compile(rb"^rg: DEBUG\|grep_printer::\w+\|\S*: ignoring (.*): found binary data at")
_HIDDEN_GLOB = "!.*"  # hidden names, as an override so it beats whitelists and types
_MIN_VERSION = (14, 0)
_PIPE_SIZE = 1 << 20  # bytes rg may write ahead of us (Linux's default cap for a pipe)
_FS, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
_REGEX_ERRORS = ("rg: regex parse error", "rg: the literal", "rg: compiled regex")


@functools.cache
def find_rg() -> str | None:
    """The ``rg`` beside this Python (``pip install ripgrep``) or else on PATH, when it is
    a ripgrep 14 (whose debug log we parse); None otherwise. Shims (pyenv's bash
    scripts) are skipped for the binary they stand for, which the fence can run."""
    import sysconfig

    beside = os.path.join(sysconfig.get_path("scripts"), "rg")
    exe = beside if _is_binary(beside) else shutil.which("rg")
    if exe is None:
        return None
    exe = os.path.realpath(exe)
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(rb"ripgrep (\d+)\.(\d+)", out.stdout)
    return exe if m and (int(m[1]), int(m[2])) >= _MIN_VERSION else None


def _is_binary(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def fenced(args: list[str], root: str, extra_reads: list[str]) -> list[str]:
    """``args`` run under a read-only Landlock fence: rg may read the root (and the ignore
    file we hand it) and run its own binary, nothing else. It opens paths by name, so a
    folder swapped for a link to the outside while it walks would otherwise lead it there."""
    abi = landlock_status().abi
    if not abi:
        return args
    return read_only_argv(args, read=[root, *extra_reads], execute=binary_paths(args[0]),
                          abi=abi)


@dataclass
class RgEngine:
    root: Root
    exe: str
    protect: list[str] = field(default_factory=list)  # -g values skipping protected entries
    name: str = "rg"

    def find(self, query: Query, accept: Accept) -> Found:
        paths = PathCollector(MAX_ENTRIES)
        visible = _Visible(self.root)
        with self._run(query, ["--files", "--null"]) as (proc, err):
            assert proc.stdout is not None
            tail = b""
            while chunk := proc.stdout.read(1 << 20):
                block = tail + chunk
                cut = block.rfind(b"\0")
                tail = block[cut + 1 :]
                if cut >= 0:  # every path starts with "./" (_target)
                    text = ("\0" + block[:cut + 1].decode(_FS, _FS_ERRORS)).replace("\0./", "\0")
                    rels = _holding(text, query.literal)
                    paths.extend(visible([r for r in rels if accept(r)], text))
            proc.wait()
            return paths.found(_skips(err, _everything))

    def grep(self, query: Query, pattern: Pattern) -> Found:
        if query.start_is_file and self._binary_file(query.start):
            skips = Skips()
            skips.add("binary", query.start)
            return Found([], 0, False, skips.counts())
        wanted = _name_filter(query)
        hits = HitCollector(MAX_HITS, COUNT_LIMIT)
        with self._run(query, _grep_args(pattern)) as (proc, err):
            _read_hits(proc, hits, wanted, self._shown)
            if not hits.over:
                code = proc.wait()
                _raise_on_error(code, err, pattern, hits)
                return hits.found(_skips(err, wanted))
        first = HitCollector(MAX_HITS, MAX_HITS)
        with self._run(query, [*_grep_args(pattern), "--sort", "path"]) as (proc, err):
            _read_hits(proc, first, wanted, self._shown)
            proc.kill()
            proc.wait()
            return first.found(_skips(err, wanted), limit=COUNT_LIMIT)

    def _shown(self, rel: str) -> bool:
        """Never a protected file, even if ripgrep's overrides let one through."""
        return self.root.covered(rel) is None

    def _binary_file(self, rel: str) -> bool:
        # ripgrep searches a file named on its command line even when it is binary.
        with self.root.open_file(self.root.resolve(rel)) as fd:
            return is_binary(fd)

    @contextmanager
    def _run(self, query: Query, extra: list[str]) -> Iterator[tuple[subprocess.Popen[bytes], IO[bytes]]]:
        with tempfile.TemporaryFile() as err, _parent_rules_file(query) as ignore_file:
            args = [self.exe, *_walk_args(query, ignore_file, self.protect), *extra, "--",
                    _target(query)]
            args = fenced(args, str(self.root.path), [ignore_file] if ignore_file else [])
            proc = subprocess.Popen(args, cwd=self.root.path, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=err)
            assert proc.stdout is not None
            with suppress(OSError):  # a pipe of 64 KB stops rg every 64 KB until we read
                fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
            try:
                yield proc, err
            finally:
                if proc.poll() is None:
                    proc.kill()
                assert proc.stdout is not None
                proc.stdout.close()
                proc.wait()


def _holding(text: str, literal: str) -> list[str]:
    """The paths of ``text`` (each between NULs) that may match: all of them, or when the
    pattern's ``literal`` is rare in the block (a name such as ``file_42*``), only those
    holding it, found by ``str.find`` without splitting the block."""
    if len(literal) < 3 or "\ufffd" in literal or text.count(literal) * 8 > text.count("\0"):
        return text[1:-1].split("\0")
    return list(_paths_with(text, literal))


def _paths_with(text: str, needle: str) -> Iterator[str]:
    """Each path of ``text`` (NUL-separated, NUL at both ends) holding ``needle``, once."""
    at = text.find(needle)
    while at >= 0:
        first = text.rfind("\0", 0, at) + 1
        last = text.find("\0", at)
        yield text[first:last]
        at = text.find(needle, last)


class _Visible:
    """:meth:`RgEngine._shown` for the paths of a listing, a block at a time.

    When the protected lines are names of plain text and ``*`` (the defaults), a path can
    be protected only if one of its parts ends or starts as one of them does, so holds
    that text: the block's text (paths between NULs) is searched for those texts
    (``str.find``, a fast scan) and only the paths holding one are checked. Otherwise each folder is checked once and
    each file on its own."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self.protect = root.protect
        rules = self.protect.rules if self.protect is not None else None
        self.needles: list[str] | None = None  # a protected path holds one of them
        if isinstance(rules, Rules) and rules.by_name and rules.ends is not None:
            texts = sorted({*rules.ends, *rules.starts})  # ".env" finds ".env.local" too
            self.needles = [t for t in texts if not any(o in t for o in texts if o != t)]
        self.folders: dict[str, bool] = {}  # folder -> protected (it or one above it)
        self.hidden_folders = False

    def __call__(self, rels: list[str], text: str) -> list[str]:
        """``rels`` less the protected; ``text``: the block they come from, each path
        between NULs (``\0a\0b/c\0``)."""
        if self.protect is None:
            return rels
        if self.needles is not None:
            dropped = {rel for rel in self._suspects(text) if self.root.covered(rel) is not None}
            return [r for r in rels if r not in dropped] if dropped else rels
        for folder in {r.rpartition("/")[0] for r in rels}.difference(self.folders):
            hidden = bool(folder) and self.root.covered(folder, is_dir=True) is not None
            self.folders[folder] = hidden
            self.hidden_folders |= hidden
        if self.hidden_folders:
            rels = [r for r in rels if not self.folders[r.rpartition("/")[0]]]
        return [r for r in rels if self.protect.entry(r, False) is None]

    def _suspects(self, text: str) -> set[str]:
        """The paths of ``text`` holding a text a protected name ends or starts with
        (each needle ends with a character rarer than a separator: ``str.find`` skips
        ahead fast; a needle ending with NUL or '/' made it ~10x slower)."""
        return {path for needle in self.needles or () for path in _paths_with(text, needle)}


def _walk_args(query: Query, ignore_file: str | None, protect: list[str]) -> list[str]:
    args = ["--no-config", "--debug", "--no-require-git", "--no-ignore-parent",
            "--no-ignore-global", "--no-ignore-exclude"]
    if query.include_ignored:
        args += ["--no-ignore", "--hidden"]
    else:
        args += ["-g", _HIDDEN_GLOB]
    args += ["-g", "!.git"]
    for glob in protect:  # after "!.*": the last matching override is the one logged
        args += ["-g", glob]
    if ignore_file:
        args += ["--ignore-file", ignore_file]
    return args


def _grep_args(pattern: Pattern) -> list[str]:
    return ["--json", *(["-i"] if pattern.ignore_case else []), "-e", pattern.regex]


def _target(query: Query) -> str:
    return "." if query.start == "." else f"./{query.start}"


@contextmanager
def _parent_rules_file(query: Query) -> Iterator[str | None]:
    if not query.parent_rules or query.include_ignored:
        yield None
        return
    with tempfile.NamedTemporaryFile("w", suffix=".ignore", encoding="utf-8") as fh:
        fh.write("\n".join(query.parent_rules) + "\n")
        fh.flush()
        yield fh.name


def _name_filter(query: Query) -> Callable[[str], object]:
    """grep's ``glob``, applied to what ripgrep found.

    Not given to ripgrep as a file type: ``--debug`` logs every file a type lets
    through, which costs ~30 us a file; dropping the other files' hits costs nothing
    more than a grep without a glob.
    """
    if not query.name_glob or query.start_is_file:
        return _everything
    return glob_test(query.name_glob, any_folder=True)


def _everything(rel: str) -> bool:
    return True


def _read_hits(proc: subprocess.Popen[bytes], hits: HitCollector,
               wanted: Callable[[str], object], shown: Callable[[str], bool]) -> None:
    """Feed ripgrep's JSON lines to ``hits`` until it ends or ``hits`` has enough."""
    assert proc.stdout is not None
    for raw in proc.stdout:
        if raw.startswith(b'{"type":"match"'):
            data = json.loads(raw)["data"]
            text = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
            rel = _rel(_text(data["path"]))
            if wanted(rel) and shown(rel) and hits.add(Hit(rel, data["line_number"],
                                                           clip_line(text))):
                return
        elif raw.startswith(b'{"type":"end"'):
            hits.end_file(json.loads(raw)["data"]["binary_offset"] is not None)


def _text(field: dict[str, Any]) -> str:
    if "text" in field:
        return str(field["text"])
    return os.fsdecode(base64.b64decode(field["bytes"]))


def _rel(path: str) -> str:
    return path.removeprefix("./")


def _skips(err: IO[bytes], wanted: Callable[[str], object]) -> Skips:
    skips = Skips()
    err.seek(0)
    for line in err:
        if m := _WALK.match(line):
            kind = _skip_kind(m[2], m[3])
            if kind:
                skips.add(kind, _rel(m[1].decode("utf-8", "replace")))
        elif (m := _BINARY.match(line)) and wanted(rel := _rel(m[1].decode("utf-8", "replace"))):
            skips.add("binary", rel)
    return skips


def _skip_kind(match: bytes, detail: bytes) -> str | None:
    if match == b"Hidden":
        return "hidden"
    if match == b"Gitignore":
        return "ignored"
    if match == b"Override" and f'original: "{_HIDDEN_GLOB}"'.encode() in detail:
        return "hidden"
    if match == b"Override" and b'original: "!.git"' not in detail:
        return "protected"  # every other override we give is a protected glob
    return None  # .git, or a file the name glob leaves out


def _raise_on_error(code: int, err: IO[bytes], pattern: Pattern, hits: HitCollector) -> None:
    if code != 2 or hits.count:
        return  # 2 with hits: some file could not be read; ripgrep went on
    err.seek(0)
    lines = [ln.decode("utf-8", "replace").rstrip() for ln in err
             if not ln.startswith(b"rg: DEBUG|")]
    lines = [ln for ln in lines if ln]
    if lines and lines[0].startswith(_REGEX_ERRORS):
        detail = [ln.removeprefix("error: ") for ln in lines if ln.startswith("error: ")]
        why = detail[0] if detail else lines[0].removeprefix("rg: ")
        raise ToolError(f"pattern {pattern.regex!r} is not a valid regex (ripgrep/Rust syntax): {why}")
    if lines and not any("os error" in ln for ln in lines):
        raise ToolError(f"ripgrep failed: {lines[0].removeprefix('rg: ')}")
