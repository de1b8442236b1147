"""Working copies: a git worktree of the node's bare mirror at the commit, or a folder copy.

A git repository (a local path or a URL) is cloned once per node into the fleet cache as
a bare mirror (``<cache>/mirrors/<hash>-<name>.git``), under a file lock so that workers
on one node clone or fetch it once; each attempt then adds a detached worktree at the
commit, which costs a checkout, not a clone. git does not guard its list of worktrees
against concurrent writers (one ``worktree add`` can read another's half-written record
and fail), so adding a record and pruning them happen under the mirror's lock, while the
checkout and the removal of the files, the slow parts, do not. A plain folder is copied
(symlinks kept as links, FIFOs, sockets and devices skipped).

Creating and deleting every file of a checkout is most of an attempt's cost, so a worker
keeps its worktree when an attempt is done (:meth:`WorkingCopy.park`, one per mirror, in a
folder of its own that is swept when it dies) and its next attempt on that mirror moves
it back and restores it (``git clean`` then ``git reset --hard`` to the commit: only what
the agent changed, and the files two commits differ in, are written). verify runs in the
agent's copy restored the same way, instead of a second checkout.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ._git import GitError, git, mirror_lock
from ._scratch import Workspace, prune
from ._task import Task
from ._urls import Remote, is_url, remote, shown_repo

__all__ = ["REFRESH", "CopyError", "WorkingCopy", "is_git_repo"]

# When a mirror is fetched before a working copy is made from it (it always is when it
# lacks the commit): ``auto`` once per fleet run when the task names a branch, a tag or
# no commit (HEAD), never for a full hash it has; ``always`` for every attempt; ``never``.
REFRESH = ("auto", "always", "never")
_FULL_HASH = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_FETCHED = "loki-fetched"  # in a mirror: the run that fetched it last
_CHECKED: dict[Path, str] = {}  # mirrors whose stored URL this process has checked
_PARKED: dict[Path, WorkingCopy] = {}  # mirror: the worktree of it this process parked


class CopyError(RuntimeError):
    """The task's repository or commit cannot be had; ``final``: retrying cannot help."""

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


def is_git_repo(repo: str) -> bool:
    """A URL, a work tree (``.git`` inside) or a bare repository (``HEAD`` and ``objects``)."""
    if is_url(repo):
        return True
    path = Path(repo)
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


@dataclass
class WorkingCopy:
    """Where a task runs: ``path``, at ``commit`` (a full hash, '' for a plain folder)."""

    path: Path
    commit: str
    mirror: Path | None  # the bare mirror it is a worktree of; None for a folder copy
    admin: Path | None = None  # the mirror's record of the worktree (its git folder)

    @property
    def objects(self) -> Path | None:
        return self.mirror / "objects" if self.mirror is not None else None

    @classmethod
    def create(cls, task: Task, path: Path, space: Workspace, commit: str | None = None, *,
               refresh: str = "auto", run: str = "") -> WorkingCopy:
        """A working copy of ``task.repo`` at ``commit`` (default: the task's) in ``path``;
        ``refresh`` says when the mirror is fetched first (see :data:`REFRESH`), ``run``
        names the fleet run (``auto`` fetches once per run)."""
        commit = commit or task.commit
        if is_git_repo(task.repo):
            origin = remote(task.repo)
            mirror = _mirror(task.repo, origin, space)
            if _stale(mirror, commit, refresh, run):
                _fetch(mirror, origin, run)
            sha = _resolve(mirror, commit, task.repo, origin)
            reused = _unpark(mirror, path, sha)
            if reused is not None:
                return reused
            copy = cls(path, sha, mirror)
            with mirror_lock(mirror):  # git reads every worktree's record: one writer at a time
                git(["--git-dir", str(mirror), "worktree", "add", "--quiet", "--no-checkout",
                     "--detach", str(path), sha])
            try:
                copy.admin = _admin(mirror, path)
                git(["reset", "--quiet", "--hard"], cwd=path)  # the checkout, unlocked
            except BaseException:
                copy.remove()
                raise
            return copy
        if commit:
            raise CopyError(f"task {task.id}: commit {commit!r} given, but {task.repo} is not "
                            "a git repository (a plain folder is copied as it is)", final=True)
        if not Path(task.repo).is_dir():
            raise CopyError(f"task {task.id}: repo {task.repo} is neither a git repository "
                            "nor a folder", final=True)
        shutil.copytree(task.repo, path, symlinks=True, ignore=_special_files)
        return cls(path, "", None)

    def restore(self) -> None:
        """Put a worktree back as :meth:`create` made it, at ``commit``: every file git
        does not track removed (untracked, ignored, nested repositories), tracked ones
        rewritten where they differ, ``.git`` written again. Cheaper than a fresh copy:
        only what changed is touched. GitError when git cannot (the caller then makes a
        fresh copy); CopyError for a folder copy (nothing to restore it from).

        git is pointed at the mirror's record explicitly, never through the copy's own
        ``.git``, and cleans before it checks out: nothing the agent left there (a
        ``.git`` of its own, a ``.gitattributes`` that converts files) steers it."""
        if self.admin is None:
            raise CopyError("a folder copy cannot be restored; make a fresh one")
        dotgit = self.path / ".git"
        if dotgit.is_dir() and not dotgit.is_symlink():
            shutil.rmtree(dotgit)
        else:
            dotgit.unlink(missing_ok=True)
        dotgit.write_text(f"gitdir: {self.admin}\n")
        env = {"GIT_DIR": str(self.admin), "GIT_WORK_TREE": str(self.path)}
        _open_up(self.path)
        git(["clean", "-ffdxq"], cwd=self.path, env=env)  # fails on what it cannot remove
        git(["reset", "--quiet", "--hard", self.commit], cwd=self.path, env=env)

    def move(self, path: Path) -> None:
        """Move a worktree to ``path`` (a rename: the same file system), telling the
        mirror's record (under the mirror's lock: a prune must never see it missing)."""
        assert self.mirror is not None and self.admin is not None
        with mirror_lock(self.mirror):
            os.rename(self.path, path)
            self.path = path
            record = self.admin / "gitdir.new"
            record.write_text(f"{path / '.git'}\n")
            record.replace(self.admin / "gitdir")

    def park(self, space: Workspace) -> None:
        """Done with the copy: a worktree is kept (as it is; restored when taken again)
        in this process's parking folder for its next attempt on the same mirror, which
        then rewrites only what changed instead of checking out every file; anything
        else is removed."""
        if self.mirror is None or self.admin is None:
            self.remove()
            return
        old = _PARKED.pop(self.mirror, None)
        if old is not None:
            old.remove()
        try:
            self.move(space.parking() / self.mirror.name)
        except OSError:
            self.remove()
            return
        _PARKED[self.mirror] = self

    def remove(self) -> None:
        """Delete the copy (and, for a worktree, the mirror's record of it)."""
        _open_up(self.path)
        shutil.rmtree(self.path, ignore_errors=True)
        if self.mirror is None:
            return
        if self.admin is None:  # the record is not known: git finds it
            prune(self.mirror)
            return
        with mirror_lock(self.mirror):  # what `git worktree prune` does for this one alone
            shutil.rmtree(self.admin, ignore_errors=True)


def _open_up(top: Path) -> None:
    """Give the owner every right on each folder under ``top`` (links not followed), so
    that what the agent locked (a folder it can enter but not list, ``chmod 111``) can be
    listed and emptied by anyone but root, who needs no rights."""
    stack = [str(top)]
    while stack:
        folder = stack.pop()
        try:
            mode = os.lstat(folder).st_mode
            if not stat.S_ISDIR(mode):
                continue
            if mode & 0o700 != 0o700:
                os.chmod(folder, stat.S_IMODE(mode) | 0o700)
            with os.scandir(folder) as entries:
                stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            continue


def _unpark(mirror: Path, path: Path, sha: str) -> WorkingCopy | None:
    """The copy of ``mirror`` this process parked, moved to ``path`` and restored at
    ``sha``; None when there is none or it cannot be (it was swept, git failed)."""
    parked = _PARKED.pop(mirror, None)
    if parked is None:
        return None
    try:
        parked.move(path)
        parked.commit = sha
        parked.restore()
    except (GitError, OSError):
        parked.remove()
        return None
    return parked


def _admin(mirror: Path, path: Path) -> Path:
    """The mirror's record of the worktree just added at ``path`` (read from the ``.git``
    file git wrote there: nothing else has run in the copy yet)."""
    said = (path / ".git").read_text().strip()
    admin = Path(said.removeprefix("gitdir:").strip())
    if not said.startswith("gitdir:") or admin.parent != mirror / "worktrees":
        raise GitError(f"unexpected worktree record {said!r} for {path}")
    return admin


def _special_files(folder: str, names: list[str]) -> list[str]:
    """Entries copytree must not open: a FIFO would block it, a device is not a file."""
    skipped = []
    for name in names:
        try:
            mode = os.lstat(os.path.join(folder, name)).st_mode
        except OSError:
            skipped.append(name)
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            skipped.append(name)
    return skipped


def _mirror_path(repo: str, space: Workspace) -> Path:
    name = re.sub(r"[^A-Za-z0-9._-]", "_", repo.rstrip("/").rsplit("/", 1)[-1]).removesuffix(".git")
    digest = hashlib.sha256(repo.encode()).hexdigest()[:16]
    return space.mirrors / f"{digest}-{name[:40] or 'repo'}.git"


def _mirror(repo: str, origin: Remote, space: Workspace) -> Path:
    """The node's bare mirror of ``repo``, cloned on first use (atomically: a clone cut
    short by a killed worker leaves only a temp folder, never a half mirror).

    git is given the URL without its credentials (they go in ``origin.env``, for the clone
    alone), so the mirror's config, which every working copy shows, never holds a token.
    The mirrors of one URL with different credentials stay apart (the path hashes ``repo``
    whole): a token never reads what only another could."""
    mirror = _mirror_path(repo, space)
    if mirror.is_dir():
        if _CHECKED.get(mirror) != origin.url:  # once per worker process, not per attempt
            _forget_credentials(mirror, origin.url)
            _CHECKED[mirror] = origin.url
        return mirror
    with mirror_lock(mirror):
        if mirror.is_dir():
            return mirror
        temp = Path(tempfile.mkdtemp(prefix=".clone-", dir=space.mirrors))
        try:
            git(["clone", "--quiet", "--mirror", "--", origin.url, str(temp / "m.git")],
                env=origin.env)
        except GitError as exc:
            raise CopyError(f"cannot clone {shown_repo(repo)}: {exc}") from exc
        else:
            (temp / "m.git").rename(mirror)
        finally:
            shutil.rmtree(temp, ignore_errors=True)
    return mirror


def _forget_credentials(mirror: Path, url: str) -> None:
    """Point a mirror at ``url`` when it says otherwise: one cloned by an older version
    with the token in its ``remote.origin.url``."""
    def stored() -> str:
        with contextlib.suppress(GitError):
            return git(["--git-dir", str(mirror), "config", "--get", "remote.origin.url"]).strip()
        return ""

    if stored() == url:
        return
    with mirror_lock(mirror):
        if stored() != url:
            git(["--git-dir", str(mirror), "config", "remote.origin.url", url])


def _stale(mirror: Path, commit: str | None, refresh: str, run: str) -> bool:
    if refresh == "always":
        return True
    if refresh == "never" or (commit and _FULL_HASH.fullmatch(commit)):
        return False
    try:
        return not run or (mirror / _FETCHED).read_text() != run
    except OSError:
        return True


def _fetch(mirror: Path, origin: Remote, run: str) -> None:
    """Bring the mirror up to date with its origin (once per run: workers that wait on the
    lock find it done). A fetch that fails leaves the mirror as it was: the task then runs
    on what the node has, or fails saying its commit is missing."""
    with mirror_lock(mirror):
        try:
            if run and (mirror / _FETCHED).read_text() == run:
                return
        except OSError:
            pass
        with contextlib.suppress(GitError):
            git(["--git-dir", str(mirror), "fetch", "--quiet", "--prune", "origin"],
                env=origin.env)
            (mirror / _FETCHED).write_text(run)


def _resolve(mirror: Path, commit: str | None, repo: str, origin: Remote) -> str:
    """The full hash of ``commit`` (default HEAD), fetching once when the mirror lacks it."""
    wanted = commit or "HEAD"
    sha = _rev_parse(mirror, wanted)
    if sha:
        return sha
    with mirror_lock(mirror):
        for fetch in (["fetch", "--quiet", "origin"], ["fetch", "--quiet", "origin", wanted]):
            with contextlib.suppress(GitError):
                git(["--git-dir", str(mirror), *fetch], env=origin.env)
            sha = _rev_parse(mirror, wanted)
            if sha:
                return sha
    raise CopyError(f"commit {wanted!r} is not in {shown_repo(repo)} (fetched it again "
                    "to be sure)",
                    final=True)


def _rev_parse(mirror: Path, wanted: str) -> str:
    try:
        return git(["--git-dir", str(mirror), "rev-parse", "--verify", "--quiet",
                    "--end-of-options", f"{wanted}^{{commit}}"]).strip()
    except GitError:
        return ""
