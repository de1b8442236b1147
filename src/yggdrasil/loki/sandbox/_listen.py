"""The toolbox's own listening sockets (the command proxy's control socket, the rules
supervisor's): each in a new folder only this user can enter."""

from __future__ import annotations

import os
import socket
import tempfile

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
