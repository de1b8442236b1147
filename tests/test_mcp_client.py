"""Tools from other MCP servers (Toolbox.add_mcp, --mcp): a real server on the official SDK,
started by the test over stdio and over streamable HTTP on 127.0.0.1, called by the loop."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from cli_run import child_env, loki
from fake_servers import FakeModelServer, openai_reply, serve
from yggdrasil.loki import Loki
from yggdrasil.loki.engine import RetryPolicy
from yggdrasil.loki.errors import ToolDefinitionError
from yggdrasil.loki.tools import McpServer, filesystem_toolbox

SERVER = str(Path(__file__).with_name("mcp_tool_server.py"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The test server over streamable HTTP, for as long as this module's tests run."""
    with http_server() as url:
        yield url


@contextmanager
def http_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60  # a guard against a server that never starts
        while True:
            assert proc.poll() is None, "the MCP test server ended"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the MCP test server never listened"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(params=["stdio", "http"])
def notes(request: pytest.FixtureRequest) -> McpServer:
    if request.param == "stdio":
        return McpServer("notes", command=sys.executable, args=(SERVER, "stdio"))
    return McpServer("notes", url=request.getfixturevalue("http_url"))


def test_the_loop_calls_a_servers_tools_and_a_deny_rule_refuses_one(
        server: FakeModelServer, root: Path, notes: McpServer) -> None:
    server.queue(
        openai_reply(None, [("notes__add", {"a": 2, "b": 3}),
                            ("notes__remember", {"note": "milk"})]),
        openai_reply(None, [("notes__drop_all", {})], id_prefix="b_"),
        openai_reply("2 + 3 = 5; one note kept."))
    seen: list[tuple[str, str]] = []
    with filesystem_toolbox(root, rules=[("deny", "notes__drop_all")],
                            before_call=lambda tool, args: seen.append(("before", tool)),
                            after_call=lambda tool, args, obs: seen.append(("after", obs)),
                            ) as box:
        box.add_mcp(notes)
        result = Loki("openai", model="gpt-fake", base_url=f"{server.url}/v1",
                      api_key="sk-test", retry=RetryPolicy(attempts=1)).act("t", toolbox=box)
    assert [s.observation for s in result.steps][:2] == ["5", "1 note(s)"]
    assert result.steps[2].observation.startswith(
        "ERROR: the command 'notes__drop_all' is refused by the rule ('deny', 'notes__drop_all')")
    assert ("before", "notes__add") in seen and ("after", "5") in seen  # the hooks apply
    first = server.posts()[0]
    add = next(t["function"] for t in first["tools"] if t["function"]["name"] == "notes__add")
    assert add["parameters"]["properties"]["a"]["type"] == "integer"  # the server's schema
    assert "runs outside loki's fence" in add["description"]
    assert "MCP server 'notes'" in first["messages"][0]["content"]  # the status says so


def test_errors_a_dead_server_and_close(root: Path, notes: McpServer) -> None:
    box = filesystem_toolbox(root, rules=[("ask", "notes__remember")])
    box.add_mcp(notes)
    assert box.call("notes__fail", {"why": "boom"}).startswith("ERROR: ")
    assert box.call("notes__add", {"a": 1}).startswith(
        "ERROR: notes__add is missing required argument 'b'")
    assert box.call("notes__remember", {"note": "x"}).startswith("REFUSED: ")  # no confirm
    if notes.command is not None:
        assert box.call("notes__die", {}).startswith("ERROR: the MCP server 'notes' failed")
        assert box.call("notes__add", {"a": 1, "b": 2}).startswith("ERROR: ")
    box.close()
    assert box.call("notes__add", {"a": 1, "b": 2}).startswith(
        "ERROR: the MCP server 'notes' is not running")


def test_an_http_server_that_goes_away_gives_errors(root: Path) -> None:
    with filesystem_toolbox(root) as box:
        with http_server() as url:
            box.add_mcp(McpServer("gone", url=url, timeout=20))
            assert box.call("gone__add", {"a": 1, "b": 2}) == "3"
        seen = box.call("gone__add", {"a": 1, "b": 2})  # the server's process ended
        assert seen.startswith("ERROR: the MCP server 'gone' failed on add"), seen


def test_a_server_that_cannot_start_is_a_definition_error(root: Path) -> None:
    with filesystem_toolbox(root) as box:
        with pytest.raises(ToolDefinitionError, match="cannot start the MCP server 'gone'"):
            box.add_mcp({"name": "gone", "command": sys.executable,
                         "args": ["-c", "raise SystemExit(1)"]})
        assert not any(name.startswith("gone__") for name in box.names())


@pytest.mark.parametrize("bad", ["noequals", "a__b=x", "x=", "1x=cmd", "x='unbalanced"])
def test_bad_specs_say_what_is_allowed(bad: str) -> None:
    with pytest.raises(ValueError):
        McpServer.parse(bad)


def test_the_mcp_flag(root: Path, http_url: str) -> None:
    with serve() as server:
        server.queue(openai_reply(None, [("notes__add", {"a": 20, "b": 22})]),
                     openai_reply(None, [("web__add", {"a": 1, "b": 1})], id_prefix="b_"),
                     openai_reply("42"))
        done = loki(root.parent, "do", "t", "--root", str(root), "--engine", "openai",
                    "--base-url", f"{server.url}/v1", "--model", "m", "--json",
                    "--mcp", f"notes={sys.executable} {SERVER} stdio",
                    "--mcp", f"web={http_url}", "--rule", "deny:web__add")
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert steps[0]["observation"] == "42"
    assert steps[1]["observation"].startswith("ERROR: the command 'web__add' is refused")


def test_continue_restores_the_toolbox_flags_and_flags_given_now_override(root: Path) -> None:
    """A continued run has the first run's MCP server and rules (its history calls them);
    a flag given now replaces the recorded one of the same setting; stderr says both."""
    notes = f"notes={sys.executable} {SERVER} stdio"
    with serve() as server:
        server.queue(openai_reply(None, [("notes__add", {"a": 20, "b": 22})]),
                     openai_reply(None, [("notes__remember", {"note": "x"})], id_prefix="b_"),
                     openai_reply("first"),
                     openai_reply(None, [("notes__add", {"a": 1, "b": 2})], id_prefix="c_"),
                     openai_reply(None, [("notes__remember", {"note": "y"})], id_prefix="d_"),
                     openai_reply("second"))
        base = ("do", "--root", str(root), "--engine", "openai", "--base-url",
                f"{server.url}/v1", "--model", "m", "--json")
        first = loki(root.parent, *base, "t", "--mcp", notes, "--rule", "deny:notes__remember",
                     "--max-jobs", "3")
        second = loki(root.parent, *base, "again", "--continue", "--rule",
                      "allow:notes__remember")
        tools = [[t["function"]["name"] for t in post["tools"]] for post in server.posts()]
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    one, two = (json.loads(done.stdout)["steps"] for done in (first, second))
    assert one[0]["observation"] == "42" and one[1]["observation"].startswith("ERROR: the comm")
    assert two[0]["observation"] == "3"  # the server is there again
    assert two[1]["observation"] == "1 note(s)"  # the rule given now replaced the deny
    assert "notes__add" in tools[3]
    run = first.stderr.split("; run ", 1)[1].split()[0]
    assert (f"loki: restored the toolbox flags of run {run}: --max-jobs 3, --mcp notes\n"
            in second.stderr), second.stderr
    assert f"loki: given now instead of run {run}'s: --rule\n" in second.stderr
    # the continued run recorded what it ran with, for the next --continue
    third = loki(root.parent, "do", "--root", str(root), "--engine", "scripted", "--model",
                 str(root.parent / "none.jsonl"), "x", "--continue", "--read-only")
    assert "--mcp notes" in third.stderr and "--rule allow:notes__remember" in third.stderr


CLIENT = """
import json, sys
from yggdrasil.loki.tools import McpServer, filesystem_toolbox
root, server, url = sys.argv[1:4]
seen = {}
with filesystem_toolbox(root, rules=[("deny", "web__drop_all")]) as box:
    box.add_mcp(McpServer("notes", command=sys.executable, args=(server, "stdio")))
    box.add_mcp(McpServer("web", url=url))
    seen["stdio"] = box.call("notes__add", {"a": 2, "b": 3})
    seen["http"] = box.call("web__remember", {"note": "x"})
    seen["denied"] = box.call("web__drop_all", {})
    seen["failed"] = box.call("notes__fail", {"why": "boom"})
print(json.dumps(seen))
"""


def test_the_client_under_both_sdk_generations(root: Path, mcp_python: str) -> None:
    """The client, and the servers, under this environment's mcp SDK and the other major."""
    port = free_port()
    server = subprocess.Popen([mcp_python, SERVER, "http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        done = subprocess.run([mcp_python, "-c", CLIENT, str(root), SERVER,
                               f"http://127.0.0.1:{port}/mcp"], capture_output=True, text=True,
                              timeout=120, env=child_env(root.parent))
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["stdio"] == "5" and seen["http"].endswith("note(s)")
    assert seen["denied"].startswith("ERROR: the command 'web__drop_all' is refused")
    assert seen["failed"].startswith("ERROR: ")
