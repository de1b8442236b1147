"""The openai engine through the official SDK, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_servers import (
    DROP,
    HANG,
    FakeModelServer,
    Reply,
    openai_error,
    openai_reply,
)
from yggdrasil.loki import Loki
from yggdrasil.loki.engine import RetryPolicy
from yggdrasil.loki.errors import (
    ContextLengthError,
    EngineAuthError,
    EngineRequestError,
    EngineTimeout,
    EngineUnavailable,
)


def loki_at(server: FakeModelServer, waits: list[float] | None = None, attempts: int = 3,
            **kwargs: object) -> Loki:
    """An openai Loki on the fake server; retries sleep into ``waits`` instead of the clock."""
    sleeps = waits if waits is not None else []
    retry = RetryPolicy(attempts=attempts, base_delay=0.25, sleep=sleeps.append)
    return Loki("openai", model="gpt-fake", base_url=f"{server.url}/v1", api_key="sk-test",
                retry=retry, **kwargs)  # type: ignore[arg-type]


def test_native_tool_calls_edit_real_files(server: FakeModelServer, root: Path) -> None:
    (root / "cli.py").write_text("import argparse\nparser = argparse.ArgumentParser()\n")
    server.queue(
        openai_reply("Reading cli.py first.", [("read_file", {"path": "cli.py"})]),
        openai_reply(None, [("edit_file", {
            "path": "cli.py", "old": "parser = argparse.ArgumentParser()\n",
            "new": "parser = argparse.ArgumentParser()\nparser.add_argument('--verbose')\n"})]),
        openai_reply("Added a --verbose flag to cli.py."),
    )
    # strict, as OpenAI's own endpoint gets it (a local server gets the plain schema)
    result = loki_at(server, schema_flavor="openai-strict").act("add a --verbose flag to cli.py",
                                                                 root=root)
    assert "parser.add_argument('--verbose')" in (root / "cli.py").read_text()
    assert result.completed and result.answer == "Added a --verbose flag to cli.py."
    assert result.files_changed == ["cli.py"]
    assert result.usage == {"input_tokens": 30, "output_tokens": 15, "requests": 3}
    first, _, last = server.posts()
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert first["model"] == "gpt-fake"
    assert first["messages"][0]["role"] == "system"
    # the catalog goes once, as the tools' schemas: the system prompt does not repeat it
    system = first["messages"][0]["content"]
    assert "read_file(path" not in system and "Protected files" in system  # the status stays
    assert all(t["function"]["description"] not in system for t in first["tools"])
    names = [t["function"]["name"] for t in first["tools"]]
    assert names[:2] == ["list_dir", "read_file"] and "edit_file" in names
    read_file = first["tools"][1]["function"]  # strict form: all required, optional nullable
    assert read_file["strict"] is True
    assert read_file["parameters"]["required"] == ["path", "start", "end", "symbol", "pages", "as_images", "rendered"]
    assert read_file["parameters"]["properties"]["start"]["type"] == ["integer", "null"]
    assert read_file["parameters"]["properties"]["start"]["minimum"] == 1
    assert not any("default" in prop for tool in first["tools"]
                   for prop in tool["function"]["parameters"]["properties"].values())
    assistant, tool = last["messages"][-2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "edit_file"
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_0"
    assert tool["content"].startswith("edited cli.py (1 replacement)\n--- cli.py\n")


def test_text_decisions_for_a_model_without_tools(server: FakeModelServer, root: Path) -> None:
    server.queue(
        openai_reply('I will write it.\n```json\n{"thought": "create", "tool": "write_file", '
                     '"args": {"path": "hello.py", "content": "print(1)\\n"}}\n```'),
        openai_reply('{"thought": "done", "done": true, "answer": "wrote hello.py"}'),
    )
    result = loki_at(server, protocol="text").act("write hello.py", root=root)
    assert (root / "hello.py").read_text() == "print(1)\n"
    assert result.answer == "wrote hello.py"
    first, second = server.posts()
    assert "tools" not in first
    assert '"done": true' in first["messages"][0]["content"]  # the protocol is in the prompt
    assert 'read_file(path, start=1, end=0, symbol="", pages="", as_images=false, rendered=false)' in first["messages"][0]["content"]  # spec()
    assert second["messages"][-1]["content"] == "Output of step 1 (write_file):\ncreated hello.py (9 bytes)"


def test_malformed_replies_get_a_correction(server: FakeModelServer, root: Path) -> None:
    server.queue(
        openai_reply("Sure, I can help with that!"),
        Reply(200, "<html>proxy error</html>"),
        openai_reply(None, [("read_file", "{'path': oops")]),
        openai_reply('{"done": true, "answer": "ok"}'),
    )
    result = loki_at(server, protocol="text").act("x", root=root)
    corrected, garbled, bad_args = result.steps
    assert corrected.observation.startswith("ERROR: your reply was not a decision (no JSON")
    assert garbled.observation.startswith("ERROR: your reply was not a decision (the reply was empty")
    assert bad_args.observation == "ERROR: the args for read_file are not valid JSON; send a JSON object"
    assert server.posts()[1]["messages"][-1]["content"] == corrected.observation
    assert result.completed


def test_native_text_reply_is_the_answer_and_an_empty_one_is_corrected(
    server: FakeModelServer, root: Path,
) -> None:
    server.queue(openai_reply(""), openai_reply('{"tool": "read_file", "args": {"path": '),
                 openai_reply("Nothing to change."))
    result = loki_at(server).act("x", root=root)
    empty, broken_json = result.steps
    assert empty.observation.startswith("ERROR: your reply could not be used (the reply was empty")
    assert broken_json.observation.startswith("ERROR: your reply could not be used (no JSON")
    assert result.answer == "Nothing to change." and result.completed


def test_429_waits_as_told_then_succeeds(server: FakeModelServer, root: Path) -> None:
    waits: list[float] = []
    server.queue(openai_error(429, "Rate limit reached", code="rate_limit_exceeded",
                              headers={"retry-after": "1"}),
                 openai_reply("done"))
    result = loki_at(server, waits).act("x", root=root)
    assert result.answer == "done" and waits == [1.0] and len(server.posts()) == 2


def test_500_and_a_dropped_connection_are_retried(server: FakeModelServer, root: Path) -> None:
    waits: list[float] = []
    server.queue(openai_error(500, "boom"), DROP, openai_reply("fine"))
    result = loki_at(server, waits).act("x", root=root)
    assert result.answer == "fine" and len(waits) == 2 and len(server.posts()) == 3
    assert waits[1] > waits[0] * 0.9 >= 0  # backoff grows (with jitter)


def test_retries_are_bounded(server: FakeModelServer, root: Path) -> None:
    server.queue(*[openai_error(503, "overloaded")] * 5)
    with pytest.raises(EngineUnavailable, match="gave up after 3 attempts") as info:
        loki_at(server).act("x", root=root)
    assert len(server.posts()) == 3 and info.value.result.stop_reason == "error"


def test_401_stops_at_once_with_a_clear_message(server: FakeModelServer, root: Path) -> None:
    server.queue(openai_error(401, "Incorrect API key provided", code="invalid_api_key"))
    with pytest.raises(EngineAuthError) as info:
        loki_at(server).act("x", root=root)
    message = str(info.value)
    assert "answered 401: Incorrect API key provided" in message and "OPENAI_API_KEY" in message
    assert len(server.posts()) == 1


def test_bad_request_and_spent_quota_stop_at_once(server: FakeModelServer, root: Path) -> None:
    server.queue(openai_error(404, "The model `gpt-nope` does not exist"))
    with pytest.raises(EngineRequestError, match="Check the model name"):
        loki_at(server).act("x", root=root)
    server.queue(openai_error(429, "You exceeded your current quota", code="insufficient_quota"))
    with pytest.raises(EngineRequestError, match="quota is spent"):
        loki_at(server).act("x", root=root)
    assert len(server.posts()) == 2


def test_a_hang_is_cut_by_the_timeout(server: FakeModelServer, root: Path) -> None:
    server.queue(HANG, openai_reply("after the hang"))
    assert loki_at(server, timeout=1.0).act("x", root=root).answer == "after the hang"
    server.queue(HANG, HANG)
    with pytest.raises(EngineTimeout, match=r"did not answer within 1.0s \(gave up after 2"):
        loki_at(server, timeout=1.0, attempts=2).act("x", root=root)


def test_context_length_elides_and_retries_then_gives_up(server: FakeModelServer, root: Path) -> None:
    (root / "big.txt").write_text("y" * 5000 + "\n")
    too_long = openai_error(400, "This model's maximum context length is 8192 tokens",
                            code="context_length_exceeded")
    server.queue(*[openai_reply(None, [("read_file", {"path": "big.txt"})])] * 3,
                 too_long, openai_reply("summarised"))
    result = loki_at(server).act("x", root=root)
    assert result.answer == "summarised"
    retried = server.posts()[-1]["messages"]
    assert retried[3]["content"].startswith("[elided to save context")
    server.queue(too_long)
    with pytest.raises(ContextLengthError, match="maximum context length"):
        loki_at(server).act("x", root=root)  # nothing left to elide: a clear stop


def test_an_endpoint_without_tools_falls_back_to_text(server: FakeModelServer, root: Path) -> None:
    server.queue(openai_error(400, "registry.ollama.ai/library/gemma:2b does not support tools"),
                 openai_reply('{"thought": "t", "tool": "list_dir", "args": {}}'),
                 openai_reply('{"done": true, "answer": "empty"}'))
    result = loki_at(server).act("x", root=root)
    assert result.answer == "empty" and result.steps[0].tool == "list_dir"
    first, second, _ = server.posts()
    assert "tools" in first and "tools" not in second
    assert '"done": true' in second["messages"][0]["content"]


def test_parallel_tool_calls_are_one_step_each(server: FakeModelServer, root: Path) -> None:
    (root / "a.txt").write_text("A\n")
    (root / "b.txt").write_text("B\n")
    server.queue(openai_reply("both", [("read_file", {"path": "a.txt"}),
                                       ("read_file", {"path": "b.txt"})]),
                 openai_reply("read both"))
    result = loki_at(server).act("x", root=root)
    assert [s.observation for s in result.steps] == ["1\tA", "1\tB"]
    results = [m for m in server.posts()[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["call_0", "call_1"]


def test_a_run_through_the_sdk_is_replayed_by_the_scripted_engine(
    server: FakeModelServer, root: Path, tmp_path: Path,
) -> None:
    (root / "v.txt").write_text("1\n")
    replay_root = tmp_path / "replay"
    replay_root.mkdir()
    (replay_root / "v.txt").write_text("1\n")
    server.queue(openai_reply(""), openai_reply(None, [("edit_file", {
        "path": "v.txt", "old": "1", "new": "2"})]), openai_reply("bumped"))
    log = tmp_path / "run.jsonl"
    recorded = loki_at(server).act("bump", root=root, transcript=log)
    assert [json.loads(x)["type"] for x in log.read_text().splitlines()][-1] == "end"
    replayed = Loki("scripted", model=str(log)).act("bump", root=replay_root)
    assert len(recorded.steps) == 2 and recorded.steps[0].tool == ""  # a corrected reply
    assert replayed.steps == recorded.steps and replayed.answer == "bumped"
    assert (replay_root / "v.txt").read_text() == "2\n"
    assert replayed.usage == recorded.usage


def test_the_system_prompt_names_a_job_started_during_the_run(
        server: FakeModelServer, root: Path) -> None:
    """The status at the end of the system prompt is rebuilt each turn: a background job
    the model started is named in the next request, so it is not forgotten."""
    server.queue(
        openai_reply(None, [("run", {"command": "sleep 30", "background": True})]),
        openai_reply("Started it."),
    )
    result = loki_at(server).act("start a sleeper", root=root)
    assert result.completed and result.steps[0].observation.startswith("started job 1: sleep 30")
    first, second = server.posts()
    assert "Background jobs running" not in first["messages"][0]["content"]
    assert "Background jobs running: job 1 `sleep 30`" in second["messages"][0]["content"]


def test_a_local_server_gets_plain_schemas_and_openai_strict_ones(
        server: FakeModelServer, root: Path) -> None:
    """Ollama and other local servers may reject type lists such as ["integer", "null"]
    and small models fill in every 'required' argument: only OpenAI and Azure get strict."""
    from yggdrasil.loki.engines.openai import OpenAIEngine

    server.queue(openai_reply("Nothing to do."))
    loki_at(server).act("say hi", root=root)
    read_file = server.posts()[0]["tools"][1]["function"]
    assert "strict" not in read_file
    assert read_file["parameters"]["properties"]["start"]["type"] == "integer"
    assert read_file["parameters"]["properties"]["start"]["default"] == 1
    assert OpenAIEngine("m", base_url=f"{server.url}/v1").schema_flavor == "neutral"
    assert OpenAIEngine("m", api_key="k").schema_flavor == "openai-strict"  # api.openai.com
    assert OpenAIEngine("m", base_url="https://x.openai.azure.com/openai/v1",
                        api_key="k").schema_flavor == "openai-strict"
