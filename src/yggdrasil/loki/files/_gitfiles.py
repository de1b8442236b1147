"""Files git takes commands from: no tool writes them unless the user allows it.

A ``core.fsmonitor``, ``core.hooksPath``, an alias or a filter driver in ``.git/config``,
an executable in ``.git/hooks``, a ``.git/commondir`` naming another folder (git then
reads *that* folder's config) or a ``.git`` file naming another git folder: each runs a
command of the writer's choice the next time the user runs ``git status`` or ``git
commit``, outside any fence. While the root locks them (``Root.locks_git``, unless the
user allows it), commands get ``config`` and ``hooks`` read-only in their mount
namespace and :class:`~._root.Root` refuses the file tools
(write, edit, patch, a web save) the same paths, and a few more that a mount cannot
cover because they need not exist yet.

A repository a command makes (``git init``, ``git clone`` inside the root) keeps its
``config``, cleaned by :func:`settings_that_run_nothing` of every key that could run a
command; hooks git never runs (``*.sample``) are left alone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

_GIT_CODE_NAMES = frozenset({"config", "config.worktree", "commondir"})


def git_code_path(rel: str) -> bool:
    """Whether git would take commands from the root-relative ``rel`` (or Mercurial: a
    ``.hg/hgrc``): a file named ``.git``, or below a ``.git`` folder (submodules' folders in ``.git/modules/``
    included) a ``config``, ``config.worktree`` or ``commondir``, or anything in ``hooks``."""
    parts = rel.split("/")
    if parts[-1] == ".git" or parts[-2:] == [".hg", "hgrc"]:  # Mercurial's hooks live there
        return True
    if ".git" not in parts[:-1]:
        return False
    below = parts[parts.index(".git") + 1 :]
    return below[-1] in _GIT_CODE_NAMES or "hooks" in below[:-1]


SETTINGS_FILE = "loki.toml"  # the project's settings (settings/): the fence, rules, hosts


def settings_path(rel: str) -> bool:
    """Whether ``rel`` is the project's loki settings file, which no tool and no command
    may change: an agent must not loosen its own next run."""
    return rel == SETTINGS_FILE


def is_new_repo_config(rel: str) -> bool:
    """``rel`` is the ``config`` file right below a ``.git`` folder."""
    parts = rel.split("/")
    return len(parts) >= 2 and parts[-2:] == [".git", "config"]


def inert_hook(rel: str) -> bool:
    """A file in a hooks folder that git never runs: only exact hook names run."""
    return rel.endswith(".sample") and "/hooks/" in f"/{rel}"


# The settings a freshly made or cloned repository needs, none of which runs a command:
# what the repository is, where its remotes are, which branch tracks which, who commits.
_SAFE = re.compile(r"""(
      core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase
              |precomposeunicode|symlinks)
    | remote\..+\.(url|pushurl|fetch|mirror|tagopt|promisor|partialclonefilter)
    | branch\..+\.(remote|merge|rebase|pushremote)
    | submodule\..+\.(url|active|branch)
    | extensions\.(objectformat|refstorage)
    | init\.defaultbranch | user\.(name|email)
)""", re.X)
_GIT_ENV = {"PATH": os.defpath, "GIT_CONFIG_NOSYSTEM": "1", "HOME": os.devnull, "LC_ALL": "C"}


def settings_that_run_nothing(text: bytes) -> tuple[bytes, list[str]] | None:
    """A git config with only the settings of ``_SAFE`` kept, and the keys dropped (which
    may run commands: ``core.fsmonitor``, ``alias.*``, ``filter.*``, an ``include``...);
    None when git is not installed or cannot read ``text`` (the caller removes it).
    git reads a private copy, never the file in the root (it could be a link)."""
    git = shutil.which("git", path=os.defpath) or shutil.which("git")
    if git is None:
        return None
    with tempfile.TemporaryDirectory(prefix="loki-gitconfig-") as tmp:
        source = os.path.join(tmp, "config")
        with open(source, "wb") as fh:
            fh.write(text)
        pairs = _listed(git, source)
        if pairs is None:
            return None
        kept = [(k, v) for k, v in pairs if _SAFE.fullmatch(k)]
        dropped = list(dict.fromkeys(k for k, _ in pairs if not _SAFE.fullmatch(k)))
        clean = _render(kept)
        with open(source, "wb") as fh:
            fh.write(clean)
        if _listed(git, source) != kept:  # what git reads back is exactly what was kept
            return None
    return clean, dropped


def _listed(git: str, path: str) -> list[tuple[str, str | None]] | None:
    try:
        done = subprocess.run([git, "config", "--file", path, "--no-includes", "--list", "-z"],
                              capture_output=True, env=_GIT_ENV, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    pairs: list[tuple[str, str | None]] = []
    for item in done.stdout.split(b"\0")[:-1]:
        key, newline, value = item.decode("utf-8", "surrogateescape").partition("\n")
        pairs.append((key, value if newline else None))
    return pairs


def _render(pairs: list[tuple[str, str | None]]) -> bytes:
    sections: dict[tuple[str, str | None], list[tuple[str, str | None]]] = {}
    for key, value in pairs:
        section, _, name = key.rpartition(".")
        head, dot, sub = section.partition(".")
        sections.setdefault((head, sub if dot else None), []).append((name, value))
    lines: list[str] = []
    for (head, subsection), items in sections.items():
        lines.append(f"[{head}]" if subsection is None
                     else f'[{head} "{_escaped(subsection)}"]')
        lines += [f"\t{name}" if value is None else f'\t{name} = "{_escaped(value)}"'
                  for name, value in items]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape") if lines else b""


def _escaped(text: str) -> str:
    return (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            .replace("\t", "\\t"))
