"""`loki mcp --http` before authentication: a slowloris attack performed for real (1,200
half-open connections from one address against a server held to 1,024 descriptors) does
not lock out a real client, and refused requests are logged, rate-limited."""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest

from test_mcp_http import INIT, TOKEN, Server, http_server, in_session, post, text_of

HALF_OPEN = 1_200
HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "  # and never more


@pytest.fixture
def capped_python(tmp_path: Path) -> str:
    """python3 under a hard limit of 1,024 descriptors: raising the soft one cannot help."""
    wrapper = tmp_path / "python-1024"
    wrapper.write_text('#!/bin/sh\nulimit -n 1024 || exit 3\nexec python3 "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.fixture
def many_descriptors() -> Any:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < HALF_OPEN + 200:
        pytest.skip(f"this test opens {HALF_OPEN} sockets; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, HALF_OPEN + 200), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _half_open(server: Server) -> list[socket.socket]:
    parts = urlsplit(server.url)
    opened = []
    for _ in range(HALF_OPEN):
        sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
        sock.sendall(HEAD)
        opened.append(sock)
    return opened


def _dropped(socks: list[socket.socket]) -> int:
    """How many of ``socks`` the server closed (EOF or reset: the kernel's answer)."""
    count = 0
    for sock in socks:
        try:
            count += sock.recv(1, socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            pass  # still open, waiting
        except ConnectionResetError:
            count += 1
    return count


def test_a_slowloris_does_not_lock_out_a_real_client(root: Path, capped_python: str,
                                                      many_descriptors: None) -> None:
    (root / "hello.txt").write_text("hi\n")
    with http_server(capped_python, root) as server:
        attackers = _half_open(server)
        try:
            async def listing(client: Any) -> str:
                return text_of(await client.call_tool("list_dir", {"path": "."}))

            shown = anyio.run(in_session, server.url, listing)
            deadline = time.monotonic() + 30
            while (dropped := _dropped(attackers)) < HALF_OPEN - 64:
                assert time.monotonic() < deadline, f"only {dropped} half-open were dropped"
                time.sleep(0.1)
        finally:
            for sock in attackers:
                with contextlib.suppress(OSError):
                    sock.close()
    assert "hello.txt" in shown
    assert "Too many open files" not in server.log()


def test_refused_requests_are_logged_at_a_bounded_rate(root: Path) -> None:
    with http_server("python3", root) as server:
        for _ in range(30):
            assert post(server, INIT, authorization="Bearer wrong").status_code == 401
        for _ in range(30):
            assert post(server, INIT, authorization=f"Bearer {TOKEN}",
                        host="evil.example").status_code == 421
        # the last refusal's line (it goes with the response, and the once-a-minute line
        # of each kind with the first): then every line the 60 requests make is written
        deadline = time.monotonic() + 30
        while "with 421" not in (log := server.log()):
            assert time.monotonic() < deadline, log
            time.sleep(0.02)
    assert log.count("with 401: missing or wrong bearer token") == 1
    assert log.count("with 421") == 1 and "from 127.0.0.1" in log
    assert log.count("evil.example") <= 1  # no line per request, from the SDK either
