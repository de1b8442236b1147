"""`loki mcp --http`: a real server on 127.0.0.1, driven by the SDK's streamable HTTP client.

The server runs as a subprocess (under both mcp SDK generations where it matters:
``mcp_python``, see conftest); the client is this environment's SDK, or plain httpx
where a test needs a request the SDK would never send (no token, a foreign Origin).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cli_run import isolated
from procs import NS_PID, alive, running

pytest.importorskip("mcp")

import anyio
import httpx
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

try:
    import httpx2 as client_http  # the HTTP client mcp 2.x speaks through
except ImportError:  # mcp 1.x: httpx
    client_http = httpx  # type: ignore[misc]

SRC = Path(__file__).resolve().parents[1] / "src"
GUARD = 60.0  # seconds: a guard against a hang, not a timing
TOKEN = "test-token-0123456789abcdef"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
# a command that says it started, with its shell's pid, then runs until stopped
LONG = f"echo $$ {NS_PID} > shell.pid; touch started; sleep 300"

Scenario = Callable[[ClientSession], Awaitable[Any]]


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def http_server(python: str, root: Path, *flags: str, env: dict[str, str] | None = None,
                ) -> Iterator[Server]:
    """`loki mcp --root ROOT --http 127.0.0.1:0 FLAGS`, stopped with SIGTERM afterwards."""
    scratch = root.parent / "server-tmp"
    scratch.mkdir(exist_ok=True)
    log_path = root.parent / "server-stderr.txt"
    proc = subprocess.Popen(
        [python, "-m", "yggdrasil.loki", "mcp", "--root", str(root), "--http", "127.0.0.1:0",
         *flags], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=log_path.open("wb"),
        env={"PYTHONPATH": str(SRC), "TMPDIR": str(scratch), "PATH": os.environ["PATH"],
             "LOKI_MCP_TOKEN": TOKEN, **isolated(), **(env or {})})
    server = Server("", proc, log_path)
    try:
        deadline = time.monotonic() + GUARD
        while not (found := re.search(r"serving MCP over HTTP at (\S+)", server.log())):
            assert proc.poll() is None, f"the server died: {server.log()}"
            assert time.monotonic() < deadline, f"the server never listened: {server.log()}"
            time.sleep(0.05)
        server.url = found.group(1)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(GUARD)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def in_session(url: str, scenario: Scenario, token: str = TOKEN, *,
                     delete: bool = True) -> Any:
    """Open an MCP session at ``url`` with the SDK's client, run ``scenario``, then end the
    session (DELETE) or, without ``delete``, just go away."""
    with anyio.fail_after(GUARD):
        http = client_http.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                       timeout=client_http.Timeout(30, read=300))
        async with http, streamable_http_client(url, http_client=http,
                                                terminate_on_close=delete) as streams, \
                ClientSession(streams[0], streams[1]) as client:
            await client.initialize()
            return await scenario(client)


def text_of(result: Any) -> str:
    return "".join(part.text for part in result.content)


def post(server: Server, body: Any, **headers: str) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(server.url, content=data, headers={**ACCEPT, **headers}, timeout=GUARD)


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + GUARD
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


# -- the door: token, Host and Origin, body size ---------------------------------------------


def test_no_token_or_a_wrong_one_is_401_and_opens_no_session(root: Path) -> None:
    with http_server("python3", root) as server:
        bare = post(server, INIT)
        wrong = post(server, INIT, authorization="Bearer not-the-token-at-all")
        right = post(server, INIT, authorization=f"Bearer {TOKEN}")
    assert bare.status_code == wrong.status_code == 401
    assert bare.headers["www-authenticate"].startswith("Bearer")
    assert bare.json()["error"]["message"] == "missing or wrong bearer token"
    assert right.status_code == 200 and right.headers["mcp-session-id"]
    assert server.log().count("opened") == 1


def test_a_foreign_origin_is_403_and_a_foreign_host_421(root: Path) -> None:
    auth = f"Bearer {TOKEN}"
    with http_server("python3", root) as server:
        port = server.url.split(":")[2].split("/")[0]
        evil = post(server, INIT, authorization=auth, origin="http://evil.example")
        rebound = post(server, INIT, authorization=auth, host=f"evil.example:{port}")
        same = post(server, INIT, authorization=auth, origin=f"http://127.0.0.1:{port}")
    assert evil.status_code == 403 and rebound.status_code == 421
    assert same.status_code == 200
    assert "opened" in server.log() and server.log().count("opened") == 1


def test_hosts_and_origins_can_be_added(root: Path) -> None:
    auth = f"Bearer {TOKEN}"
    with http_server("python3", root, "--http-host", "box.internal", "--http-origin",
                     "https://app.example") as server:
        named = post(server, INIT, authorization=auth, host="box.internal")
        page = post(server, INIT, authorization=auth, origin="https://app.example")
        other = post(server, INIT, authorization=auth, origin="https://other.example")
    assert (named.status_code, page.status_code, other.status_code) == (200, 200, 403)


def test_a_body_over_the_limit_is_413_with_a_json_rpc_error_and_the_server_goes_on(
        root: Path) -> None:
    auth = f"Bearer {TOKEN}"
    big = {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
           "params": {"name": "write_file", "arguments": {"path": "a", "content": "x" * 5000}}}

    def chunks() -> Iterator[bytes]:  # no content-length: the limit holds while reading
        data = json.dumps(big).encode()
        yield from (data[i:i + 512] for i in range(0, len(data), 512))

    with http_server("python3", root, "--max-message-bytes", "2000") as server:
        declared = post(server, big, authorization=auth)
        streamed = httpx.post(server.url, content=chunks(), timeout=GUARD,
                              headers={**ACCEPT, "authorization": auth})
        after = post(server, INIT, authorization=auth)
    assert declared.status_code == streamed.status_code == 413
    assert streamed.json()["id"] == 4
    assert "over the limit of 2000 bytes" in streamed.json()["error"]["message"]
    assert after.status_code == 200
    assert not (root / "a").exists()


def test_an_ended_session_is_404(root: Path) -> None:
    auth = f"Bearer {TOKEN}"
    with http_server("python3", root) as server:
        opened = post(server, INIT, authorization=auth)
        sid = opened.headers["mcp-session-id"]
        ended = httpx.delete(server.url, headers={"authorization": auth, "mcp-session-id": sid})
        again = post(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                     authorization=auth, **{"mcp-session-id": sid})
    assert ended.status_code == 200 and again.status_code == 404
    assert re.search(r"session \w+ ended: its toolbox is closed", server.log())


# -- sessions: each its own toolbox ------------------------------------------------------------


def test_two_sessions_do_not_see_each_others_jobs_and_a_deleted_session_stops_its_job(
        root: Path, mcp_python: str) -> None:
    async def scenario(url: str) -> tuple[str, str, str]:
        async def other(client: ClientSession) -> str:
            return text_of(await client.call_tool("jobs", {}))

        async def owner(client: ClientSession) -> tuple[str, str, str]:
            started = text_of(await client.call_tool("run", {"command": LONG,
                                                             "background": True}))
            await anyio.to_thread.run_sync(wait_for, root / "started")
            mine = text_of(await client.call_tool("jobs", {}))
            return started, mine, await in_session(url, other)
        return await in_session(url, owner)  # type: ignore[no-any-return]

    with http_server(mcp_python, root) as server:
        started, mine, theirs = anyio.run(scenario, server.url)
        pids = running(root / "shell.pid")
        deadline = time.monotonic() + GUARD  # the DELETE closed the owner's toolbox
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive_after = [pid for pid in pids if alive(pid)]
    assert started.startswith("started job ")
    job = started.split()[2].rstrip(":")
    assert job in mine and "sleep 300" in mine
    assert job not in theirs and "sleep" not in theirs
    assert pids and not alive_after
    assert server.log().count("its toolbox is closed") == 2


def test_end_to_end_list_edit_background_job_cancel(root: Path, mcp_python: str) -> None:
    (root / "app.py").write_text("debug = False\n")

    async def scenario(client: ClientSession) -> dict[str, Any]:
        seen: dict[str, Any] = {"tools": [t.name for t in (await client.list_tools()).tools]}
        seen["edit"] = text_of(await client.call_tool(
            "edit_file", {"path": "app.py", "old": "False", "new": "True"}))
        started = text_of(await client.call_tool(
            "run", {"command": "sleep 3; echo job-done", "background": True}))
        job = started.split()[2].rstrip(":")
        seen["started"] = started
        outputs: list[str] = []  # job_output waits for new output or the end, whichever first
        while not outputs or not outputs[-1].startswith("exit="):
            outputs.append(text_of(await client.call_tool("job_output", {"job": job, "wait": 30})))
        seen["job"] = outputs
        async with anyio.create_task_group() as tg:  # a call cancelled by its caller
            tg.start_soon(client.call_tool, "run", {"command": LONG})
            await anyio.to_thread.run_sync(wait_for, root / "started")
            seen["pids"] = running(root / "shell.pid")
            tg.cancel_scope.cancel()
        seen["after"] = text_of(await client.call_tool("run", {"command": "echo after"}))
        return seen

    with http_server(mcp_python, root) as server:
        seen = anyio.run(in_session, server.url, scenario)
    assert {"list_dir", "read_file", "edit_file", "run", "jobs", "job_output"} <= set(seen["tools"])
    assert seen["edit"].startswith("edited app.py (1 replacement)")
    assert (root / "app.py").read_text() == "debug = True\n"
    assert "job 1 running" in seen["started"]
    assert seen["job"][-1].startswith("exit=0") and "job-done" in "".join(seen["job"])
    assert seen["pids"] and not any(alive(pid) for pid in seen["pids"])
    assert seen["after"].startswith("exit=0\nstdout:\nafter")
    log = server.log()
    assert "cancelled run" in log
    # mcp 1.30 logs a traceback of its own when a session ends (its SSE writer finds its
    # stream closed): that one only
    assert log.count("Traceback") == log.count("Error in standalone SSE writer")


def test_a_session_left_idle_ends_and_its_job_is_stopped(root: Path) -> None:
    async def leave_a_job(client: ClientSession) -> str:
        started = text_of(await client.call_tool("run", {"command": LONG, "background": True}))
        await anyio.to_thread.run_sync(wait_for, root / "started")
        return started

    with http_server("python3", root, "--idle-timeout", "2") as server:
        started = anyio.run(lambda: in_session(server.url, leave_a_job, delete=False))
        pids = running(root / "shell.pid")
        deadline = time.monotonic() + GUARD
        while "idle: its toolbox is closed" not in server.log():
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)
        alive_after = [pid for pid in pids if alive(pid)]
    assert started.startswith("started job ") and pids and not alive_after


def test_sessions_over_the_cap_are_503_until_one_ends(root: Path) -> None:
    auth = f"Bearer {TOKEN}"
    with http_server("python3", root, "--max-sessions", "1") as server:
        first = post(server, INIT, authorization=auth)
        second = post(server, INIT, authorization=auth)
        httpx.delete(server.url, headers={"authorization": auth,
                                          "mcp-session-id": first.headers["mcp-session-id"]})
        deadline = time.monotonic() + GUARD
        while "ended: its toolbox is closed" not in server.log():
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.05)
        third = post(server, INIT, authorization=auth)
    assert (first.status_code, second.status_code, third.status_code) == (200, 503, 200)
    assert "1 sessions are open" in second.json()["error"]["message"]


def test_http_app_serves_from_python_with_a_toolbox_per_session(root: Path) -> None:
    import threading

    import uvicorn

    from yggdrasil.loki.mcp import allowed_hosts, http_app
    from yggdrasil.loki.tools import filesystem_toolbox

    made: list[Any] = []

    def make() -> Any:
        made.append(filesystem_toolbox(root, read_only=True))
        return made[-1]

    app = http_app(make, token=TOKEN, hosts=allowed_hosts("127.0.0.1"))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + GUARD
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}/mcp"

        async def names(client: ClientSession) -> list[str]:
            return [t.name for t in (await client.list_tools()).tools]
        first = anyio.run(lambda: in_session(url, names))
        second = anyio.run(lambda: in_session(url, names))
    finally:
        server.should_exit = True
        thread.join(GUARD)
    assert first == second and "write_file" not in first and "read_file" in first
    assert len(made) == 2 and made[0] is not made[1]
    assert all(box.closed for box in made)


def test_sigterm_closes_every_open_session(root: Path) -> None:
    auth = f"Bearer {TOKEN}"
    with http_server("python3", root) as server:
        for _ in range(2):
            assert post(server, INIT, authorization=auth).status_code == 200
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(GUARD) == 0
    assert server.log().count("stopped with the server: its toolbox is closed") == 2
    assert not list((root.parent / "server-tmp").iterdir())


def test_a_generated_token_is_printed_once_and_works(root: Path) -> None:
    with http_server("python3", root, env={"LOKI_MCP_TOKEN": ""}) as server:
        token = re.search(r"Bearer <token>'\): (\S+)", server.log())
        assert token
        tools = anyio.run(lambda: in_session(server.url, ClientSession.list_tools,
                                             token=token.group(1)))
    assert tools.tools and server.log().count(token.group(1)) == 1


def test_bad_token_sources_and_addresses_fail_with_a_clear_error(root: Path, tmp_path: Path) -> None:
    short = tmp_path / "tok"
    short.write_text("abc\n")
    cases = [(["--http", "127.0.0.1:0", "--token-file", str(short)], "use at least 16"),
             (["--http", "127.0.0.1:0", "--token-file", str(tmp_path / "none")], "No such file"),
             (["--http", "nowhere"], "write HOST:PORT")]
    for flags, says in cases:
        done = subprocess.run(["python3", "-m", "yggdrasil.loki", "mcp", "--root", str(root),
                               *flags], capture_output=True, text=True, timeout=GUARD,
                              env={"PYTHONPATH": str(SRC), "PATH": os.environ["PATH"],
                                   **isolated()})
        assert done.returncode == 2 and says in done.stderr, (flags, done.stderr)


def test_mcp_inspectors_cli_calls_a_tool_with_the_token_and_is_refused_without(
        root: Path) -> None:
    """A second client, not written in Python: MCP Inspector's CLI (npm
    @modelcontextprotocol/inspector, which .ci/run installs when npm is there)."""
    inspector = shutil.which("mcp-inspector")
    if inspector is None:
        pytest.skip("MCP Inspector is not installed (npm i -g @modelcontextprotocol/inspector)")
    (root / "notes.txt").write_text("hello\n")
    with http_server("python3", root) as server:
        def inspect(*headers: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [inspector, "--cli", server.url, "--transport", "http", *headers,
                 "--method", "tools/call", "--tool-name", "read_file", "--tool-arg",
                 "path=notes.txt"], capture_output=True, text=True, timeout=GUARD)
        called = inspect("--header", f"Authorization: Bearer {TOKEN}")
        refused = inspect()
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["content"][0]["text"] == "1\thello"
    assert refused.returncode != 0
    assert "missing or wrong bearer token" in refused.stdout + refused.stderr


# -- the programs of the docs page, as written ------------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs" / "mcp.md"


def python_blocks(path: Path) -> list[str]:
    """The page's python blocks, those in tabs (indented) too, dedented."""
    found = re.findall(r"^( *)```python\n(.*?)^\1```$", path.read_text(), re.M | re.S)
    return [textwrap.dedent(code) for _, code in found]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_docs_client_programs_use_only_public_sdk_modules() -> None:
    clients = [b for b in python_blocks(DOCS) if "streamable_http_client(" in b]
    assert len(clients) == 2  # mcp 2.x and 1.x
    for code in clients:
        for module in re.findall(r"^(?:from|import) (\S+)", code, re.M):
            assert not any(part.startswith("_") for part in module.split(".")), module


@pytest.mark.parametrize(("kind", "client"), [("serve_http(", "installed"),
                                              ("http_app(", "installed"),
                                              ("serve_http(", "other")])
def test_the_docs_server_and_client_programs_run_as_written(
        root: Path, tmp_path: Path, kind: str, client: str,
        request: pytest.FixtureRequest) -> None:
    """The server programs, and the client program of each SDK major under a Python with
    that major (this environment's, and the other one's venv, see conftest)."""
    python = sys.executable if client == "installed" else str(
        request.getfixturevalue("other_mcp_python"))
    probe = "import importlib.metadata as m; print(m.version('mcp'))"
    major = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                           timeout=GUARD).stdout.split(".")[0]
    blocks = python_blocks(DOCS)
    server_code = next(b for b in blocks if kind in b)
    client_code = next(b for b in blocks if "streamable_http_client(" in b
                       and f"import httpx{'2' if major == '2' else ''}\n" in b)
    (root / "README.md").write_text("# the project\n")
    (tmp_path / "server.py").write_text(server_code)
    (tmp_path / "client.py").write_text(client_code)
    port = free_port()
    env = {"PYTHONPATH": str(SRC), "PATH": os.environ["PATH"], "TMPDIR": str(tmp_path),
           **isolated(), "PROJECT": str(root), "PORT": str(port), "LOKI_MCP_TOKEN": TOKEN,
           "LOKI_MCP_URL": f"http://127.0.0.1:{port}/mcp"}
    server = subprocess.Popen([sys.executable, str(tmp_path / "server.py")], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + GUARD
        while True:
            try:
                httpx.get(env["LOKI_MCP_URL"], timeout=1)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        done = subprocess.run([python, str(tmp_path / "client.py")], env=env,
                              capture_output=True, text=True, timeout=GUARD)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(GUARD)
    assert done.returncode == 0, done.stderr[-2000:]
    count, first_line = done.stdout.splitlines()[:2]
    assert count.endswith(" tools") and int(count.split()[0]) > 10
    assert first_line == "1\t# the project"
