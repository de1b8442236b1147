"""Local servers on 127.0.0.x standing in for outside hosts in the network-proxy tests.

``StaticServer`` serves a folder over HTTP or HTTPS (a certificate from a trustme test CA
for the names it stands in for), ``Sink`` records every TCP connection or UDP datagram
that reaches it (a host no command may reach), and ``tiny_wheel`` builds an installable
wheel. Names reach these addresses only through the toolbox's ``hosts`` mapping.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import socket
import ssl
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trustme


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class StaticServer:
    """A folder served on ``address`` (port chosen by the kernel), maybe over TLS."""

    def __init__(self, address: str, folder: Path, tls: ssl.SSLContext | None = None) -> None:
        handler = lambda *a: _Quiet(*a, directory=str(folder))  # noqa: E731
        self.httpd = http.server.ThreadingHTTPServer((address, 0), handler)
        self.requests: list[str] = []
        original = self.httpd.finish_request

        def finish(request: Any, client: Any) -> None:
            self.requests.append(str(client))
            original(request, client)

        self.httpd.finish_request = finish  # type: ignore[method-assign]
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Sink:
    """A TCP listener and a UDP socket on ``address`` that count what reaches them."""

    def __init__(self, address: str) -> None:
        self.tcp = socket.create_server((address, 0))
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((address, self.port))
        self.hits: list[str] = []
        threading.Thread(target=self._tcp, daemon=True).start()
        threading.Thread(target=self._udp, daemon=True).start()

    def _tcp(self) -> None:
        while True:
            try:
                conn, peer = self.tcp.accept()
            except OSError:
                return
            self.hits.append(f"tcp from {peer}")
            conn.close()

    def _udp(self) -> None:
        while True:
            try:
                data, peer = self.udp.recvfrom(4096)
            except OSError:
                return
            self.hits.append(f"udp {data!r} from {peer}")

    def settled(self, timeout: float = 30.0) -> list[str]:
        """The hits of everything sent before this call: a marker connection and datagram
        of ours go in behind whatever is queued, and once the listeners have taken both,
        all that came before has been counted (no fixed wait for what may be in flight)."""
        with socket.create_connection(self.tcp.getsockname(), timeout=timeout) as conn:
            ours = f"tcp from {conn.getsockname()}"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.connect(self.udp.getsockname())  # the source address is known from here
            udp.send(b"settled")
            marker = f"udp {b'settled'!r} from {udp.getsockname()}"
            deadline = time.monotonic() + timeout
            while not (ours in self.hits and marker in self.hits):
                assert time.monotonic() < deadline, f"the sink never saw its markers: {self.hits}"
                time.sleep(0.01)
        return [hit for hit in self.hits if hit not in (ours, marker)]

    def close(self) -> None:
        self.tcp.close()
        self.udp.close()


@contextmanager
def local_ca(names: list[str]) -> Iterator[tuple[trustme.CA, ssl.SSLContext]]:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    yield ca, context


def tiny_wheel(folder: Path, name: str = "tinypkg", version: str = "0.1") -> Path:
    """A pure-Python wheel whose module holds ``VALUE = 42``."""
    files = {
        f"{name}/__init__.py": b"VALUE = 42\n",
        f"{name}-{version}.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{name}-{version}.dist-info/WHEEL":
            b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in files.items()]
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
