"""What fences one command, and the mount plan of its private namespace.

:class:`Fence` says which layers a command gets (Landlock ABI, namespaces, the setid
filter) or why it is refused. :func:`mount_plan` lists the mounts the launcher applies
in the command's mount namespace (``(kind, path)`` pairs, see ``sandbox._namespace``):

- private tmpfs over /tmp, /dev/shm and /run/user/<uid>: the user's ssh-agent, tmux,
  gpg-agent and D-Bus sockets and other programs' shared memory are not there;
- the places a command may write (root, scratch, pycache, ``writable``) bound back with
  nosuid/nodev, and what it needs to read under a private tmpfs (the interpreter, PATH,
  HOME) bound back read-only;
- for every ``.git`` folder of the root: the folder pinned (it cannot be moved or
  replaced) and its ``config`` and ``hooks/`` read-only while the root locks them
  (``Root.locks_git``);
- the sockets of daemons that run programs for whoever connects (docker, containerd,
  podman, systemd, the system bus) masked;
- the root's protected files and folders (``Root.protect``: ``.env``, ``*.pem``, ``.aws/``)
  covered by unreadable mode-000 stand-ins, last, so that they cover any bind above.

Background jobs use the same plan.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

PRIVATE_TMPFS = ("/tmp", "/dev/shm")
# Daemons that start programs, containers or units for whoever may connect: a command
# that reached one would run code outside its fence (as root, for docker).
DAEMON_SOCKETS = (
    "/run/docker.sock", "/run/containerd/containerd.sock", "/run/podman/podman.sock",
    "/run/crio/crio.sock", "/run/buildkit/buildkitd.sock", "/run/libvirt/libvirt-sock",
    "/run/snapd.socket", "/run/snapd-snap.socket", "/run/systemd/private",
    "/run/dbus/system_bus_socket", "/var/snap/lxd/common/lxd/unix.socket",
    "/var/lib/incus/unix.socket", "/run/screen",
)
# Name resolvers reached over a UNIX socket: a command without the network could still
# send names (and so data) out through their DNS queries.
RESOLVER_SOCKETS = ("/run/nscd/socket", "/var/run/nscd/socket",
                    "/run/systemd/resolve/io.systemd.Resolve",
                    "/run/systemd/resolve/io.systemd.Resolve.Monitor")
GIT_READ_ONLY = ("config", "hooks")


@dataclass(frozen=True)
class Fence:
    """The layers one command gets; ``refusal`` non-empty: it must not run at all."""

    abi: int = 0  # Landlock ABI applied (0: none)
    namespaces: bool = False
    no_setid: bool = False
    refusal: str = ""

    @property
    def any(self) -> bool:
        return bool(self.abi or self.namespaces)

    def label(self) -> str:
        """$LOKI_SANDBOX: ``landlock-abi-N``, ``namespaces`` (no Landlock) or ``none``."""
        if self.abi:
            return f"landlock-abi-{self.abi}"
        return "namespaces" if self.namespaces else "none"


def private_tmpfs() -> list[str]:
    """The folders a command gets empty and private (those that exist here)."""
    found = []
    for path in (*PRIVATE_TMPFS, f"/run/user/{os.getuid()}"):
        real = os.path.realpath(path)
        if os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def mount_plan(writable: Sequence[str], needed: Iterable[str], git_dirs: Iterable[str],
               protected: Iterable[str] = (), *, closed_network: bool = False,
               ) -> list[tuple[str, str]]:
    """The mounts for one command: ``writable`` places (bound nosuid), ``needed`` read-only
    places that must stay visible under a private tmpfs, ``git_dirs`` to pin, and
    ``protected`` files and folders (absolute) to make unreadable; ``closed_network``
    (no network, or only through the proxy) masks the name resolvers' sockets too."""
    tmpfs = private_tmpfs()
    binds = [("bind", p) for p in _distinct(writable)]
    for path in _distinct(needed):
        # a private tmpfs itself (PYTHONPATH=/tmp) is never bound back: that would show
        # the whole host folder (its sockets) it exists to hide
        if _under_any(path, tmpfs) and path not in tmpfs \
                and not _under_any(path, [p for _, p in binds]):
            binds.append(("bind-ro", path))
    for git in git_dirs:
        if not os.path.isdir(git) or os.path.islink(git):
            binds.append(("bind-ro", git))  # a worktree's `gitdir:` pointer file
            continue
        binds.append(("bind", git))  # a mount point: cannot be renamed, removed or replaced
        binds += [("bind-ro", os.path.join(git, name)) for name in GIT_READ_ONLY
                  if os.path.lexists(os.path.join(git, name))]
    binds.sort(key=lambda b: b[1].count("/"))  # outer before inner: the inner lands on top
    sockets = [*DAEMON_SOCKETS, *(RESOLVER_SOCKETS if closed_network else ())]
    masks = [("mask", p) for p in _distinct(sockets) if os.path.lexists(p)]
    secrets = [("protect", p) for p in protected]
    return [*(("tmpfs", p) for p in tmpfs), *binds, *masks, *secrets]


def needed_paths(env: Mapping[str, str], shell: str) -> list[str]:
    """What a command reads that may live under /tmp: the interpreter, the shell, PATH,
    PYTHONPATH and HOME."""
    found = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
             os.path.dirname(os.path.realpath(shell))]
    for var in ("PATH", "PYTHONPATH"):
        found += [p for p in env.get(var, "").split(os.pathsep) if p]
    if env.get("HOME"):
        found.append(env["HOME"])
    return [os.path.realpath(p) for p in found if os.path.isabs(p) and os.path.isdir(p)]


def _distinct(paths: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for p in paths:
        real = os.path.realpath(p)
        if os.path.lexists(real) and real not in seen:
            seen.append(real)
    return seen


def _under_any(path: str, tops: Iterable[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)
