"""A LangChain agent (``create_agent``, a LangGraph graph) running loki tools through the
LangChain adapter.

The model is LangChain's own ChatOpenAI talking to the fake OpenAI server on 127.0.0.1
(tests/fake_servers.py), so the tool messages are what LangGraph really sends back; the
tools are real loki tools on a real folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fake_servers import FakeModelServer, openai_reply
from yggdrasil.loki import adapters
from yggdrasil.loki.tools import filesystem_toolbox

ESCAPE = "ERROR: path '../outside/secret.txt' escapes the agent root"


def react_agent(server: FakeModelServer, root: Path, **box_options: Any) -> Any:
    pytest.importorskip("langchain.agents")  # langchain 1.x: runs on langgraph
    pytest.importorskip("langchain_openai")
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-fake", base_url=f"{server.url}/v1", api_key="k",
                       max_retries=0)
    return create_agent(model, adapters.langchain(filesystem_toolbox(root, **box_options)))


def tool_messages(result: dict[str, Any]) -> dict[str, Any]:
    return {m.tool_call_id: m for m in result["messages"] if m.type == "tool"}


def test_langgraph_agent_reads_writes_and_sees_errors(server: FakeModelServer,
                                                      root: Path) -> None:
    (root / "notes.txt").write_text("one\ntwo\n")
    agent = react_agent(server, root)
    server.queue(
        openai_reply(calls=[("read_file", {"path": "notes.txt"})], id_prefix="a"),
        openai_reply(calls=[("write_file", {"path": "notes.txt", "content": "three\n"})],
                     id_prefix="b"),
        openai_reply(calls=[("read_file", {"path": "../outside/secret.txt"})], id_prefix="c"),
        openai_reply("done"))
    result = agent.invoke({"messages": [("user", "rewrite notes.txt")]})
    assert result["messages"][-1].content == "done"
    assert (root / "notes.txt").read_text() == "three\n"
    by_id = tool_messages(result)
    assert (by_id["a0"].status, by_id["a0"].content) == (
        "success", "1\tone\n2\ttwo")
    assert (by_id["b0"].status, by_id["b0"].content) == ("success", "overwrote notes.txt (6 bytes)")
    assert by_id["c0"].status == "error" and by_id["c0"].content.startswith(ESCAPE)
    # and what the model read back, on the wire, turn by turn
    sent = [[m["content"] for m in post["messages"] if m["role"] == "tool"]
            for post in server.posts()]
    assert sent[1] == [by_id["a0"].content]
    assert sent[3][-1].startswith(ESCAPE)
    assert "TOP SECRET" not in json.dumps(server.posts())


def test_langgraph_agent_runs_one_turns_calls_together(server: FakeModelServer,
                                                       root: Path) -> None:
    """Several tool calls in one model turn: LangGraph starts them all at once. The two
    reads meet at a barrier (a sequential runner would break it: an ERROR), and the
    commands, serialised by the toolbox, each report only their own file."""
    import asyncio
    import threading

    (root / "notes.txt").write_text("one\n")
    meet = threading.Barrier(2, timeout=30)

    def both_reads_in_flight(tool: str, args: dict[str, Any]) -> None:
        if tool == "read_file":
            meet.wait()

    agent = react_agent(server, root, before_call=both_reads_in_flight)
    runs = [("run", {"command": f"echo {i} > f{i}.txt"}) for i in range(3)]
    reads = [("read_file", {"path": "notes.txt"})] * 2
    server.queue(openai_reply(calls=runs + reads, id_prefix="a"), openai_reply("done"))
    result = asyncio.run(agent.ainvoke({"messages": [("user", "make three files")]}))
    by_id = tool_messages(result)
    assert sorted(by_id) == [f"a{i}" for i in range(5)]
    for i in range(3):
        assert by_id[f"a{i}"].status == "success"
        assert by_id[f"a{i}"].content.endswith(f"changed:\ncreated f{i}.txt\n")
        assert (root / f"f{i}.txt").read_text() == f"{i}\n"
    assert [by_id[k].content for k in ("a3", "a4")] == ["1\tone"] * 2
    assert len(server.posts()) == 2  # one turn of five calls, then the answer
