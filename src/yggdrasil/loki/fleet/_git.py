"""git, run the way a fleet worker needs it: no prompts, no hooks, bounded output.

Also :class:`Snapshots`: the state of a working copy as a git tree, kept in a throwaway
git folder of its own (so neither the mirror nor the copy's own ``.git`` is touched), and
the binary diff between two states: the agent's patch.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

__all__ = ["GitError", "Snapshots", "bare_repository", "git", "git_bounded", "git_env", "mirror_lock"]

# Settings every call gets: never run a hook; only git's own transports (never ext:: or
# fd::, which run commands or use inherited descriptors, nor a remote helper a repo URL
# names); accept folders owned by another user (a fleet's cache often is).
_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "protocol.allow=never",
           *(arg for name in ("file", "git", "ssh", "http", "https")
             for arg in ("-c", f"protocol.{name}.allow=always")),
           "-c", "safe.directory=*", "-c", "gc.auto=0", "-c", "advice.detachedHead=false")
_READ = 1 << 16


class GitError(RuntimeError):
    """A git command failed; the message holds the command and git's own words."""


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for git: ours without GIT_* settings, and never a prompt."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="/bin/true", GIT_CONFIG_NOSYSTEM="1",
               LC_ALL="C")
    env.update(extra or {})
    return env


def git(args: Sequence[str], *, cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None, timeout: float | None = None,
        data: bytes | None = None) -> str:
    """Run ``git args``; its stdout, or GitError with the tail of its stderr."""
    argv = ["git", *_CONFIG, *args]
    try:
        done = subprocess.run(argv, cwd=cwd, env=git_env(env), input=data,
                              stdin=None if data is not None else subprocess.DEVNULL,
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {' '.join(args[:3])} did not finish in {timeout:.0f}s") from exc
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}; the fleet needs git installed") from exc
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip()[-1500:]
        raise GitError(f"git {' '.join(args[:4])} failed (exit {done.returncode}): {said}")
    return done.stdout.decode("utf-8", "surrogateescape")


def git_bounded(args: Sequence[str], limit: int, *, env: Mapping[str, str]) -> bytes | None:
    """``git args`` stdout, or None when it is longer than ``limit`` bytes (git is stopped)."""
    proc = subprocess.Popen(["git", *_CONFIG, *args], env=git_env(env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    chunks, size = [], 0
    while chunk := proc.stdout.read(_READ):
        size += len(chunk)
        if size > limit:
            proc.kill()
            proc.wait()
            return None
        chunks.append(chunk)
    err = proc.stderr.read()
    if proc.wait() != 0:
        said = err.decode("utf-8", "replace").strip()[-1500:]
        raise GitError(f"git {' '.join(args[:3])} failed (exit {proc.returncode}): {said}")
    return b"".join(chunks)


@contextlib.contextmanager
def mirror_lock(mirror: Path) -> Iterator[None]:
    """The node-wide lock of one mirror (``<mirror>.lock``), for whoever changes it.

    An flock: released when its holder exits, even when it is killed.
    """
    with open(mirror.with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def bare_repository(git_dir: Path) -> None:
    """An empty bare repository in ``git_dir`` (a new folder), written here rather than by
    ``git init``: what git needs and nothing else (no hook samples), and no process."""
    git_dir.mkdir()
    for folder in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (git_dir / folder).mkdir(parents=True)
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (git_dir / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")


class Snapshots:
    """Trees of ``work_tree`` stored in ``git_dir``, a git folder made for it alone.

    ``objects`` (a mirror's object store) is borrowed read-only as an alternate, so files
    the commit already has are not stored again. Ignore rules are the tree's own
    ``.gitignore`` files only: nothing from the machine (global excludes) changes a patch.
    """

    def __init__(self, git_dir: Path, work_tree: Path, objects: Path | None = None) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree
        bare_repository(git_dir)
        if objects is not None:
            (git_dir / "objects" / "info" / "alternates").write_text(f"{objects}\n")
        self.env = {"GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(work_tree),
                    "GIT_INDEX_FILE": str(git_dir / "snapshot-index")}

    def take(self) -> str:
        """The id of a tree holding every file of the work tree (except ignored ones)."""
        git(["-c", "core.excludesFile=/dev/null", "-c", "core.autocrlf=false",
             "add", "--all", "--", "."],
            cwd=self.work_tree, env=self.env)
        return git(["write-tree"], cwd=self.work_tree, env=self.env).strip()

    def diff(self, before: str, after: str, limit: int) -> bytes | None:
        """The binary patch from ``before`` to ``after``; None when over ``limit`` bytes."""
        return git_bounded(["diff", "--binary", "--no-color", "--no-ext-diff", "--no-renames",
                            before, after], limit, env=self.env)

    def changed(self, before: str, after: str) -> list[str]:
        out = git(["diff", "--name-only", "-z", "--no-renames", before, after], env=self.env)
        return [name for name in out.split("\0") if name]

    def apply(self, patch: bytes) -> None:
        """Apply ``patch`` to the work tree (not beyond a symlink, not outside it)."""
        git(["apply", "--whitespace=nowarn", "-"], cwd=self.work_tree, env=self.env, data=patch)
