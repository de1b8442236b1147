"""Finding a command's processes from the test, whether or not it ran in a PID namespace.

A command may run in a PID namespace of its own, where `$$` and `$!` are not the host's
pids: it writes "<pid> <its pid namespace>" (``NS_PID``) and the test finds the process by
both. A bare pid (no namespace) is taken as a host pid.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

NS_PID = "$(readlink /proc/self/ns/pid)"  # shell text: the command's own pid namespace


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def host_pids(pid: int, ns: str) -> list[int]:
    """Host pids of live processes that are ``pid`` inside pid namespace ``ns``."""
    if not ns or ns == os.readlink("/proc/self/ns/pid"):
        return [pid] if alive(pid) else []
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{name}/ns/pid") != ns:
                continue
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        nspid = next((ln.split()[-1] for ln in status.splitlines() if ln.startswith("NSpid:")), "")
        if nspid == str(pid) and alive(int(name)):
            found.append(int(name))
    return found


def running(pidfile: Path) -> list[int]:
    """The live host pids of the process a command recorded as "<pid> <ns>" in ``pidfile``."""
    pid, _, ns = pidfile.read_text().strip().partition(" ")
    assert pid.isdigit(), pidfile.read_text()
    return host_pids(int(pid), ns)


def settles_dead(pidfile: Path, seconds: float = 30.0) -> bool:
    """SIGKILL is delivered asynchronously; give the kernel time to finish the kill (on a
    machine with twenty runnable processes a core, two seconds was once not enough)."""
    deadline = time.monotonic() + seconds
    while running(pidfile):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
