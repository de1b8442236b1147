"""`loki mcp` stops when told: cancelled requests, signals, stdin EOF, garbage on the wire.

A raw JSON-RPC client over the server's real stdin/stdout, so the exact messages are
under the test's control (a cancel for one request id, a line that is not JSON). Each
test runs the server under both mcp SDK generations (``mcp_python``, see conftest).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cli_run import isolated
from procs import NS_PID, alive, running

pytest.importorskip("mcp")

SRC = Path(__file__).resolve().parents[1] / "src"
GUARD = 60.0  # seconds: a guard against a hang, not a timing
# The shell and a background child write their pids, then the command says it started.
LONG = (f"(sleep 300 & echo $! {NS_PID} > child.pid; wait) & echo $$ {NS_PID} > shell.pid; "
        "while [ ! -s child.pid ]; do sleep 0.01; done; touch started; sleep 300")


class WireClient:
    """The client side of `loki mcp --root ROOT` over pipes, one JSON line per message."""

    def __init__(self, python: str, root: Path, tmpdir: Path, *flags: str) -> None:
        self.stderr_path = root.parent / "server-stderr.txt"
        self.proc = subprocess.Popen(
            [python, "-m", "yggdrasil.loki", "mcp", "--root", str(root), *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr_path.open("wb"),
            env={"PYTHONPATH": str(SRC), "TMPDIR": str(tmpdir), "PATH": os.environ["PATH"],
                 **isolated()})  # conftest's rules: no language servers, the run's cache
        self.buffer = b""
        self.seen: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any] | str) -> None:
        assert self.proc.stdin is not None
        line = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, rid: int, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})

    def call(self, rid: int, tool: str, **args: Any) -> None:
        self.request(rid, "tools/call", {"name": tool, "arguments": args})

    def answer(self, rid: int) -> dict[str, Any]:
        """The response to request ``rid`` (everything read on the way is kept in ``seen``)."""
        deadline = time.monotonic() + GUARD
        while True:
            for message in self.seen:
                if message.get("id") == rid and ("result" in message or "error" in message):
                    return message
            left = deadline - time.monotonic()
            assert left > 0, f"no answer to request {rid}; stderr: {self.stderr()}"
            self._read(left)

    def _read(self, timeout: float) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return
        chunk = os.read(fd, 1 << 16)
        assert chunk, f"the server closed stdout; stderr: {self.stderr()}"
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        self.seen += [json.loads(line) for line in lines if line.strip()]

    def initialize(self) -> None:
        self.request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "wire-test", "version": "1"}})
        assert "result" in self.answer(0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def exit_code(self) -> int:
        return self.proc.wait(GUARD)


@contextmanager
def wire(python: str, root: Path, tmpdir: Path) -> Iterator[WireClient]:
    client = WireClient(python, root, tmpdir)
    try:
        client.initialize()
        yield client
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
            client.proc.wait()


def text(message: dict[str, Any]) -> str:
    return "".join(part["text"] for part in message["result"]["content"])


def wait_for(path: Path, client: WireClient) -> None:
    deadline = time.monotonic() + GUARD
    while not path.exists():
        assert client.proc.poll() is None, f"the server died: {client.stderr()}"
        assert time.monotonic() < deadline, f"{path.name} never appeared: {client.stderr()}"
        time.sleep(0.01)


def command_pids(root: Path) -> list[int]:
    """The host pids of the command's shell and its background child."""
    return [pid for name in ("shell.pid", "child.pid") for pid in running(root / name)]


@pytest.fixture
def tmpdir_(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's TMPDIR (undo copies, scratch folders), apart from the root; short, so
    that the rules supervisor's socket fits a socket path there (under xdist too)."""
    return tmp_path_factory.mktemp("st")


def test_a_cancelled_request_stops_its_command_and_reads_answer_meanwhile(
        root: Path, tmpdir_: Path, mcp_python: str) -> None:
    (root / "notes.txt").write_text("hello\n")
    with wire(mcp_python, root, tmpdir_) as client:
        client.call(2, "run", command=LONG)
        wait_for(root / "started", client)
        client.call(3, "read_file", path="notes.txt")  # read-only: answers while run runs
        assert text(client.answer(3)) == "1\thello"
        assert not any(m.get("id") == 2 for m in client.seen)
        pids = command_pids(root)
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        client.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 2, "reason": "the user pressed stop"}})
        client.call(4, "run", command="echo after")  # waits for the cancelled run to end
        assert text(client.answer(4)).startswith("exit=0\nstdout:\nafter")
        assert not any(alive(pid) for pid in pids)
        assert not any("result" in m for m in client.seen if m.get("id") == 2)
        client.proc.stdin.close()  # type: ignore[union-attr]
        assert client.exit_code() == 0
    assert "cancelled run" in client.stderr()
    assert not list(tmpdir_.iterdir())


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "stdin EOF"])
def test_stopping_mid_command_leaves_nothing_running_and_no_undo_folder(
        root: Path, tmpdir_: Path, mcp_python: str, how: str) -> None:
    (root / "app.py").write_text("debug = False\n")
    with wire(mcp_python, root, tmpdir_) as client:
        client.call(1, "edit_file", path="app.py", old="False", new="True")
        assert text(client.answer(1)).startswith("edited app.py (1 replacement)\n")
        client.call(2, "run", command=LONG)
        wait_for(root / "started", client)
        pids = command_pids(root)
        kept = sorted(p.name.split("-")[1] for p in tmpdir_.iterdir())
        # the rules supervisor's socket (it checks the command's UNIX connects), the bytecode
        # cache, the scratch: all gone when the server stops (the undo copy of app.py is
        # in the checkpoint store, outside TMPDIR)
        assert kept == ["guard", "pycache", "tmp"]
        if how == "stdin EOF":
            client.proc.stdin.close()  # type: ignore[union-attr]
        else:
            client.proc.send_signal(getattr(signal, how))
        assert client.exit_code() == 0
    assert not any(alive(pid) for pid in pids)
    assert not list(tmpdir_.iterdir())  # no loki-undo-*, no loki-tmp-*
    assert (root / "app.py").read_text() == "debug = True\n"
    log = client.stderr()
    assert (f"stopping on {how}" in log) if how != "stdin EOF" else ("closed stdin" in log)
    assert "Traceback" not in log


def test_lines_it_cannot_parse_are_logged_and_the_server_goes_on(
        root: Path, tmpdir_: Path, mcp_python: str) -> None:
    with wire(mcp_python, root, tmpdir_) as client:
        client.send("this is not json")
        client.send('{"jsonrpc": "2.0", "id": 7, "method": ')
        client.send({"jsonrpc": "2.0", "id": 8, "nonsense": True})
        client.call(9, "list_dir")
        assert text(client.answer(9)) == "./ is empty"
    log = client.stderr()
    assert log.count("ignored a line that is not a valid JSON-RPC message") == 3
    assert "this is not json" in log and '"id": 7' in log


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory (VmHWM), in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def test_a_message_over_the_limit_is_answered_with_an_error_and_never_held(
        root: Path, tmpdir_: Path, mcp_python: str) -> None:
    (root / "notes.txt").write_text("hello\n")
    with wire(mcp_python, root, tmpdir_) as client:
        before = peak_rss_mb(client.proc.pid)
        head = '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": ' \
               '"write_file", "arguments": {"path": "big.txt", "content": "'
        assert client.proc.stdin is not None
        client.proc.stdin.write(head.encode())
        block = b"x" * (1 << 20)
        for _ in range(64):  # 64 MiB, written as the client would stream it
            client.proc.stdin.write(block)
        client.proc.stdin.write(b'"}}}\n')
        client.proc.stdin.flush()
        error = client.answer(5)["error"]
        client.call(6, "read_file", path="notes.txt")
        assert text(client.answer(6)) == "1\thello"
        peak = peak_rss_mb(client.proc.pid)
    assert error["code"] == -32600
    assert "message too large" in error["message"] and "16777216 bytes" in error["message"]
    assert not (root / "big.txt").exists()
    assert peak < 200, f"peak RSS {peak:.0f} MiB (at start {before:.0f} MiB)"
    assert "refused a message of 67108" in client.stderr()


def test_an_oversized_line_without_an_id_gets_an_error_for_null_and_a_lower_limit_holds(
        root: Path, tmpdir_: Path, mcp_python: str) -> None:
    client = WireClient(mcp_python, root, tmpdir_, "--max-message-bytes", "1000")
    try:
        client.initialize()
        client.send('{"params": {"id": 3, "pad": "' + "y" * 5000 + '"}, "id": 9}')  # id too late
        client.send('{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "list_dir"'
                    + " " * 5000 + "}, \"id\": 10}")
        client.call(11, "list_dir")
        assert text(client.answer(11)) == "./ is empty"
        errors = [m for m in client.seen if "error" in m]
    finally:
        client.proc.kill()
        client.proc.wait()
    assert [e["id"] for e in errors] == [None, None]
    assert all("over the limit of 1000 bytes" in e["error"]["message"] for e in errors)
