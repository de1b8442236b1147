"""What a daily run carries beyond its task: AGENTS.md and the user's instructions, sessions,
events and records, one root. Against the fake OpenAI server speaking the real wire format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from fake_servers import FakeModelServer, openai_reply
from yggdrasil.loki import Loki
from yggdrasil.loki.engine import RetryPolicy
from yggdrasil.loki.loop import Session, events_schema
from yggdrasil.loki.tools import filesystem_toolbox


def loki_at(server: FakeModelServer, **kwargs: Any) -> Loki:
    return Loki("openai", model="gpt-fake", base_url=f"{server.url}/v1", api_key="sk-test",
                retry=RetryPolicy(attempts=1), **kwargs)


def system_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository (a .git folder is its top) with an AGENTS.md at the top."""
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    (top / "AGENTS.md").write_text("Run the tests with `make check`.\n")
    (top / "pkg").mkdir()
    (top / "pkg" / "AGENTS.md").write_text("In pkg, use tabs.\n")
    return top


def test_agents_md_from_the_top_down_to_the_root_then_the_users(
        server: FakeModelServer, repo: Path) -> None:
    server.queue(openai_reply("ok"))
    loki_at(server, instructions="Answer in French.").act(
        "t", root=repo / "pkg", instructions="Be brief.")
    system = system_of(server.posts()[0])
    order = [system.index(s) for s in ("`make check`", "use tabs", "French", "Be brief")]
    assert order == sorted(order) and min(order) > 0
    assert f"## AGENTS.md (in {repo})" in system and f"## pkg/AGENTS.md (in {repo})" in system


def test_agents_md_at_the_root_of_a_folder_without_git(server: FakeModelServer,
                                                       tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("above the root: not read without a repository\n")
    root = tmp_path / "work"
    root.mkdir()
    (root / "AGENTS.md").write_text("the root's own\n")
    server.queue(openai_reply("ok"))
    loki_at(server).act("t", root=root)
    system = system_of(server.posts()[0])
    assert "## AGENTS.md\nthe root's own" in system and "above the root" not in system


def test_a_protected_agents_md_is_not_read(server: FakeModelServer, repo: Path,
                                           tmp_path: Path) -> None:
    (repo / "pkg" / "AGENTS.md").unlink()
    (repo / "pkg" / "AGENTS.md").symlink_to(repo / "pkg" / ".env")  # a link named AGENTS.md
    (repo / "pkg" / ".env").write_text("API_KEY=hunter2\n")
    log = tmp_path / "run.jsonl"
    server.queue(openai_reply("ok"))
    with filesystem_toolbox(repo / "pkg") as box:
        loki_at(server).act("t", toolbox=box, transcript=log)
    system = system_of(server.posts()[0])
    assert "hunter2" not in system and "`make check`" in system
    start = json.loads(log.read_text().splitlines()[0])
    assert any("pkg/AGENTS.md" in note and "protected" in note
               for note in start["instruction_notes"])
    assert "hunter2" not in log.read_text()


def test_instructions_are_capped_and_the_cut_said(server: FakeModelServer, repo: Path) -> None:
    (repo / "AGENTS.md").write_text("x" * 40_000)
    server.queue(openai_reply("ok"))
    loki_at(server, agents_md=True).act("t", root=repo / "pkg")
    system = system_of(server.posts()[0])
    assert "[cut: the instructions are capped at 32768 characters" in system
    assert "use tabs" not in system  # no room left for it


def test_agents_md_can_be_left_out(server: FakeModelServer, repo: Path) -> None:
    server.queue(openai_reply("ok"))
    loki_at(server, agents_md=False).act("t", root=repo)
    assert "make check" not in system_of(server.posts()[0])


def test_a_root_other_than_the_toolboxs_is_an_error(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    loki = Loki("scripted", model=str(_script(tmp_path, *[{"done": True, "answer": "ok"}] * 2)))
    with filesystem_toolbox(other) as box:
        with pytest.raises(ValueError, match="is not the toolbox's root"):
            loki.act("t", root=root, toolbox=box)
        assert loki.act("t", toolbox=box).root == str(other.resolve())
        assert loki.act("t", root=other, toolbox=box).completed


def _script(tmp_path: Path, *records: dict[str, Any]) -> Path:
    path = tmp_path / "script.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_second_act_in_a_session_sends_the_first_turns_messages(
        server: FakeModelServer, root: Path) -> None:
    (root / "a.txt").write_text("one\n")
    server.queue(openai_reply(None, [("read_file", {"path": "a.txt"})]),
                 openai_reply("It says one."),
                 openai_reply(None, [("write_file", {"path": "b.txt", "content": "two\n"})],
                              id_prefix="second_"),
                 openai_reply("Wrote b.txt."))
    loki = loki_at(server)
    with loki.session(root) as session:
        first = loki.act("what is in a.txt?", session=session)
        second = loki.act("now write b.txt", session=session)
        assert session.toolbox is not None and session.toolbox.changed == ["b.txt"]
    assert first.answer == "It says one." and second.answer == "Wrote b.txt."
    assert first.session == second.session == session.id and first.run != second.run
    asked = server.posts()[2]["messages"]
    assert [m["role"] for m in asked] == ["system", "user", "assistant", "tool", "assistant",
                                          "user"]
    assert asked[1]["content"].startswith("Task: what is in a.txt?")
    assert asked[3]["content"] == "1\tone" and asked[4]["content"] == "It says one."
    assert asked[5]["content"].startswith("Task: now write b.txt")
    assert session.runs == [first.run, second.run]


def test_a_session_resumes_from_a_transcript(server: FakeModelServer, root: Path,
                                             tmp_path: Path) -> None:
    log = tmp_path / "first.jsonl"
    server.queue(openai_reply(None, [("write_file", {"path": "n.txt", "content": "1\n"})]),
                 openai_reply("Wrote n.txt."), openai_reply("n.txt holds 1."))
    first = loki_at(server).act("write n.txt", root=root, transcript=log)
    session = Session.from_transcript(log)
    assert session.id == first.session and session.runs == [first.run]
    assert session.changed == ["n.txt"] and "cannot be undone" in session.notes[0]
    with filesystem_toolbox(root) as box:
        again = loki_at(server).act("what is in n.txt?", toolbox=box, session=session)
        assert box.changed == ["n.txt"]
    assert again.files_changed == ["n.txt"] and again.session == first.session
    asked = server.posts()[2]["messages"]
    assert [m["role"] for m in asked] == ["system", "user", "assistant", "tool", "assistant",
                                          "user"]
    assert asked[3]["content"] == "created n.txt (2 bytes)"


def test_events_validate_against_the_schema_and_time_goes_forward(
        server: FakeModelServer, root: Path) -> None:
    (root / "a.txt").write_text("one\n")
    server.queue(openai_reply("thinking", [("edit_file", {"path": "a.txt", "old": "one",
                                                          "new": "uno"})]),
                 openai_reply(None, [("read_file", {"path": "../outside/secret.txt"})],
                              id_prefix="b_"),
                 openai_reply("Done."))
    events: list[dict[str, Any]] = []
    result = loki_at(server).act("t", root=root, on_event=events.append,
                                 confirm=lambda action: True)
    schema = events_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for event in events:
        jsonschema.validate(event, schema, format_checker=jsonschema.FormatChecker())
    kinds = [e["type"] for e in events]
    assert kinds == ["run_started", "request", "usage", "tool_call", "observation", "request",
                     "usage", "tool_call", "observation", "request", "usage", "finished"]
    assert [e["elapsed"] for e in events] == sorted(e["elapsed"] for e in events)
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    started, edited, failed = events[0], events[4], events[8]
    assert started["base_url"].rstrip("/") == f"{server.url}/v1" and started["model"] == "gpt-fake"
    assert started["protocol"] == "native" and started["fence"] == result_fence(root)
    assert edited["changed"] == ["a.txt"] and not edited["is_error"]
    assert failed["is_error"] and failed["changed"] == []
    assert events[-1]["files_changed"] == ["a.txt"] and events[-1]["completed"]
    assert {e["run"] for e in events} == {result.run}


def test_the_result_has_its_duration_and_diff(server: FakeModelServer, root: Path) -> None:
    (root / "a.txt").write_text("one\ntwo\n")
    (root / "gone.txt").write_text("bye\n")
    server.queue(openai_reply(None, [("edit_file", {"path": "a.txt", "old": "two", "new": "2"}),
                                     ("write_file", {"path": "new.txt", "content": "fresh\n"}),
                                     ("run", {"command": "rm gone.txt"})]),
                 openai_reply("Done."))
    result = loki_at(server).act("t", root=root, confirm=lambda action: True)
    assert result.seconds > 0
    assert result.diff.splitlines() == [
        "--- a/a.txt", "+++ b/a.txt", "@@ -1,2 +1,2 @@", " one", "-two", "+2",
        "--- /dev/null", "+++ b/new.txt", "@@ -0,0 +1 @@", "+fresh",
        "# gone.txt: changed by a command before a copy of it was kept: no diff"]


def test_the_transcript_records_the_prompt_tools_and_times(server: FakeModelServer,
                                                           root: Path, tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    server.queue(openai_reply("ok"))
    loki_at(server).act("t", root=root, transcript=log)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    start = records[0]
    assert start["system"] == system_of(server.posts()[0])
    assert [t["name"] for t in start["tools"]][:2] == ["list_dir", "read_file"]
    assert start["status"] and start["base_url"].rstrip("/") == f"{server.url}/v1"
    assert [r["elapsed"] for r in records] == sorted(r["elapsed"] for r in records)
    assert [r["type"] for r in records] == ["start", "message", "turn", "message", "end"]
    assert records[-1]["seconds"] >= 0 and records[-1]["diff"] == ""


def result_fence(root: Path) -> str:
    with filesystem_toolbox(root) as box:
        return box.status


def test_a_transcript_cut_mid_record_still_resumes_and_an_old_one_says_why_not(
        server: FakeModelServer, root: Path, tmp_path: Path) -> None:
    from yggdrasil.loki.errors import LokiError

    log = tmp_path / "run.jsonl"
    server.queue(openai_reply("hello"))
    loki_at(server).act("t", root=root, transcript=log)
    text = log.read_text()
    log.write_text(text[: text.rindex('{"type": "end"') + 20])  # killed while writing
    assert [m["role"] for m in Session.from_transcript(log).messages] == ["user", "assistant"]
    old = tmp_path / "old.jsonl"
    old.write_text('{"type": "start", "task": "t"}\n{"type": "turn", "text": "x"}\n')
    with pytest.raises(LokiError, match="written by a loki before sessions"):
        Session.from_transcript(old)


def test_a_resumed_session_lists_only_the_changes_that_still_hold(
        server: FakeModelServer, root: Path, tmp_path: Path) -> None:
    (root / "old.txt").write_text("x\n")
    log = tmp_path / "first.jsonl"
    server.queue(openai_reply(None, [("write_file", {"path": "kept.txt", "content": "1\n"}),
                                     ("write_file", {"path": "undone.txt", "content": "2\n"}),
                                     ("run", {"command": "rm old.txt"})]),
                 openai_reply("Done."), openai_reply("Again."))
    loki_at(server).act("t", root=root, transcript=log, confirm=lambda action: True)
    (root / "undone.txt").unlink()  # the user undid one by hand
    session = Session.from_transcript(log)
    assert session.statuses == {"kept.txt": "created", "undone.txt": "created",
                                "old.txt": "deleted"}
    with filesystem_toolbox(root) as box:
        loki_at(server).act("t2", toolbox=box, session=session)
        assert box.changed == ["kept.txt", "old.txt"]
    assert session.notes[-1] == ("undone.txt was created by the earlier run and has changed "
                                 "since: not listed as this session's change")
