"""The commands a starting program counts as, for the rules at exec time.

The supervisor gives the path a program was started by, the file name that path reaches
after every link, and the argv it got. A rule's program matches any of these names:

- the path's own file name, the file reached (``/usr/lib/git-core/git-push`` -> ``git``),
  and ``argv[0]``'s (multi-call programs such as busybox pick their applet by it);
- each without a version suffix (``python3.11`` is also ``python3`` and ``python``);
- a copy of a rule's program (the same size and SHA-256 as the file found on PATH)
  under any name;
- a multi-call helper ``<tool>-<sub>`` of a rule's tool is ``<tool> <sub>``
  (``git-push``, ``git-receive-pack``), and git's plumbing that pushes (``send-pack``,
  ``receive-pack``, ``http-push``) counts as ``git push``.

A word past what was read (a very long argv) is unknown: it matches any rule word.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable

from ..sandbox import Exec
from ._cmdline import Word

_VERSION = re.compile(r"[\d.]+$")
_SAME_AS = {("git", "send-pack"): "push", ("git", "receive-pack"): "push",
            ("git", "http-push"): "push"}
# git's global options that take the next word as their value
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace",
                         "--super-prefix", "--config-env", "--list-cmds", "--attr-source"})
# configuration that makes a git subcommand run something else than it says
_GIT_SMUGGLING = ("alias.", "include.", "includeif.", "core.sshcommand")


def exec_commands(ex: Exec, tools: Iterable[str], twins: Twins | None = None,
                  ) -> list[list[Word]]:
    """The words of every command ``ex`` counts as; ``tools`` are the rules' programs,
    ``twins`` their files (a copy of one counts as it)."""
    args = [Word(a) for a in ex.argv[1:]]
    if ex.cut:
        args.append(Word("...", dynamic=True))
    found: list[list[Word]] = []
    names = _names(ex)
    if twins is not None:
        names += [n for n in twins.names_of(ex) if n not in names]
    for name in names:
        found.append([Word(name), *args])
        for tool in tools:
            if name.startswith(tool + "-") and len(name) > len(tool) + 1:
                found.append([Word(tool), Word(name[len(tool) + 1:]), *args])
    for words in list(found):
        same = _SAME_AS.get((words[0].text, words[1].text if len(words) > 1 else ""))
        if same is not None:
            found.append([words[0], Word(same), *words[2:]])
    return found


class Twins:
    """The files of the rules' programs (as found on PATH, and git's own copy in its exec
    path), by size and SHA-256: a copy of one under another name counts as it."""

    def __init__(self, tools: Iterable[str]) -> None:
        self.by_size: dict[int, list[tuple[str, str]]] = {}  # size -> [(path, tool)]
        self._digests: dict[str, bytes] = {}
        for tool in tools:
            paths = [shutil.which(tool)]
            if tool == "git":
                paths.append(os.path.join(_git_exec_path(), "git"))
            for path in {os.path.realpath(p) for p in paths if p}:
                with contextlib.suppress(OSError):
                    self.by_size.setdefault(os.stat(path).st_size, []).append((path, tool))

    def names_of(self, ex: Exec) -> list[str]:
        same = self.by_size.get(ex.size)
        if not same:
            return []
        digest = ex.digest()
        return [tool for path, tool in same if digest and digest == self._digest(path)]

    def _digest(self, path: str) -> bytes:
        if path not in self._digests:
            try:
                with open(path, "rb") as fh:
                    self._digests[path] = hashlib.file_digest(fh, "sha256").digest()
            except OSError:
                self._digests[path] = b""
        return self._digests[path]


def _names(ex: Exec) -> list[str]:
    names: list[str] = []
    for raw in (os.path.basename(ex.path), ex.program,
                os.path.basename(ex.argv[0]) if ex.argv else ""):
        for name in (raw, _VERSION.sub("", raw), re.sub(r"\d+$", "", _VERSION.sub("", raw))):
            if name and name not in names:
                names.append(name)
    return names


def shown(ex: Exec, words: list[Word]) -> str:
    """The command as the user reads it, whole: ``git push origin main``."""
    return command_text(w.text for w in words)


MAX_ASKED = 4_000  # characters of a command a question shows whole; a longer one is refused
NOTE_CHARS = 300  # characters of a command a refusal's note shows
_FOLD = 100  # characters per line of a question
_INDENT = "    "  # before each line after the first
# C0 and C1 controls, DEL, and the bidi marks and overrides that reorder what is shown
_UNSEEN = [*range(0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
           *range(0x2066, 0x206A)]
_ESCAPES = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in _UNSEEN}


def command_text(texts: Iterable[str]) -> str:
    """Words as one line the user can read back exactly: each shell-quoted when it needs
    it (a space or a quote cannot blur where a word ends), control characters escaped."""
    return " ".join(shlex.quote(t) for t in texts).translate(_ESCAPES)


def folded(text: str) -> str:
    """``text`` in lines of at most _FOLD characters, the later ones indented: all of it."""
    if len(text) <= _FOLD:
        return text
    rest = _FOLD - len(_INDENT)
    lines = [text[:_FOLD], *(text[i:i + rest] for i in range(_FOLD, len(text), rest))]
    return ("\n" + _INDENT).join(lines)


def clipped(text: str) -> str:
    return text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS] + " ..."


def git_smuggles(words: list[Word]) -> str:
    """Why a git command may run another subcommand than it names ('' if it cannot):
    configuration given on its command line that defines aliases or runs programs, or a
    subcommand git does not have (an alias, from any configuration)."""
    i = 1
    while i < len(words):
        text = words[i].text
        if words[i].dynamic:
            return ""  # unknown words match every rule word already
        value = (words[i + 1].text if i + 1 < len(words) else "") if text in _GIT_VALUED else (
            text.partition("=")[2] if text.startswith("--config-env=") else None)
        if text in ("-c", "--config-env") or text.startswith("--config-env="):
            key = (value or "").split("=", 1)[0].lower()
            if key.startswith(_GIT_SMUGGLING):
                return f"git configuration on its command line ({key}) can change what it runs"
        if text in _GIT_VALUED:
            i += 2
            continue
        if text.startswith("-"):
            i += 1
            continue
        if not _git_has(text):
            return f"{text!r} is not a git command, so it may be an alias of one"
        return ""
    return ""


@functools.lru_cache(maxsize=512)
def _git_has(sub: str) -> bool:
    if "/" in sub or sub.startswith("."):
        return False
    return os.path.exists(os.path.join(_git_exec_path(), f"git-{sub}"))


@functools.lru_cache(maxsize=1)
def _git_exec_path() -> str:
    try:
        done = subprocess.run(["git", "--exec-path"], capture_output=True, text=True,
                              timeout=10, stdin=subprocess.DEVNULL)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "/usr/lib/git-core"
