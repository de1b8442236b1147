"""The anthropic engine through the official SDK, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_servers import (
    DROP,
    HANG,
    FakeModelServer,
    Reply,
    anthropic_error,
    anthropic_reply,
)
from yggdrasil.loki import Loki, filesystem_toolbox
from yggdrasil.loki.engine import RetryPolicy
from yggdrasil.loki.errors import (
    ContextLengthError,
    EngineAuthError,
    EngineConfigError,
    EngineRequestError,
    EngineTimeout,
)


def loki_at(server: FakeModelServer, waits: list[float] | None = None, attempts: int = 3,
            **kwargs: object) -> Loki:
    """An anthropic Loki on the fake server; retries sleep into ``waits``."""
    sleeps = waits if waits is not None else []
    retry = RetryPolicy(attempts=attempts, base_delay=0.25, sleep=sleeps.append)
    return Loki("anthropic", model="claude-fake", base_url=server.url, api_key="sk-ant-test",
                retry=retry, **kwargs)  # type: ignore[arg-type]


def test_native_tool_use_edits_real_files(server: FakeModelServer, root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "mod.py").write_text("def add(a, b):\n    return a - b\n")
    server.queue(
        anthropic_reply("Let me find it.", [("grep", {"pattern": "def add", "glob": "*.py"})]),
        anthropic_reply(None, [("edit_file", {"path": "pkg/mod.py", "old": "a - b",
                                              "new": "a + b"}),
                               ("run_python", {"code": "from pkg.mod import add; print(add(2, 3))"})]),
        anthropic_reply("Fixed add: it subtracted."),
    )
    result = loki_at(server).act("fix add", root=root)
    assert (root / "pkg" / "mod.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert [s.tool for s in result.steps] == ["grep", "edit_file", "run_python"]
    assert result.steps[0].observation == "pkg/mod.py:1: def add(a, b):"
    assert result.steps[2].observation.startswith("exit=0\nstdout:\n5\n")
    assert result.answer == "Fixed add: it subtracted." and result.files_changed == ["pkg/mod.py"]
    first, _, last = server.posts()
    assert server.requests[0].path == "/v1/messages"
    assert "read_file(path" not in first["system"]  # the schemas are the catalog
    assert filesystem_toolbox(root).status in first["system"]
    assert first["max_tokens"] == 8192 and first["model"] == "claude-fake"
    assert first["tools"][0]["input_schema"]["type"] == "object"  # neutral schemas, as is
    # the first message carries the task and the repository map (Loki.act's repo_map)
    [message] = first["messages"]
    assert message["role"] == "user"
    assert message["content"][0]["text"].split("\n") == [
        "Task: fix add", "",
        "A map of the repository, its most referenced definitions (outline, find_symbol and "
        "read_file with symbol= show more):",
        "[repo map of .: 1 of 1 definitions in 1 of 1 files, most referenced first; "
        "outline(path) and find_symbol(name) show more]",
        "pkg/mod.py:",
        "  function add(a, b)  L1-2"]
    # both tool results ride in one user turn, in the order of the calls
    results = last["messages"][-1]
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == ["toolu_0", "toolu_1"]
    assert results["content"][0]["content"].startswith("edited pkg/mod.py (1 replacement)\n--- ")


def test_text_decisions(server: FakeModelServer, root: Path) -> None:
    server.queue(
        anthropic_reply('{"thought": "list", "tool": "list_dir", "args": {}}'),
        anthropic_reply('Done. {"thought": "empty root", "done": true, "answer": "nothing here"}'),
    )
    result = loki_at(server, protocol="text").act("what is here?", root=root)
    assert result.answer == "nothing here" and result.steps[0].tool == "list_dir"
    second = server.posts()[1]
    assert "tools" not in second
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]


def test_malformed_reply_and_error_results(server: FakeModelServer, root: Path) -> None:
    server.queue(
        anthropic_reply("I'll get right on it."),
        anthropic_reply('{"thought": "t", "tool": "read_file", "args": {"path": "nope.txt"}}'),
        anthropic_reply('{"done": true, "answer": "no such file"}'),
    )
    result = loki_at(server, protocol="text").act("x", root=root)
    assert result.steps[0].observation.startswith("ERROR: your reply was not a decision")
    assert result.steps[1].observation.startswith("ERROR:")
    assert result.completed


def test_a_native_error_result_is_flagged(server: FakeModelServer, root: Path) -> None:
    server.queue(anthropic_reply(None, [("read_file", {"path": "../outside/secret.txt"})]),
                 anthropic_reply("Cannot read outside the root."))
    loki_at(server).act("x", root=root)
    block = server.posts()[1]["messages"][-1]["content"][0]
    assert block["is_error"] is True and "escapes the agent root" in block["content"]


def test_429_overload_and_dropped_connections_are_retried(server: FakeModelServer,
                                                          root: Path) -> None:
    waits: list[float] = []
    server.queue(anthropic_error(429, "rate_limit_error", "slow down", {"retry-after": "0"}),
                 anthropic_error(529, "overloaded_error", "Overloaded"),
                 DROP, anthropic_reply("made it"))
    result = loki_at(server, waits, attempts=4).act("x", root=root)
    assert result.answer == "made it" and waits[0] == 0.0 and len(waits) == 3


def test_401_stops_at_once(server: FakeModelServer, root: Path) -> None:
    server.queue(anthropic_error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(EngineAuthError, match=r"401: invalid x-api-key.*ANTHROPIC_API_KEY"):
        loki_at(server).act("x", root=root)
    assert len(server.posts()) == 1


def test_bad_request_and_prompt_too_long_stop(server: FakeModelServer, root: Path) -> None:
    server.queue(anthropic_error(400, "invalid_request_error", "max_tokens: too large"))
    with pytest.raises(EngineRequestError, match="max_tokens: too large"):
        loki_at(server).act("x", root=root)
    server.queue(anthropic_error(400, "invalid_request_error",
                                 "prompt is too long: 210000 tokens > 200000 maximum"))
    with pytest.raises(ContextLengthError):
        loki_at(server).act("x", root=root)
    assert len(server.posts()) == 2


def test_a_hang_is_cut_by_the_timeout(server: FakeModelServer, root: Path) -> None:
    server.queue(HANG)
    with pytest.raises(EngineTimeout, match=r"did not answer within 1\.0s"):
        loki_at(server, timeout=1.0, attempts=1).act("x", root=root)


def test_a_garbled_body_is_corrected(server: FakeModelServer, root: Path) -> None:
    server.queue(Reply(200, {"unexpected": "shape"}), anthropic_reply("fine"))
    result = loki_at(server).act("x", root=root)
    assert result.steps[0].observation.startswith("ERROR: your reply could not be used")
    assert result.answer == "fine"


def test_a_missing_key_is_a_config_error() -> None:
    with pytest.raises(EngineConfigError, match="ANTHROPIC_API_KEY"):
        Loki("anthropic")
