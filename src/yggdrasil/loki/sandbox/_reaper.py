"""The reaper half of the launcher: run a command as a child, then kill all it left behind.

The launcher (``_landlock.py``, run as a script) marks itself a child subreaper, forks and
lets the child fence itself and exec the command. Every process the command starts and
orphans (a double fork, ``setsid`` with an empty environment and closed output) is
re-parented to the launcher, so when the command ends the launcher finds what is left as
its own children and kills them, round after round, until it has none. Only the process
that started the launcher can stop it early (SIGTERM, on timeout): it then kills the whole
subtree the same way; and when that process is gone (killed outright, so it could not
stop its commands or background jobs), the launcher notices within a second and does so
by itself. A fenced command cannot signal it (Landlock ABI 6 scopes signals).

Standard library only and no package imports: the launcher runs with ``-I -S``.
"""

from __future__ import annotations

import ctypes
import os
import resource

TYPE_CHECKING = False  # typing and enum (which `signal` pulls in) cost ~10 ms per command
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
else:
    import _signal as signal

_PR_SET_CHILD_SUBREAPER = 36
_WAITED = {signal.SIGCHLD, signal.SIGTERM}
ORPHAN_CHECK = 1.0  # seconds between looks at whether the agent that started us is alive
_IDLE_ROUNDS = 100  # x 10 ms: children we cannot see in /proc (should never happen)


def run_reaped(start: Callable[[], int], stopper: int = 0) -> int:
    """Fork; the child calls ``start`` (which execs or returns an exit code); the parent
    waits, kills every leftover descendant and returns the child's status, re-raising
    the signal that killed it so the caller sees the same status as without us.
    ``stopper``: a process besides our parent whose SIGTERM stops us (the agent, when the
    warm launcher is our parent)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    starter = os.getppid()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
    child = os.fork()
    if child == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; exec keeps that
            signal.signal(sig, signal.SIG_DFL)
        code = 127
        try:
            code = start()
        finally:
            os._exit(code)
    drop_stdin()
    status = _wait_for(child, starter, stopper)
    kill_children()
    return pass_on(status)


def drop_stdin() -> None:
    """Let go of the command's stdin (a background job's pipe): when the command closes
    it, nobody reads it any more, so the agent's next write fails instead of filling it."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def _wait_for(child: int, starter: int, stopper: int = 0) -> int | None:
    """The child's wait status; None when the starter (or ``stopper``) asked us to stop
    (SIGTERM)."""
    while True:
        info = signal.sigtimedwait(_WAITED, ORPHAN_CHECK)
        if info is None:
            if os.getppid() != starter:
                return None  # the agent is gone (killed outright): nobody will stop us
            continue
        if info.si_signo == signal.SIGTERM:
            if info.si_pid in (starter, stopper or starter):
                return None
            continue  # a command's `kill 0` reaches us too: only the starter may stop us
        while True:  # SIGCHLDs coalesce: reap all that exited (orphans too)
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return None
            if pid == 0:
                break
            if pid == child:
                return status


def _children() -> list[int]:
    me, found = os.getpid(), []
    try:
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    raw = fh.read()
            except OSError:
                continue
            if int(raw[raw.rfind(b")") + 2 :].split()[1]) == me:
                found.append(int(name))
    except OSError:
        pass
    return found


def kill_children() -> None:
    """SIGKILL and reap our children until none is left; orphans of the killed ones are
    re-parented to us (we are a subreaper), so this reaches every descendant."""
    idle = 0
    while idle < _IDLE_ROUNDS:
        found = _children()
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            pid, _ = os.waitpid(-1, 0 if found else os.WNOHANG)
        except ChildProcessError:
            return  # no child at all: done
        if not found and pid == 0:  # a child we cannot see yet: look again shortly
            idle += 1
            signal.sigtimedwait({signal.SIGCHLD}, 0.01)


def pass_on(status: int | None) -> int:
    if status is None:
        return 128 + signal.SIGTERM
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return code
    # Die of the same signal (no core file of ours in the root), as exec'ing did before.
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (OSError, ValueError):
        pass
    try:
        signal.signal(-code, signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {-code})
    os.kill(os.getpid(), -code)
    return 128 - code
