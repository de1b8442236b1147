"""Files git takes commands from: no tool writes them unless the user allows it.

A ``core.fsmonitor``, ``core.hooksPath``, an alias or a filter driver in ``.git/config``,
an executable in ``.git/hooks``, a ``.git/commondir`` naming another folder (git then
reads *that* folder's config) or a ``.git`` file naming another git folder: each runs a
command of the writer's choice the next time the user runs ``git status`` or ``git
commit``, outside any fence. Commands get ``config`` and ``hooks`` read-only in their
mount namespace (``git_writable=False``); :class:`~._root.Root` refuses the file tools
(write, edit, patch, a web save) the same paths, and a few more that a mount cannot
cover because they need not exist yet.
"""

from __future__ import annotations

_GIT_CODE_NAMES = frozenset({"config", "config.worktree", "commondir"})
HOW_TO_ALLOW_GIT = "the user allows it with filesystem_toolbox(git_writable=True)"


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
