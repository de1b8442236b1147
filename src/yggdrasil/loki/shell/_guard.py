"""Command rules where programs start: every exec of a command, at any depth, judged.

:class:`Supervision` decides which calls the supervisor (``sandbox.Supervisor``) stops for
a command: its execs when rules are set, its UNIX connects when it is fenced (the socket
check, ``sandbox._sockets``); refusals become lines of the observation, or of a job's
stderr (:class:`Refusals`).

With rules set, each command's launcher hands the toolbox a seccomp listener that stops
every ``execve``/``execveat`` below it (``sandbox.Supervisor``); :class:`ExecGuard` answers
them with :meth:`CommandRules.exec_verdict`: allow lets the program start, deny fails its
exec with EPERM, ask pauses it while ``confirm("run <command>")`` is asked (no confirm,
or declined: EPERM). Each refusal becomes a line of the command's observation,
``loki rules: refused 'git push origin main' (rule deny 'git push')``.

Not asked twice: the command's own first exec (the shell or Python the toolbox starts,
judged on the line), a command of the line the user already confirmed, and what a
program the user accepted starts under it (``git push`` starting ``git-receive-pack``).
"""

from __future__ import annotations

import errno
import sys
import threading
from collections.abc import Callable, Sequence

from ..sandbox import Decide, Exec, Sink, SupervisedCommand, Supervisor, isolation_status
from ._execnames import MAX_ASKED, clipped, folded
from ._job import Job
from ._rules import CommandRules, Verdict

Note = Callable[[str], None]
_MAX_DEPTH = 64  # parents looked through for an accepted program


class Supervision:
    """What the toolbox's supervisor stops for one shell's commands (execs when rules are
    set, UNIX connects when fenced) and the session that answers one command."""

    def __init__(self, rules: CommandRules, confirm: Callable[[str], bool] | None) -> None:
        self.rules = rules
        self.guard = ExecGuard(rules, confirm)
        self.confirmed: set[str] = set()  # the commands of the line the user just confirmed
        self._supervisor: Supervisor | None = None  # started by the first supervised command

    @staticmethod
    def available() -> bool:
        """Seccomp user notification works here."""
        return sys.platform == "linux" and isolation_status().exec_guard

    @staticmethod
    def missing() -> str:
        """Why it does not."""
        return isolation_status().exec_guard_reason if sys.platform == "linux" else sys.platform

    def checks_execs(self) -> bool:
        return bool(self.rules) and self.available()

    def session(self, argv: Sequence[str], note: Note, sockets: list[str] | None, *,
                tcp_fenced: bool = False, scoped: bool = False,
                shared_network: bool = True) -> SupervisedCommand | None:
        """A command started as ``argv``: its execs judged when rules are set, its UNIX
        connects outside ``sockets`` refused (None: not checked); None when neither.
        ``tcp_fenced``, ``scoped``: what its Landlock domain decides about connects;
        ``shared_network``: it is in the toolbox's network namespace."""
        execs = self.checks_execs()
        if not execs and sockets is None:
            return None
        if self._supervisor is None:
            self._supervisor = Supervisor()
        confirmed, self.confirmed = self.confirmed, set()
        decide = self.guard.decider(argv, confirmed, note) if execs else None
        return self._supervisor.session(decide, sockets, note, tcp_fenced=tcp_fenced,
                                        scoped=scoped, shared_network=shared_network)

    def close(self) -> None:
        if self._supervisor is not None:
            self._supervisor.close()
            self._supervisor = None


MAX_NOTES = 20  # refusals one command's observation lists; the rest are counted


class Refusals:
    """One command's refusals, each said once, at most MAX_NOTES (a program retrying a
    refused call in a loop costs neither memory nor a flooded observation); a job's go
    to its stderr once ``attach`` gives it (held until then)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.dropped = 0
        self.sink: Sink | None = None
        self.lock = threading.Lock()

    def add(self, line: str) -> None:
        with self.lock:
            if line in self.lines:
                return
            if len(self.lines) >= MAX_NOTES:
                self.dropped += 1
                return
            self.lines.append(line)
            if self.sink is not None:
                self.sink.feed(f"{line}\n".encode())

    def attach(self, job: Job) -> None:
        with self.lock:
            self.sink = job.stderr
            self.sink.feed(self._text().encode())

    def text(self) -> str:
        """The refusals for an observation, each on its own line."""
        with self.lock:
            return self._text()

    def _text(self) -> str:
        more = f"loki: {self.dropped} more refusals not shown\n" if self.dropped else ""
        return "".join(f"{line}\n" for line in self.lines) + more


class ExecGuard:
    """How one shell's rules answer its commands' execs (see the module docstring)."""

    def __init__(self, rules: CommandRules, confirm: Callable[[str], bool] | None) -> None:
        self.rules, self.confirm = rules, confirm
        self._asking = threading.Lock()  # one question to the user at a time

    def decider(self, first: Sequence[str], confirmed: set[str], note: Note) -> Decide:
        """The answers for one command started as ``first``; ``note`` gets each refusal."""
        return _Decider(self, list(first), confirmed, note)


class _Decider:
    def __init__(self, guard: ExecGuard, first: list[str], confirmed: set[str],
                 note: Note) -> None:
        self.guard, self.first, self.confirmed, self.note = guard, first, confirmed, note
        self.accepted: set[tuple[int, int]] = set()  # (pid, start time): pids are reused

    def __call__(self, ex: Exec) -> int:
        if self.first and list(ex.argv) == self.first:
            self.first = []  # the launcher's own exec of the command: judged on the line
            return 0
        verdict = self.guard.rules.exec_verdict(ex)
        if verdict.action == "allow":
            return 0
        if verdict.action == "deny":
            return self._refuse(verdict, f"rule deny {verdict.rule.text!r}" if verdict.rule
                                else "the rules")
        if self._under_accepted(ex.pid):
            return 0
        if verdict.command in self.confirmed:  # the user said yes to the line
            self.accepted.add((ex.pid, _stat(ex.pid)[1]))
            return 0
        why = f"rule ask {verdict.rule.text!r}" if verdict.rule else f"asked: {verdict.why}"
        confirm = self.guard.confirm
        if confirm is None:
            return self._refuse(verdict, f"{why}, and nobody can be asked here: no confirm")
        if ex.cut or len(verdict.command) > MAX_ASKED:  # a question shows all it approves
            return self._refuse(verdict, f"{why}; too long to be shown whole in a question "
                                f"(over {MAX_ASKED} characters, or more than the words read)")
        with self.guard._asking:
            accepted = confirm(folded(f"run {verdict.command}"))
        if not accepted:
            return self._refuse(verdict, f"{why}; the user declined")
        self.accepted.add((ex.pid, _stat(ex.pid)[1]))
        return 0

    def _refuse(self, verdict: Verdict, why: str) -> int:
        self.note(f"loki rules: refused {clipped(verdict.command)!r} ({why})")
        return errno.EPERM

    def _under_accepted(self, pid: int) -> bool:
        """``pid`` or one of its parents is a program the user accepted."""
        if not self.accepted:
            return False
        for _ in range(_MAX_DEPTH):
            parent, start = _stat(pid)
            if (pid, start) in self.accepted:
                return True
            if parent <= 1:
                return False
            pid = parent
        return False


def _stat(pid: int) -> tuple[int, int]:
    """(parent pid, start time) of ``pid``; (0, 0) when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return 0, 0
