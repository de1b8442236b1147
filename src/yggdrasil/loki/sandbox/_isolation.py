"""What isolation beyond Landlock this machine offers a command: namespaces, the setid filter.

Asked once per process: namespaces by running the launcher itself with ``--ns`` on
``true`` (user namespaces can be off by sysctl, by an LSM, or inside a container that
forbids mounting /proc or tmpfs, and only trying tells), the seccomp filter by loading
libseccomp.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ._landlock import launcher_argv
from ._seccomp import load_library

_PROBE_TIMEOUT = 20.0


class IsolationStatus:
    """Whether commands can get namespaces of their own and the setuid/setgid filter."""

    __slots__ = ("namespace_reason", "namespaces", "setid_filter", "setid_reason")

    def __init__(self, namespaces: bool, namespace_reason: str, setid_filter: bool,
                 setid_reason: str) -> None:
        self.namespaces = namespaces
        self.namespace_reason = namespace_reason
        self.setid_filter = setid_filter
        self.setid_reason = setid_reason

    def __repr__(self) -> str:
        return (f"IsolationStatus(namespaces={self.namespaces}, setid_filter={self.setid_filter})")

    def __str__(self) -> str:
        ns = ("namespaces available (PID, mount, network)" if self.namespaces
              else f"namespaces unavailable: {self.namespace_reason}")
        setid = ("setuid/setgid filter available" if self.setid_filter
                 else f"setuid/setgid filter unavailable: {self.setid_reason}")
        return f"{ns}; {setid}"


_cached: IsolationStatus | None = None


def isolation_status() -> IsolationStatus:
    """Probe once per process; never raises."""
    global _cached
    if _cached is None:
        _cached = IsolationStatus(*_probe_namespaces(), *_probe_seccomp())
    return _cached


def _probe_namespaces() -> tuple[bool, str]:
    if sys.platform != "linux":
        return False, f"namespaces are a Linux feature; this is {sys.platform}"
    python = sys.executable or "python3"
    argv = launcher_argv(python, [], network=False, abi=0, argv=["true"], namespaces=True,
                         mounts=[("tmpfs", "/tmp")])
    try:
        # cwd "/": the launcher re-enters its working folder after mounting, and the
        # caller's may lie under the probe's private /tmp (a checkout or venv in /tmp)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT,
                              stdin=subprocess.DEVNULL, env={"PATH": os.defpath}, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"the namespace probe failed: {exc}"
    if done.returncode == 0:
        return True, ""
    why = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
    return False, why[0].removeprefix("loki sandbox: refusing to run: cannot isolate the "
                                      "command: ")


def _probe_seccomp() -> tuple[bool, str]:
    if sys.platform != "linux":
        return False, f"seccomp is a Linux feature; this is {sys.platform}"
    try:
        load_library()
    except OSError as exc:
        return False, f"libseccomp.so.2 not found ({exc}); install libseccomp2"
    return True, ""
