"""What a fleet runs and what it reports: ``Task`` in, ``TaskResult`` out, both plain JSON."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..results import did_you_mean, json_text
from ._urls import SCHEME, URL_SCHEMES, is_url, shown_repo

__all__ = ["Task", "TaskResult", "check_unique", "one_line"]

# An id names the task's folder under ``out``: one safe path component.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")
_START_FROM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}:[0-9]{1,9}")
_HELPER = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*::")  # git's <transport>::<address>, e.g. ext::
MAX_TIMEOUT = 7 * 24 * 3600.0


def _check_repo(repo: str) -> None:
    """Refuse what git would take as an option or a command rather than a repository."""
    if repo.startswith("-"):
        raise ValueError(f"repo {shown_repo(repo)!r} starts with '-' (git would take it as an option); "
                         "give a path (./-name for a folder so named) or a URL")
    scheme = SCHEME.match(repo)
    if scheme and scheme.group(1).lower() not in URL_SCHEMES:
        raise ValueError(f"repo URL scheme {scheme.group(1)!r} is not allowed; use "
                         f"{', '.join(s + '://' for s in URL_SCHEMES)}, user@host:path, "
                         "a local path or a folder")
    if not scheme and _HELPER.match(repo):
        raise ValueError(f"repo {shown_repo(repo)!r} names a git remote helper "
                         f"({repo.split('::', 1)[0]}::), which may run commands; use "
                         f"{', '.join(s + '://' for s in URL_SCHEMES)}, user@host:path, "
                         "a local path or a folder")


@dataclass(frozen=True)
class Task:
    """One unit of fleet work: a repository at a commit, a prompt, and how to grade it.

    ``repo`` is a git repository (a local path or a URL git can clone) or a plain folder
    (copied); a relative path is taken from the current folder (from the JSONL file's
    folder in :meth:`from_jsonl`). ``commit`` (a hash, tag or branch; git only) defaults
    to the repository's HEAD. ``setup`` is a shell command run in the working copy before
    the agent (trusted: it is not fenced); ``verify`` is run, fenced, in a fresh copy with
    only the agent's patch applied, and its exit code grades the run. ``max_steps`` bounds
    the agent's tool calls and ``timeout`` the whole attempt in seconds (setup and verify
    included). ``start_from`` (``"RUN:STEP"``: an earlier attempt's checkpoints, as its
    result names them, and one of their steps) starts the agent from the files that
    attempt had right after that step, in a fresh copy set up as usual; its patch then
    holds both attempts' changes (the basis for retries and search).
    """

    id: str
    repo: str
    prompt: str
    commit: str | None = None
    setup: str | None = None
    verify: str | None = None
    max_steps: int = 30
    timeout: float = 1800.0
    start_from: str | None = None

    def __post_init__(self) -> None:
        _check_text("id", self.id)
        if not _ID.fullmatch(self.id):
            raise ValueError(f"task id {self.id!r} is not allowed: use letters, digits and "
                             "'.', '_', '+', '-' (at most 200, starting with a letter or digit)")
        for name in ("repo", "prompt"):
            _check_text(name, getattr(self, name))
        _check_repo(self.repo)
        if not is_url(self.repo):
            object.__setattr__(self, "repo", os.path.abspath(os.path.expanduser(self.repo)))
        if self.commit is not None:
            _check_text("commit", self.commit)
            if self.commit.startswith("-") or any(c.isspace() for c in self.commit):
                raise ValueError(f"task {self.id}: commit {self.commit!r} is not a commit: "
                                 "give a hash, tag or branch name")
        for name in ("setup", "verify"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"task {self.id}: {name} must be a shell command (a string)")
        if self.start_from is not None and not _START_FROM.fullmatch(str(self.start_from)):
            raise ValueError(f"task {self.id}: start_from {self.start_from!r} is not RUN:STEP "
                             "(an attempt's checkpoints, as its result names them, and a step "
                             "number)")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) \
                or not 1 <= self.max_steps <= 10_000:
            raise ValueError(f"task {self.id}: max_steps must be a whole number from 1 to 10000")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, int | float) \
                or not 0 < self.timeout <= MAX_TIMEOUT:
            raise ValueError(f"task {self.id}: timeout is in seconds, more than 0 and at most "
                             f"{MAX_TIMEOUT:.0f} (a week)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, *, base: str | os.PathLike[str] | None = None) -> Task:
        """A task from a JSON object; ``base`` is the folder relative repo paths start from."""
        if not isinstance(data, dict):
            raise ValueError(f"a task must be a JSON object, got {type(data).__name__}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            hint = did_you_mean(unknown[0], known)
            raise ValueError(f"unknown task field(s) {', '.join(unknown)}{hint}"
                             f"{' ' if hint else '; '}allowed: {', '.join(known)}")
        missing = [k for k in ("id", "repo", "prompt") if k not in data]
        if missing:
            raise ValueError(f"a task needs {', '.join(missing)} "
                             "(required: id, repo, prompt)")
        values = dict(data)
        repo = values["repo"]
        if base is not None and isinstance(repo, str) and not is_url(repo) \
                and not os.path.isabs(os.path.expanduser(repo)):
            values["repo"] = os.path.join(os.fspath(base), repo)
        return cls(**values)

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike[str]) -> list[Task]:
        """The tasks of a JSONL file, one object per line (blank and ``#`` lines skipped).

        Raises ValueError naming the file and line of the first bad task, or a repeated id.
        """
        source = Path(path)
        try:
            lines = source.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the tasks file {os.fspath(path)!r}: {exc}") from exc
        tasks: list[Task] = []
        for number, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                tasks.append(cls.from_dict(json.loads(line), base=source.parent.resolve()))
            except (ValueError, TypeError, RecursionError) as exc:
                raise ValueError(f"{os.fspath(path)}:{number}: {exc}") from exc
        check_unique(tasks)
        return tasks


def check_unique(tasks: list[Task]) -> None:
    """Raise ValueError when two tasks share an id (their results would collide)."""
    counts = Counter(t.id for t in tasks)
    repeated = sorted(name for name, n in counts.items() if n > 1)
    if repeated:
        raise ValueError(f"task ids must be unique; repeated: {', '.join(repeated[:10])}")


def _check_text(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"task field {name!r} must be a non-empty string")
    if "\0" in value:
        raise ValueError(f"task field {name!r} contains a NUL character")


@dataclass
class TaskResult:
    """How one task ended: one line of ``out/results.jsonl``.

    ``status`` is ``"done"`` (the agent ran to its end; ``stop_reason`` says how:
    ``done`` or ``max_steps``) or ``"failed"`` (``reason`` says why, per attempt, on one
    line: it raised, hung past its timeout, its worker died, verify was killed).
    ``attempts`` has one record per attempt made: ``node`` (the host, or Ray node, that ran
    it), ``started_at`` and ``ended_at`` (unix seconds; ``started_at`` None when it never
    started), ``queued_seconds`` (from its submission to its start) and, for one that
    failed, ``reason`` (one line). ``seconds`` is the time the task's attempts ran (a failed
    one's too); ``steps`` is None for a failed task (an attempt that failed recorded
    none). ``tokens_replayed``: the engine replayed a recording
    (scripted), so ``usage`` is the recording's, not tokens spent. ``patch`` is ``git diff --binary``
    of the agent's changes (new files included) against the commit as set up;
    ``verified`` is None without a ``verify`` command, else whether it exited 0 in a fresh
    copy with only the patch applied. ``transcript`` is relative to ``out``. ``repo`` is
    the task's repository (a URL's credentials shown as ``***``), for the report.
    ``checkpoints`` names the attempt's checkpoints (``start_from`` of another task:
    ``"<checkpoints>:<step>"``), ``checkpoint_diffs`` what each step changed (a diff per
    step number, cut), which the report links each step to.
    """

    id: str
    status: str
    reason: str = ""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    commit: str = ""
    patch: str = ""
    files_changed: list[str] = field(default_factory=list)
    steps: int | None = 0  # None: a failed task (its attempts' steps were not recorded)
    stop_reason: str = ""
    answer: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    verified: bool | None = None
    verify_exit: int | None = None
    verify_output: str = ""
    transcript: str = ""
    seconds: float = 0.0
    model: str = ""
    tokens_replayed: bool = False
    repo: str = ""
    checkpoints: str = ""  # the attempt's checkpoints (a task's start_from names one)
    checkpoint_diffs: dict[str, str] = field(default_factory=dict)  # step -> its diff

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json_text(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskResult:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if isinstance(values.get("attempts"), int):  # written before attempts were records
            values["attempts"] = [{} for _ in range(values["attempts"])]
        return cls(**values)


def one_line(text: str, limit: int = 400) -> str:
    """``text`` on one line (runs of whitespace made one space), cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
