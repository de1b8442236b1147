"""yggdrasil.loki.adapters through each framework's own invocation path and agent runner.

The model side is the fake OpenAI / Gemini server on 127.0.0.1 (tests/fake_servers.py)
or, for pydantic-ai, its own FunctionModel; everything else is the real framework
running real loki tools on a real folder.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from fake_servers import FakeModelServer, gemini_reply, openai_reply
from yggdrasil.loki import adapters
from yggdrasil.loki.tools import filesystem_toolbox

ESCAPE = "ERROR: path '../outside/secret.txt' escapes the agent root"


def tool_named(tools: list[Any], name: str) -> Any:
    return next(t for t in tools if t.name == name)


def test_importing_the_adapters_imports_no_framework() -> None:
    import subprocess
    import sys

    probe = ("import sys, yggdrasil.loki.adapters; "
             "print([m for m in ('agents', 'langchain_core', 'smolagents', 'pydantic_ai', "
             "'google.adk') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={"PYTHONPATH": str(Path(__file__).parents[1] / "src")}, check=True)
    assert out.stdout.strip() == "[]"


# -- OpenAI Agents SDK --------------------------------------------------------------------


def test_openai_agents_runner_calls_loki_tools(server: FakeModelServer, root: Path) -> None:
    pytest.importorskip("agents")
    from agents import Agent, FunctionTool, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no trace upload: the only network is the fake server
    tools = adapters.openai_agents(filesystem_toolbox(root))
    assert all(isinstance(t, FunctionTool) for t in tools)
    read_file = tool_named(tools, "read_file")
    assert read_file.strict_json_schema is True
    assert read_file.params_json_schema["required"] == ["path", "start", "end", "symbol", "pages",
                                                        "as_images", "rendered"]
    server.queue(
        openai_reply(calls=[("write_file", {"path": "hello.txt", "content": "hi\n"})],
                     id_prefix="a"),
        openai_reply(calls=[("read_file", {"path": "../outside/secret.txt", "start": None,
                                           "end": None})], id_prefix="b"),
        openai_reply("done"))
    model = OpenAIChatCompletionsModel(
        model="gpt-fake", openai_client=AsyncOpenAI(base_url=f"{server.url}/v1", api_key="k"))
    result = Runner.run_sync(Agent(name="loki", instructions="work", tools=tools, model=model),
                             "write hello.txt")
    assert result.final_output == "done"
    assert (root / "hello.txt").read_text() == "hi\n"
    sent = server.posts()
    assert sent[0]["tools"][1]["function"]["strict"] is True
    outputs = [m["content"] for m in sent[2]["messages"] if m["role"] == "tool"]
    assert outputs[0] == "created hello.txt (3 bytes)"
    assert outputs[1].startswith(ESCAPE)  # the model reads what is allowed, not a generic error
    assert "TOP SECRET" not in json.dumps(sent)


# -- LangChain ------------------------------------------------------------------------------


def test_langchain_tools_report_errors_as_error_tool_messages(root: Path) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.tools import StructuredTool

    (root / "a.txt").write_text("one\ntwo\n")
    tools = adapters.langchain(filesystem_toolbox(root))
    read_file = tool_named(tools, "read_file")
    assert isinstance(read_file, StructuredTool)
    assert read_file.args == filesystem_toolbox(root).tools["read_file"].input_schema["properties"]
    good = read_file.invoke({"type": "tool_call", "id": "c1", "name": "read_file",
                             "args": {"path": "a.txt", "end": 1}})
    assert (good.status, good.content) == ("success", "1\tone\n[showing lines 1-1 of 2; "
                                           "read_file(path='a.txt', start=2) for more, or "
                                           "grep to find a line]")
    bad = read_file.invoke({"type": "tool_call", "id": "c2", "name": "read_file",
                            "args": {"path": "../outside/secret.txt"}})
    assert bad.status == "error" and bad.content.startswith(ESCAPE)
    assert read_file.invoke({"path": "a.txt", "start": 2}) == "2\ttwo\n[lines 2-2; end of file]"


def test_langchain_parallel_calls_get_exact_change_reports(root: Path) -> None:
    """LangGraph runs a turn's tool calls at once; each report names only its own file."""
    pytest.importorskip("langchain_core")
    run = tool_named(adapters.langchain(filesystem_toolbox(root)), "run")

    async def both() -> list[Any]:
        calls = [run.ainvoke({"type": "tool_call", "id": f"c{i}", "name": "run",
                              "args": {"command": f"echo {i} > f{i}.txt"}}) for i in range(6)]
        return list(await asyncio.gather(*calls))

    for i, message in enumerate(asyncio.run(both())):
        assert message.status == "success"
        assert message.content.endswith(f"changed:\ncreated f{i}.txt\n")


# -- smolagents -------------------------------------------------------------------------------


def test_smolagents_tools_pass_its_own_validation(root: Path) -> None:
    pytest.importorskip("smolagents")
    import inspect

    (root / "a.txt").write_text("one\ntwo\n")
    tools = adapters.smolagents(filesystem_toolbox(root))
    read_file = tool_named(tools, "read_file")
    assert read_file.inputs["start"] == {"type": "integer", "nullable": True,
                                         "description": "first line to show, 1-based (default 1)"}
    assert "nullable" not in read_file.inputs["path"]
    params = inspect.signature(read_file.forward).parameters
    assert list(params) == ["path", "start", "end", "symbol", "pages", "as_images", "rendered"]
    assert all(p.kind is not p.VAR_KEYWORD for p in params.values())
    assert read_file(path="a.txt", start=2) == "2\ttwo\n[lines 2-2; end of file]"
    with pytest.raises(adapters.ToolFailedError, match="escapes the agent root"):
        read_file(path="../outside/secret.txt")


def test_smolagents_agent_runs_loki_tools(server: FakeModelServer, root: Path) -> None:
    pytest.importorskip("smolagents")
    from smolagents import OpenAIServerModel, ToolCallingAgent

    tools = adapters.smolagents(filesystem_toolbox(root))
    server.queue(
        openai_reply(calls=[("write_file", {"path": "hello.txt", "content": "hi\n"})],
                     id_prefix="a"),
        openai_reply(calls=[("read_file", {"path": "../outside/secret.txt"})], id_prefix="b"),
        openai_reply(calls=[("final_answer", {"answer": "wrote it"})], id_prefix="c"))
    model = OpenAIServerModel(model_id="gpt-fake", api_base=f"{server.url}/v1", api_key="k")
    agent = ToolCallingAgent(tools=tools, model=model, max_steps=4, verbosity_level=0)
    assert agent.run("write hello.txt") == "wrote it"
    assert (root / "hello.txt").read_text() == "hi\n"
    third = json.dumps(server.posts()[2]["messages"])
    assert "created hello.txt (3 bytes)" in third
    assert "escapes the agent root" in third and "TOP SECRET" not in third


# -- pydantic-ai ---------------------------------------------------------------------------------


def test_pydantic_ai_agent_retries_on_error_and_runs_parallel_calls(root: Path) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, RetryPromptPart, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    seen: dict[str, Any] = {}

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn == 0:
            seen["tools"] = {t.name: t for t in info.function_tools}
            return ModelResponse(parts=[  # one turn, three calls: pydantic-ai runs them at once
                ToolCallPart("run", {"command": "echo a > a.txt"}, tool_call_id="1"),
                ToolCallPart("run", {"command": "echo b > b.txt"}, tool_call_id="2"),
                ToolCallPart("read_file", {"path": "../outside/secret.txt"}, tool_call_id="3")])
        seen["answers"] = [p for m in messages for p in getattr(m, "parts", [])]
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(model), tools=adapters.pydantic_ai(filesystem_toolbox(root)))
    assert agent.run_sync("make two files").output == "done"
    assert (root / "a.txt").read_text() == "a\n" and (root / "b.txt").read_text() == "b\n"
    read_file = seen["tools"]["read_file"]
    assert read_file.parameters_json_schema["properties"]["start"]["minimum"] == 1
    assert seen["tools"]["run"].sequential is True and read_file.sequential is False
    returns = {p.tool_call_id: p for p in seen["answers"] if hasattr(p, "tool_call_id")
               and p.part_kind in ("tool-return", "retry-prompt")}
    assert returns["1"].content.endswith("changed:\ncreated a.txt\n")
    assert returns["2"].content.endswith("changed:\ncreated b.txt\n")
    # ModelRetry: a retry prompt (older pydantic-ai) or a return marked "retried" (newer)
    assert (isinstance(returns["3"], RetryPromptPart)
            or getattr(returns["3"], "outcome", None) == "retried")
    assert ESCAPE in str(returns["3"].content)


# -- Google ADK -----------------------------------------------------------------------------------


def test_google_adk_runner_calls_loki_tools(server: FakeModelServer, root: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("google.adk")
    from google.adk.agents import LlmAgent
    from google.adk.models import Gemini
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "false")
    server.queue(
        gemini_reply(calls=[("write_file", {"path": "hello.txt", "content": "hi\n"})]),
        gemini_reply(calls=[("read_file", {"path": "../outside/secret.txt"})]),
        gemini_reply("done"))
    agent = LlmAgent(name="loki", model=Gemini(model="gemini-fake", base_url=server.url),
                     instruction="work", tools=adapters.google_adk(filesystem_toolbox(root)))
    runner = InMemoryRunner(agent=agent, app_name="loki-test")

    async def run() -> list[Any]:
        session = await runner.session_service.create_session(app_name="loki-test", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="write hello.txt")])
        return [event async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=message)]

    events = asyncio.run(run())
    assert (root / "hello.txt").read_text() == "hi\n"
    responses = [part.function_response.response for e in events for part in e.content.parts
                 if part.function_response]
    assert responses[0] == {"result": "created hello.txt (3 bytes)"}
    assert responses[1]["error"].startswith(ESCAPE)
    assert events[-1].content.parts[0].text == "done"
    first = server.posts()[0]
    declared = {d["name"]: d for d in first["tools"][0]["functionDeclarations"]}
    run = declared["run"]  # the field's wire name depends on the google-genai version
    schema = run.get("parametersJsonSchema") or run["parameters_json_schema"]
    assert "additionalProperties" not in schema
    assert schema["properties"]["timeout"]["maximum"] == 3600
