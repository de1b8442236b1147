"""What isolation beyond Landlock this machine offers a command: namespaces, the setid filter.

Asked once per process: namespaces by running the launcher itself with ``--ns`` on
``true`` (user namespaces can be off by sysctl, by an LSM, or inside a container that
forbids mounting /proc or tmpfs, and only trying tells), the seccomp filter by loading
libseccomp.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

from . import _landlock
from ._landlock import launcher_argv
from ._seccomp import load_library

_PROBE_TIMEOUT = 20.0


class IsolationStatus:
    """Whether commands can get namespaces of their own and the setuid/setgid filter."""

    __slots__ = ("exec_guard", "exec_guard_reason", "namespace_reason", "namespaces",
                 "setid_filter", "setid_reason")

    def __init__(self, namespaces: bool, namespace_reason: str, setid_filter: bool,
                 setid_reason: str, exec_guard: bool = False,
                 exec_guard_reason: str = "") -> None:
        self.namespaces = namespaces
        self.namespace_reason = namespace_reason
        self.setid_filter = setid_filter
        self.setid_reason = setid_reason
        self.exec_guard = exec_guard  # seccomp user notification: rules checked at exec
        self.exec_guard_reason = exec_guard_reason

    def __repr__(self) -> str:
        return (f"IsolationStatus(namespaces={self.namespaces}, setid_filter={self.setid_filter})")

    def __str__(self) -> str:
        ns = ("namespaces available (PID, mount, network)" if self.namespaces
              else f"namespaces unavailable: {self.namespace_reason}")
        setid = ("setuid/setgid filter available" if self.setid_filter
                 else f"setuid/setgid filter unavailable: {self.setid_reason}")
        guard = ("programs can be checked when they start (seccomp user notification)"
                 if self.exec_guard else
                 f"programs cannot be checked when they start: {self.exec_guard_reason}")
        return f"{ns}; {setid}; {guard}"


_cached: IsolationStatus | None = None


def isolation_status() -> IsolationStatus:
    """Probe once per process; never raises."""
    global _cached
    if _cached is None:
        _cached = IsolationStatus(*_probe_namespaces(), *_probe_seccomp(),
                                  *_probe_user_notification())
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


_NOTIF_KERNEL = (5, 9)  # SECCOMP_USER_NOTIF_FLAG_CONTINUE (5.5), the ID_VALID ioctl as used


def _probe_user_notification() -> tuple[bool, str]:
    if sys.platform != "linux":
        return False, f"seccomp is a Linux feature; this is {sys.platform}"
    try:
        lib = load_library()
    except OSError as exc:
        return False, f"libseccomp.so.2 not found ({exc}); install libseccomp2"
    if not hasattr(lib, "seccomp_notify_fd"):
        return False, "libseccomp is older than 2.5 (no user notification)"
    release = os.uname().release
    try:
        version = tuple(int(p) for p in release.split("-")[0].split(".")[:2])
    except ValueError:
        version = (0, 0)
    if version < _NOTIF_KERNEL:
        return False, f"the kernel ({release}) is older than 5.9 (seccomp user notification)"
    lib.seccomp_api_get.restype = ctypes.c_uint
    if int(lib.seccomp_api_get()) < 5:
        return False, "seccomp user notification is not available to libseccomp here"
    argv = [sys.executable or "python3", "-I", "-S", _landlock.__file__, "--probe-notify"]
    try:  # in a child: a listener cannot be taken back
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT,
                              stdin=subprocess.DEVNULL, env={"PATH": os.defpath}, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"the user-notification probe failed: {exc}"
    if done.returncode != 0:
        return False, (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return True, ""
