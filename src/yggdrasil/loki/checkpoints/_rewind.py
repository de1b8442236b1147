"""Putting paths back as a checkpoint saw them, through ``Root`` and nothing else.

A rewind is a list of ``Change``: a path, what the last checkpoint saw there
(``expected``) and what it should become (``target``). Each is checked before it is
touched: a path that is not as the last checkpoint saw it was changed by someone else
since, and is kept (listed, never overwritten); a protected path is never written; a
target whose bytes were not kept (too big, unreadable, a FIFO) cannot be made. Writes
are atomic renames (a hard link out of the root is replaced, never written through),
removals unlink the path itself (a link is removed, never followed), and every folder
on the way is walked from the root without following a link.

Two processes rewinding one root never mix: each holds ``lock_root`` (an flock on a
file beside the store) for the whole rewind; the second is refused at once.
"""

from __future__ import annotations

import difflib
import fcntl
import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import LokiError, ToolError
from ..files import Root, Store, StoreError, digest
from ..results import NotRestored, Restored
from ._state import State, lstat, observe, readlink, sig_of

__all__ = ["Change", "Outcome", "apply", "folders", "lock_root", "state_diff"]

DIFF_FILE = 1 << 20  # bytes: bigger files get a one-line note instead of a diff
DIFF_TOTAL = 200_000  # characters of diff in one result


@dataclass
class Change:
    """``by_content``: the path is as expected when its bytes and mode are (a fresh copy
    of the same tree, a fleet attempt's), not only its stat signature."""

    rel: str
    expected: State
    target: State
    refused: str = ""  # set when the plan already knows it cannot be done
    by_content: bool = False


@dataclass
class Outcome:
    done: list[Restored]
    not_restored: list[NotRestored]
    diff: str


@contextmanager
def lock_root(folder: Path, root: Path) -> Iterator[None]:
    """Hold the rewind lock of ``root``; ToolError when another process holds it."""
    locks = folder / "locks"
    locks.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = hashlib.sha256(os.fsencode(root)).hexdigest()[:24]
    fd = os.open(locks / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise ToolError(f"another rewind of {root} is running (pid {holder}); nothing was "
                            "changed: try again when it has finished") from None
        with suppress(OSError):  # who holds it, for the message; a full disk may refuse
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # lets go of the lock


def apply(root: Root, store: Store, changes: list[Change], *, dry_run: bool) -> Outcome:
    """Put each change's path back (or, ``dry_run``, only say what would be done); the
    diff is from the files now to the targets."""
    out = Outcome([], [], "")
    diffs: list[str] = []
    size = skipped = 0
    for change in sorted(changes, key=lambda c: c.rel):
        why = change.refused or _blocked(root, change)
        if why is None:
            continue  # already as the target
        if why:
            out.not_restored.append(NotRestored(path=change.rel, why=why))
            continue
        if size <= DIFF_TOTAL:  # past the cap no diff is shown: none is made
            diffs.append(_diff(root, store, change))
            size += len(diffs[-1])
        else:
            skipped += 1
        action = _action(change.target)
        if not dry_run:
            try:
                _put(root, store, change)
            except (LokiError, OSError) as exc:
                out.not_restored.append(NotRestored(path=change.rel,
                                                    why=f"could not put it back: {exc}"))
                continue
        out.done.append(Restored(path=change.rel, action=action))
    text = "".join(diffs)
    if len(text) > DIFF_TOTAL or skipped:
        text = (text[:DIFF_TOTAL] + f"\n# [diff cut at {DIFF_TOTAL} characters; "
                f"{skipped} more file(s) not shown]\n")
    out.diff = text
    return out


def folders(root: Root, remove: list[str], make: list[str], *,
            dry_run: bool) -> list[Restored]:
    """Remove the folders the later steps made, deepest first, where they are empty now
    (in a dry run: would be), and make again those they removed (empty ones: the files
    in them are written by ``apply``, which makes their folders)."""
    done = []
    for rel in sorted(remove, key=lambda d: -d.count("/")):
        st = lstat(root, rel)
        if st is None or not stat.S_ISDIR(st.st_mode) or root.covered(rel, True):
            continue
        try:
            gone = True if dry_run else root.remove(root.path / PurePosixPath(rel), folder=True)
        except (LokiError, OSError):
            gone = False
        if gone:
            done.append(Restored(path=rel, action="rmdir"))
    for rel in sorted(make):
        if lstat(root, rel) is not None or root.covered(rel, True):
            continue
        try:
            if not dry_run:
                with root.folder_fd(PurePosixPath(rel).parts, create=True):
                    pass
        except (LokiError, OSError):
            continue
        done.append(Restored(path=rel, action="mkdir"))
    return done


def _action(target: State) -> str:
    return {"absent": "remove", "link": "link"}.get(target.kind, "write")


def _blocked(root: Root, change: Change) -> str | None:
    """Why ``change`` cannot be made ('' when it can; None when nothing needs doing)."""
    rel, target, expected = change.rel, change.target, change.expected
    if root.covered(rel) is not None:
        return "protected: a rewind never writes a protected file"
    st = lstat(root, rel)
    if not (_same_content(root, rel, expected) if change.by_content else
            _as_expected(st, expected)):
        return ("changed since the last checkpoint, not by this run's steps (someone "
                "else's edit?); kept, never overwritten")
    if target.same(expected) or (target.kind == "absent" and st is None):
        return None
    if target.kind in ("unknown", "other"):
        return target.why or "its state at that step is not known"
    if target.kind == "file" and target.hash is None:
        return target.why or "its bytes were not kept"
    if st is not None and stat.S_ISDIR(st.st_mode):
        return "a folder stands there now; it is left as it is"
    return ""


def _as_expected(st: os.stat_result | None, expected: State) -> bool:
    if expected.kind == "absent":
        return st is None
    if expected.kind == "unknown":
        return True  # nothing to compare with: the target decides
    return st is not None and expected.sig == sig_of(st)


def _same_content(root: Root, rel: str, expected: State) -> bool:
    now = observe(root, rel, None, 0)
    if now.kind != expected.kind or now.kind == "unknown":
        return now.kind == expected.kind == "absent" or expected.kind == "unknown"
    if now.kind == "link":
        return now.link == expected.link
    if now.kind != "file" or expected.hash is None or now.mode != expected.mode:
        return False
    try:
        return digest(root.read_bytes(root.path / PurePosixPath(rel))) == expected.hash
    except (LokiError, OSError):
        return False


def state_diff(store: Store, rel: str, before: State, after: State) -> str:
    """The unified diff of ``rel`` from one kept state to another (a step's own change)."""
    old, new = _lines(store, before), _lines(store, after)
    name = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in rel)
    if isinstance(old, str) or isinstance(new, str):
        return f"# {name}: {old if isinstance(old, str) else new}\n"
    lines = difflib.unified_diff(old, new, "/dev/null" if before.kind == "absent" else f"a/{name}",
                                 "/dev/null" if after.kind == "absent" else f"b/{name}",
                                 lineterm="")
    text = "".join(f"{line}\n" for line in lines)
    if not text and before.mode != after.mode:
        return f"# {name}: mode {before.mode:o} -> {after.mode:o}\n"
    return text


def _lines(store: Store, state: State) -> list[str] | str:
    if state.kind in ("absent", "dir"):
        return []
    if state.kind == "link":
        return [f"-> {state.link}"]
    if state.kind != "file" or state.hash is None:
        return state.why or "not kept"
    if state.size > DIFF_FILE:
        return "too big to diff"
    try:
        data = store.read(state.hash)
    except StoreError as exc:
        return str(exc)
    if b"\0" in data:
        return "binary: no diff"
    return data.decode("utf-8", "replace").splitlines()


def _put(root: Root, store: Store, change: Change) -> None:
    real = root.path / PurePosixPath(change.rel)
    target = change.target
    st = lstat(root, change.rel)
    if target.kind == "absent":
        root.remove(real)
        return
    if st is not None and (target.kind == "link" or not stat.S_ISREG(st.st_mode)):
        root.remove(real)  # a link, FIFO or other file stands where the target goes
    if target.kind == "link":
        root.symlink(real, target.link or "")
        return
    assert target.hash is not None
    root.write_atomic(real, store.read(target.hash))
    root.set_mode(real, target.mode)


def _diff(root: Root, store: Store, change: Change) -> str:
    """The unified diff of ``rel`` from now (a/) to the target (b/), or a ``#`` line."""
    rel = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in change.rel)
    now, then = _side(root, store, change.rel, None), _side(root, store, change.rel, change.target)
    if isinstance(now, str) or isinstance(then, str):
        return f"# {rel}: {now if isinstance(now, str) else then}\n"
    old = "/dev/null" if lstat(root, change.rel) is None else f"a/{rel}"
    new = "/dev/null" if change.target.kind == "absent" else f"b/{rel}"
    lines = difflib.unified_diff(now, then, old, new, lineterm="")
    text = "".join(f"{line}\n" for line in lines)
    if not text and change.target.kind == "file":
        return f"# {rel}: mode {change.target.mode:o}\n"
    return text


def _side(root: Root, store: Store, rel: str, target: State | None) -> list[str] | str:
    """The lines of ``rel`` now (``target`` None) or of ``target``; a string says why not."""
    if target is None:
        st = lstat(root, rel)
        if st is None:
            return []
        if stat.S_ISLNK(st.st_mode):
            return [f"-> {readlink(root, rel)}"]
        if not stat.S_ISREG(st.st_mode) or st.st_size > DIFF_FILE:
            return "not a regular file, or too big to diff"
        try:
            data = root.read_bytes(root.path / PurePosixPath(rel))
        except (LokiError, OSError) as exc:
            return f"cannot be read ({exc})"
    else:
        return _lines(store, target)
    if b"\0" in data:
        return "binary: no diff"
    return data.decode("utf-8", "replace").splitlines()
