"""``REFUSED:`` observations through each adapter's framework, the way ``ERROR:`` ones are
tested in test_adapters.py: a declined overwrite and a command an ``ask`` rule stops
reach the framework's error channel, with the observation as the message, and the
user's file stays byte-for-byte as it was.

The model side is the fake OpenAI / Gemini server on 127.0.0.1 (tests/fake_servers.py)
or pydantic-ai's own FunctionModel; the rest is the real framework and real loki tools.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from fake_servers import FakeModelServer, gemini_reply, openai_reply
from yggdrasil.loki import adapters
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

MINE = b"mine\r\n"  # CRLF: a rewrite that "changed nothing" would still show
DECLINED_WRITE = "REFUSED: user declined to overwrite keep.txt"
DECLINED_RUN = "REFUSED: user declined to run touch made.txt"
WRITE = ("write_file", {"path": "keep.txt", "content": "theirs\n"})
TOUCH = ("run", {"command": "touch made.txt"})


@pytest.fixture
def not_temp(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Make the system temp dir somewhere else, so the test root counts as a real project
    (files under the temp dir are changed without asking)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("systemtmp")))


@pytest.fixture
def asked() -> list[str]:
    return []


@pytest.fixture
def declining(root: Path, not_temp: None, asked: list[str]) -> Toolbox:
    """A toolbox whose user says no to everything asked: an overwrite, a ``touch``."""
    (root / "keep.txt").write_bytes(MINE)
    return filesystem_toolbox(root, rules=[("ask", "touch")],
                              confirm=lambda action: asked.append(str(action)) is not None)


def untouched(root: Path, asked: list[str]) -> None:
    assert (root / "keep.txt").read_bytes() == MINE
    assert not (root / "made.txt").exists()
    assert sorted(asked) == ["overwrite keep.txt", "run touch made.txt"]


def tool_named(tools: list[Any], name: str) -> Any:
    return next(t for t in tools if t.name == name)


# -- LangChain ------------------------------------------------------------------------------


def test_langchain_refusals_are_error_tool_messages(root: Path, declining: Toolbox,
                                                    asked: list[str]) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.tools import ToolException

    tools = adapters.langchain(declining)
    write = tool_named(tools, "write_file").invoke(
        {"type": "tool_call", "id": "c1", "name": WRITE[0], "args": WRITE[1]})
    assert (write.status, write.content) == ("error", DECLINED_WRITE)
    run = asyncio.run(tool_named(tools, "run").ainvoke(  # the async path LangGraph takes
        {"type": "tool_call", "id": "c2", "name": TOUCH[0], "args": TOUCH[1]}))
    assert (run.status, run.content) == ("error", DECLINED_RUN)
    untouched(root, asked)
    with pytest.raises(ToolException, match=f"^{DECLINED_WRITE}$"):  # what the tool raises
        tool_named(tools, "write_file").func(**WRITE[1])
    assert (root / "keep.txt").read_bytes() == MINE


def test_langchain_refusal_without_a_confirm(root: Path) -> None:
    """An ``ask`` rule and nobody to ask: refused, status="error", the command not run."""
    pytest.importorskip("langchain_core")
    run = tool_named(adapters.langchain(filesystem_toolbox(root, rules=[("ask", "touch")])),
                     "run")
    message = run.invoke({"type": "tool_call", "id": "c1", "name": TOUCH[0], "args": TOUCH[1]})
    assert message.status == "error"
    assert message.content.startswith("REFUSED: run touch made.txt needs the user's confirmation")
    assert not (root / "made.txt").exists()


# -- smolagents -------------------------------------------------------------------------------


def test_smolagents_refusal_raises_and_the_agent_reports_it(
        server: FakeModelServer, root: Path, declining: Toolbox, asked: list[str]) -> None:
    pytest.importorskip("smolagents")
    from smolagents import OpenAIServerModel, ToolCallingAgent

    tools = adapters.smolagents(declining)
    with pytest.raises(adapters.ToolFailedError) as failed:
        tool_named(tools, "write_file")(**WRITE[1])
    assert failed.value.observation.refused and str(failed.value) == DECLINED_WRITE
    asked.clear()
    server.queue(openai_reply(calls=[WRITE], id_prefix="a"),
                 openai_reply(calls=[TOUCH], id_prefix="b"),
                 openai_reply(calls=[("final_answer", {"answer": "gave up"})], id_prefix="c"))
    model = OpenAIServerModel(model_id="gpt-fake", api_base=f"{server.url}/v1", api_key="k")
    agent = ToolCallingAgent(tools=tools, model=model, max_steps=4, verbosity_level=0)
    assert agent.run("overwrite keep.txt") == "gave up"
    third = json.dumps(server.posts()[2]["messages"])
    # smolagents feeds a failed call back as an error, the observation in its message
    assert "Error executing tool 'write_file'" in third and DECLINED_WRITE in third
    assert "Error executing tool 'run'" in third and DECLINED_RUN in third
    untouched(root, asked)


# -- pydantic-ai ---------------------------------------------------------------------------------


def test_pydantic_ai_refusal_fails_the_call_without_a_retry(root: Path, declining: Toolbox,
                                                            asked: list[str]) -> None:
    """REFUSED is a failed call the model must not retry (``ToolFailed``); ERROR asks the
    model to correct it (``ModelRetry``)."""
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent, exceptions
    from pydantic_ai.messages import ModelResponse, RetryPromptPart, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    answers: list[Any] = []

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[ToolCallPart(*WRITE, tool_call_id="w"),
                                        ToolCallPart(*TOUCH, tool_call_id="r")])
        answers.extend(p for p in messages[-1].parts if hasattr(p, "tool_call_id"))
        return ModelResponse(parts=[TextPart("done")])

    failed = hasattr(exceptions, "ToolFailed")  # newer pydantic-ai (its PR #5585)
    tools = adapters.pydantic_ai(declining, retries=0 if failed else 1)  # 0: a retry ends it
    assert Agent(FunctionModel(model), tools=tools).run_sync("overwrite it").output == "done"
    by_id = {p.tool_call_id: p for p in answers}
    for call_id, text in (("w", DECLINED_WRITE), ("r", DECLINED_RUN)):
        if failed:
            assert (by_id[call_id].part_kind, by_id[call_id].outcome) == ("tool-return", "failed")
            assert by_id[call_id].content == text
        else:  # an older pydantic-ai: the refusal comes back as a retry prompt
            assert isinstance(by_id[call_id], RetryPromptPart) and text in str(by_id[call_id])
    untouched(root, asked)

    def slip(messages: list[Any], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "../x"})])

    with pytest.raises(exceptions.UnexpectedModelBehavior, match="'read_file' exceeded max retries"):
        Agent(FunctionModel(slip), tools=tools).run_sync("read ../x")  # ERROR: ModelRetry


# -- OpenAI Agents SDK --------------------------------------------------------------------


def test_openai_agents_refusals_reach_the_model_as_the_observation(
        server: FakeModelServer, root: Path, declining: Toolbox, asked: list[str]) -> None:
    """The SDK's own error path answers a raised exception with a fixed "An error occurred"
    text; the adapter answers the observation instead, so the model reads ``REFUSED:``."""
    pytest.importorskip("agents")
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    server.queue(openai_reply(calls=[WRITE, ("run", {**TOUCH[1], "timeout": None,
                                                     "background": None})], id_prefix="a"),
                 openai_reply("gave up"))
    model = OpenAIChatCompletionsModel(
        model="gpt-fake", openai_client=AsyncOpenAI(base_url=f"{server.url}/v1", api_key="k"))
    agent = Agent(name="loki", instructions="work", tools=adapters.openai_agents(declining),
                  model=model)
    assert Runner.run_sync(agent, "overwrite keep.txt").final_output == "gave up"
    outputs = {m["tool_call_id"]: m["content"] for m in server.posts()[1]["messages"]
               if m["role"] == "tool"}
    assert outputs == {"a0": DECLINED_WRITE, "a1": DECLINED_RUN}
    untouched(root, asked)


# -- Google ADK -----------------------------------------------------------------------------------


def test_google_adk_refusals_are_error_responses(
        server: FakeModelServer, root: Path, declining: Toolbox, asked: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("google.adk")
    from google.adk.agents import LlmAgent
    from google.adk.models import Gemini
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "false")
    server.queue(gemini_reply(calls=[WRITE, TOUCH]), gemini_reply("gave up"))
    agent = LlmAgent(name="loki", model=Gemini(model="gemini-fake", base_url=server.url),
                     instruction="work", tools=adapters.google_adk(declining))
    runner = InMemoryRunner(agent=agent, app_name="loki-test")

    async def run() -> list[Any]:
        session = await runner.session_service.create_session(app_name="loki-test", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="overwrite keep.txt")])
        return [event async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=message)]

    events = asyncio.run(run())
    responses = {part.function_response.name: part.function_response.response
                 for e in events for part in e.content.parts if part.function_response}
    assert responses == {"write_file": {"error": DECLINED_WRITE},
                         "run": {"error": DECLINED_RUN}}
    sent = json.dumps(server.posts()[1]["contents"])  # what the model reads next
    assert DECLINED_WRITE in sent and DECLINED_RUN in sent
    untouched(root, asked)
