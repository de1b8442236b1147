"""The toolbox's HTTP(S) proxy: the only way out for a command limited to some hosts.

A command run with ``network=["pypi.org", ...]`` lives in a network namespace of its own
that holds only a loopback device: no route leads anywhere, and UDP, DNS, raw sockets
and every address fail there. Its launcher (``sandbox._namespace``) opens a TCP listener
on 127.0.0.1 *inside* that namespace and hands the listening socket to this proxy over a
UNIX control socket (``SCM_RIGHTS``), then exports ``HTTP(S)_PROXY`` pointing at it. The
proxy, in the agent's own namespace, accepts the command's connections on that socket,
reads each request head and connects out only when

- the host is one of the allowed hosts (``AllowedHosts``: a name or ``*.domain``, on
  ports 80/443 unless a port is named), and
- the address it resolves to passes the same :class:`AddressPolicy` as the web tools
  (no loopback, private, link-local or metadata address; ``allow_private`` for tests).
  The connection goes to the checked address itself, so DNS cannot move it.

``CONNECT host:port`` is tunnelled (HTTPS: pip, git, curl); a plain ``GET http://host/``
in absolute form is forwarded in origin form with ``Connection: close``. Anything else
is answered ``403`` (a refused host: the reason phrase says why, and the same line goes
to the command's notes file, which the launcher names when it hands its listener over
and the shell shows in the observation's ``proxy:`` section, written before the answer
so the command cannot end first; without a notes file, back over the control socket,
which the launcher writes to the command's stderr) or ``400``. When the launcher exits, its control connection ends; the proxy then closes
the listener and every connection of that command.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..errors import ToolError
from ..sandbox import LazyServer, listening_socket
from ._hosts import AllowedHosts, normal_host
from ._policy import AddressPolicy, resolve_host

_MAX_HEAD = 64 << 10
_HEAD_TIMEOUT = 30.0
_DROP = {"connection", "proxy-connection", "proxy-authorization", "keep-alive", "host"}
HOW_TO_ALLOW = "the user allows hosts with filesystem_toolbox(network=[...]) or loki --allow-host"


class ProxyRefusal(Exception):
    """A request the proxy will not carry: ``status`` and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class ProxyRules:
    """What the proxy lets through: hosts, addresses, names resolved by a fixed map."""

    allowed: AllowedHosts
    policy: AddressPolicy = field(default_factory=AddressPolicy)
    hosts: Mapping[str, str] = field(default_factory=dict)  # name -> address (tests)
    connect_timeout: float = 10.0
    idle_timeout: float = 300.0
    max_connections: int = 64  # at once, per command

    def addresses(self, host: str, port: int) -> list[str]:
        """The checked addresses to connect to for ``host:port``; ProxyRefusal says why not."""
        name = normal_host(host)
        if not self.allowed.allows(name, port):
            raise ProxyRefusal(403, f"{name}:{port} is not an allowed host (allowed: {self.allowed})")
        if name in self.hosts:
            found = [self.hosts[name]]
        else:
            try:
                found = resolve_host(name, port)
            except ToolError as exc:  # the resolver's own error is what the command sees
                raise ProxyRefusal(502, f"cannot resolve {name}: {exc.__cause__}") from None
        verdicts = [(a, self.policy.refusal(a)) for a in found]
        ok = [a for a, why in verdicts if why is None]
        if not ok:
            a, why = verdicts[0]
            raise ProxyRefusal(403, f"{name} resolves to {a}, {why}; the proxy reaches public "
                               "internet addresses only")
        return ok


class NetProxy:
    """One proxy per toolbox, started on first use; ``control_path`` is what launchers
    connect to. Stopped (thread, socket, folder) when it is garbage-collected or closed."""

    def __init__(self, rules: ProxyRules) -> None:
        self.rules = rules
        self._server = LazyServer(self, lambda: _Server(rules))

    @property
    def control_path(self) -> str:
        return self._server.get().path

    def close(self) -> None:
        self._server.close()


class _Server:
    """The control socket and its accept thread (holding no reference to the NetProxy)."""

    def __init__(self, rules: ProxyRules) -> None:
        self.rules = rules
        self.folder, self.path, self.sock = listening_socket("loki-proxy-", "control.sock")
        threading.Thread(target=self._accept, name="loki-proxy", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                control, _ = self.sock.accept()
            except OSError:
                return  # stopped
            threading.Thread(target=_Session(self.rules, control).run, daemon=True,
                             name="loki-proxy-session").start()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class _Session:
    """One command: its listener (in its namespace) and the connections made through it."""

    def __init__(self, rules: ProxyRules, control: socket.socket) -> None:
        self.rules = rules
        self.control = control
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()
        self.closed = False
        self.notes: int | None = None  # the command's notes file, when the launcher named one

    def run(self) -> None:
        try:
            self.control.settimeout(10)
            message, fds, _, _ = socket.recv_fds(self.control, 4096, 1)
            self.control.settimeout(None)
        except OSError:
            message, fds = b"", []
        if not fds:
            self.control.close()
            return
        self.notes = _open_notes(message[1:])
        listener = socket.socket(fileno=fds[0])
        try:
            self._serve(listener)
        finally:
            listener.close()
            with self.lock:
                self.closed = True
                for conn in self.open:
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)
            self.control.close()
            if self.notes is not None:
                os.close(self.notes)

    def _serve(self, listener: socket.socket) -> None:
        listener.setblocking(False)
        poller = select.poll()
        poller.register(self.control, select.POLLIN)
        poller.register(listener, select.POLLIN)
        while True:
            for fd, _ in poller.poll():
                if fd == self.control.fileno():
                    try:
                        if not self.control.recv(4096):
                            return  # the launcher is gone: the command is over
                    except OSError:  # reset: the launcher died first
                        return
                    continue
                try:
                    client, _ = listener.accept()
                except BlockingIOError:
                    continue
                self._start(client)

    def _start(self, client: socket.socket) -> None:
        with self.lock:
            if self.closed or len(self.open) >= self.rules.max_connections:
                client.close()
                return
            self.open.add(client)
        threading.Thread(target=self._connection, args=(client,), daemon=True,
                         name="loki-proxy-conn").start()

    def _connection(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            client.setblocking(True)
            client.settimeout(_HEAD_TIMEOUT)
            head, rest = _read_head(client)
            target, first = self._route(head)
            upstream = self._connect(*target)
            with self.lock:
                if self.closed:
                    return
                self.open.add(upstream)
            if first is None:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.sendall(first)
            if rest:
                upstream.sendall(rest)
            _relay(client, upstream, self.rules.idle_timeout)
        except ProxyRefusal as exc:
            self._refuse(client, exc)
        except OSError:
            pass  # the command or the server went away
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with self.lock:
                        self.open.discard(sock)
                    sock.close()

    def _route(self, head: bytes) -> tuple[tuple[str, int], bytes | None]:
        """((host, port), the head to send on, or None for a CONNECT tunnel)."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            raise ProxyRefusal(400, "not an HTTP request")
        method, target, version = parts
        if method.upper() == "CONNECT":
            return _authority(target, 443), None
        url = urlsplit(target)
        if url.scheme.lower() != "http" or not url.netloc:
            raise ProxyRefusal(400, "the proxy takes CONNECT host:port (https) or an absolute "
                               "http:// URL")
        host, port = _authority(url.netloc, 80)
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        kept = [ln for ln in lines[1:] if ln and ln.split(":", 1)[0].strip().lower() not in _DROP]
        out = [f"{method} {path} {version}", f"Host: {url.netloc}", *kept, "Connection: close"]
        return (host, port), ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")

    def _connect(self, host: str, port: int) -> socket.socket:
        last: OSError | None = None
        for address in self.rules.addresses(host, port):
            try:
                return socket.create_connection((address, port), self.rules.connect_timeout)
            except OSError as exc:
                last = exc
        raise ProxyRefusal(502, f"cannot connect to {host}:{port}: {last}")

    def _refuse(self, client: socket.socket, exc: ProxyRefusal) -> None:
        reason = str(exc).replace("\r", " ").replace("\n", " ")
        note = f"loki proxy: refused: {reason}" + (f"; {HOW_TO_ALLOW}" if exc.status == 403 else "")
        body = (note + "\n").encode("utf-8", "replace")
        phrase = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[exc.status]
        response = (f"HTTP/1.1 {exc.status} {phrase} ({reason[:300]})\r\n"
                    f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
                    "Connection: close\r\n\r\n").encode("latin-1", "replace") + body
        if self.notes is not None:  # one whole line, before the command hears the answer
            with contextlib.suppress(OSError):
                os.write(self.notes, body)
        with contextlib.suppress(OSError):
            client.sendall(response)
        with self.lock, contextlib.suppress(OSError):
            if not self.closed and self.notes is None:  # the launcher writes it to stderr
                self.control.sendall(body)


def _open_notes(raw: bytes) -> int | None:
    """The notes file a launcher named (a ``*.proxy-notes`` regular file of ours, opened
    to append, never through a link), or None."""
    path = os.fsdecode(raw)
    if not path.endswith(".proxy-notes") or not os.path.isabs(path):
        return None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        return None
    return fd


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > _MAX_HEAD:
            raise ProxyRefusal(400, f"the request head is longer than {_MAX_HEAD} bytes")
        chunk = sock.recv(8192)
        if not chunk:
            raise OSError("closed before a request")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _authority(text: str, default: int) -> tuple[str, int]:
    host, port = text, str(default)
    if text.startswith("["):
        host, _, after = text[1:].partition("]")
        port = after.removeprefix(":") or port
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    if "@" in host or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ProxyRefusal(400, f"bad host or port in {text!r}")
    return host, int(port)


def _relay(a: socket.socket, b: socket.socket, idle: float) -> None:
    """Copy bytes both ways until both sides are done or nothing moves for ``idle`` s."""
    for sock in (a, b):
        sock.settimeout(idle)
    peer = {a.fileno(): (a, b), b.fileno(): (b, a)}
    poller = select.poll()
    for fd in peer:
        poller.register(fd, select.POLLIN)
    reading = set(peer)
    while reading:
        events = poller.poll(idle * 1000)
        if not events:
            return
        for fd, _ in events:
            src, dst = peer[fd]
            data = src.recv(65536)
            if data:
                dst.sendall(data)
                continue
            reading.discard(fd)
            poller.unregister(fd)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
