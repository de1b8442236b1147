"""The toolbox's own listening sockets (the command proxy's control socket, the rules
supervisor's): each in a new folder only this user can enter, and the holder that starts
such a server on first use and stops it with its owner."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import weakref
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

SUN_PATH_MAX = 107  # bytes of a socket's path the kernel takes (sockaddr_un.sun_path less NUL)
SHORT_TMP = "/tmp"  # where a socket goes when the temp folder is too deep for its path


def listening_socket(prefix: str, name: str) -> tuple[str, str, socket.socket]:
    """A UNIX stream socket listening at ``<new folder>/<name>``: the folder, the path and
    the socket. The folder is made in the temp folder, or in /tmp when that one is too deep
    for a socket's path (a fleet attempt points TMPDIR into its scratch folder)."""
    folder = tempfile.mkdtemp(prefix=prefix)
    if len(os.fsencode(os.path.join(folder, name))) > SUN_PATH_MAX:
        os.rmdir(folder)
        folder = tempfile.mkdtemp(prefix=prefix, dir=SHORT_TMP)
    os.chmod(folder, 0o700)
    path = os.path.join(folder, name)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(64)
    except OSError:
        sock.close()
        os.rmdir(folder) if not os.listdir(folder) else None
        raise
    return folder, path, sock


class _Stoppable(Protocol):
    def stop(self) -> None: ...


S = TypeVar("S", bound=_Stoppable)


class LazyServer(Generic[S]):
    """A server started by ``start`` on first ``get``, stopped by ``close`` or when
    ``owner`` is garbage-collected (the server holds no reference to its owner)."""

    def __init__(self, owner: object, start: Callable[[], S]) -> None:
        self._owner = weakref.ref(owner)
        self._start = start
        self._lock = threading.Lock()
        self._server: S | None = None

    def get(self) -> S:
        with self._lock:
            if self._server is None:
                self._server = self._start()
                owner = self._owner()
                if owner is not None:
                    weakref.finalize(owner, self._server.stop)
            return self._server

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.stop()
                self._server = None
