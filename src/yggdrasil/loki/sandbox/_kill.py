"""Finding and signalling the processes of one command, from outside it.

:func:`kill_tree` kills what a command left once it is over (its process group, its
session, the escapees that carry its run id); :func:`kill_pipe_holders` kills whoever
still holds its output pipes. :func:`command_pids` finds the processes of a command that
is still running, to ask them to stop (SIGINT, SIGTERM) before anything is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

_KILL_ROUNDS = 50


def _stat_fields(pid: str) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (state first); None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def start_time(pid: int) -> int:
    fields = _stat_fields(str(pid))
    return int(fields[19]) if fields else 0


def running_since(pid: int) -> str:
    """The kernel's start time of ``pid`` as text, which tells a reused pid apart; '' when
    it is gone or a zombie (dead, not yet reaped: in a container whose init does not
    reap, never)."""
    fields = _stat_fields(str(pid))
    return "" if not fields or fields[0] in ("Z", "X") else fields[19]


def kill_carrying(marker: bytes) -> int:
    """SIGKILL every other process whose environment holds the entry ``marker``
    (``NAME=value``); how many were killed."""
    killed = 0
    for pid in _others():
        if _carries(pid, marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
                killed += 1
    return killed


def _carries(pid: str, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return marker in fh.read().split(b"\0")
    except OSError:
        return False


def _others() -> list[str]:
    me = str(os.getpid())
    try:
        return [p for p in os.listdir("/proc") if p.isdigit() and p != me]
    except OSError:
        return []  # no /proc (not Linux): the process group is all we can reach


def _leftovers(session: int, marker: bytes, since: int) -> Iterator[int]:
    """Live processes in ``session``, or started since ``since`` and carrying ``marker``."""
    for pid in _others():
        fields = _stat_fields(pid)
        if not fields or fields[0] in ("Z", "X"):
            continue
        if int(fields[3]) == session or (int(fields[19]) >= since and _carries(pid, marker)):
            yield int(pid)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def kill_tree(leader: int, marker: bytes, since: int, *, sweep: bool = True) -> None:
    """Kill the process group and session led by ``leader`` and its marked escapees
    (``sweep=False``: the group only; the caller knows nothing else can be left)."""
    kill_group(leader)
    for _ in range(_KILL_ROUNDS if sweep else 0):  # repeat: a process may fork while we scan
        found = list(_leftovers(leader, marker, since))
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def kill_pipe_holders(links: set[str]) -> None:
    """Kill every other process holding one of these pipes (``pipe:[inode]`` links)."""
    for pid in _others():
        with contextlib.suppress(OSError):
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(_link(f"/proc/{pid}/fd/{fd}") in links for fd in fds):
                os.kill(int(pid), signal.SIGKILL)


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


# -- asking a running command to stop ---------------------------------------------------


def command_pids(launcher: int) -> list[int]:
    """The live processes of the command the launcher ``launcher`` runs.

    Every process a command starts stays below its launcher: orphans are re-parented to
    the launcher (a subreaper) or to the PID 1 of the command's namespace. The launcher
    and that PID 1 are left out: they must outlive the command to kill what it leaves,
    and a signal they do not expect ends them at once (the namespace with them)."""
    children: dict[int, list[int]] = {}
    for name in _others():
        fields = _stat_fields(name)
        if fields and fields[0] not in ("Z", "X"):
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = list(children.get(launcher, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if not _namespace_init(pid):
            found.append(pid)
    return found


def _namespace_init(pid: int) -> bool:
    """Is ``pid`` the PID 1 of a namespace below ours (NSpid ends in 1)?"""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"NSpid:"):
                    ids = line.split()[1:]
                    return len(ids) > 1 and ids[-1] == b"1"
    except OSError:
        pass
    return False


def signal_command(launcher: int, sig: int, *, reaped: bool) -> int:
    """Send ``sig`` to a running command's processes; how many it reached.

    ``reaped``: ``launcher`` is our launcher (see :func:`command_pids`); otherwise it is
    the command itself, leading its own process group."""
    if not reaped:
        try:
            os.killpg(launcher, sig)
            return 1
        except (ProcessLookupError, PermissionError):
            return 0
    reached = 0
    for pid in command_pids(launcher):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            reached += 1
    return reached
