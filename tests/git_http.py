"""git's smart HTTP on 127.0.0.1: a real ``git http-backend`` CGI behind a small server.

Serves the repositories under ``root`` at ``http://127.0.0.1:PORT/<name>``; a path under
``/private/`` answers 401 (a server that wants credentials), which a fleet must turn
into a quick failure, never a prompt that waits forever. With ``auth=(user, password)``
every request must carry them (HTTP Basic), as a private repository on a forge wants.
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from fake_servers import served


class GitHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, auth: tuple[str, str] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.requests: list[str] = []
        self.refused: list[str] = []  # requests answered 401
        self.authorization = (None if auth is None else
                              "Basic " + base64.b64encode(":".join(auth).encode()).decode())

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"


class _Handler(BaseHTTPRequestHandler):
    server: GitHTTPServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._cgi()

    def do_POST(self) -> None:
        self._cgi()

    def _cgi(self) -> None:
        parts = urlsplit(self.path)
        self.server.requests.append(f"{self.command} {parts.path}")
        wanted = self.server.authorization
        if parts.path.startswith("/private/") or (
                wanted is not None and self.headers.get("Authorization") != wanted):
            self.server.refused.append(f"{self.command} {parts.path}")
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        env = {"PATH": os.environ["PATH"], "GIT_PROJECT_ROOT": str(self.server.root),
               "GIT_HTTP_EXPORT_ALL": "1", "REQUEST_METHOD": self.command,
               "PATH_INFO": parts.path, "QUERY_STRING": parts.query,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
               "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", "")}
        done = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env,
                              check=False, timeout=60)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@contextmanager
def git_http(root: Path, auth: tuple[str, str] | None = None) -> Iterator[GitHTTPServer]:
    with served(GitHTTPServer(root, auth)) as server:
        yield server
