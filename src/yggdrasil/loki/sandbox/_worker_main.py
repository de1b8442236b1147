"""The child side of a fenced worker (see ``_worker``): limits, the fence, then requests.

Run by path as ``python -I .../_worker_main.py CONFIG_JSON``. In order, before it reads
any request: it puts the parent's module folders on ``sys.path`` (``-I`` dropped the
working folder and PYTHONPATH) and guards the parent's roots against planted modules
(``_imports``: a ``polars.py`` in the root, on the path when the agent was started from
it, is never imported), sets its resource limits (data memory, no core file,
tiny files), asks to die with its parent, fences itself read-only with Landlock
(``_landlock.restrict_reads``) and drops every capability, imports the handler module
and says ready. Each request names a handler function; its file descriptors arrive with
it (SCM_RIGHTS) and are closed after it. Each request gets its own CPU budget
(RLIMIT_CPU, raised from what was used so far). Replies are JSON, never pickle: the
parent must not run what a worker taken over by a crafted file sends back.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import os
import resource
import socket
import struct
import sys
from types import ModuleType
from typing import Any

_PR_SET_PDEATHSIG = 1
_MAX_FDS = 64
_HEADER = struct.Struct("!I")


def _sibling(name: str) -> ModuleType:
    """A module of this folder loaded by path (the package itself is not imported)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_loki{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _limit(config: dict[str, Any]) -> None:
    memory = int(config["memory"])
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # The worker writes no file; its stderr is a file of the parent's, kept small.
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    if sys.platform == "linux":  # elsewhere the parent's close of the socket ends us
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)


def _cpu_budget(seconds: int) -> None:
    """Allow ``seconds`` more CPU from now: SIGXCPU ends the worker past it."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = used + seconds
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, _MAX_FDS)
    if not data:
        return None
    while len(data) < _HEADER.size:
        more = sock.recv(1 << 16)
        if not more:
            return None
        data += more
    (size,) = _HEADER.unpack_from(data)
    body = data[_HEADER.size :]
    while len(body) < size:
        more = sock.recv(min(1 << 20, size - len(body)))
        if not more:
            return None
        body += more
    return json.loads(body), fds


def _send(sock: socket.socket, reply: dict[str, Any]) -> None:
    body = json.dumps(reply).encode()
    sock.sendall(_HEADER.pack(len(body)) + body)


def _answer(handler: ModuleType, request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
    errors: tuple[type[BaseException], ...] = getattr(handler, "EXPECTED_ERRORS", ())
    try:
        return {"ok": getattr(handler, request["op"])(fds, **request["args"])}
    except MemoryError:
        return {"limit": "memory"}
    except RecursionError:
        return {"error": "the input is nested too deeply to be parsed"}
    except errors as exc:
        return {"error": str(exc)}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        for fd in fds:
            os.close(fd)


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    sys.path[:] = config["path"]
    guard = _sibling("_imports")  # a module planted in the root never runs here either
    for root in config.get("guard", ()):
        guard.guard_imports(root)
    sock = socket.socket(fileno=config["fd"])
    _limit(config)
    if config["abi"]:
        landlock = _sibling("_landlock")
        landlock.restrict_reads(config["read"], abi=config["abi"], executable=config["exec"])
        landlock.drop_capabilities()
    handler = importlib.import_module(config["handler"])
    if hasattr(handler, "warm"):
        handler.warm()
    _send(sock, {"ready": True})
    while (got := _receive(sock)) is not None:
        request, fds = got
        _cpu_budget(int(config["cpu"]))
        _send(sock, _answer(handler, request, fds))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
