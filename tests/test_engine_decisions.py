"""Decision parsing: the JSON-in-text protocol, tolerant of fences, prose and key drift."""

from __future__ import annotations

import pytest

from yggdrasil.loki.engine import (
    Completion,
    Decision,
    NotADecision,
    ToolCall,
    decisions_from,
    parse_decision,
)


def test_plain_object() -> None:
    d = parse_decision('{"thought": "look", "tool": "read_file", "args": {"path": "a.py"}}')
    assert d == Decision(thought="look", tool="read_file", args={"path": "a.py"})


def test_done_object() -> None:
    d = parse_decision('{"thought": "ok", "done": true, "answer": "added the flag"}')
    assert d.done and d.answer == "added the flag" and d.thought == "ok"


def test_code_fence_and_prose_around() -> None:
    text = ('Sure! I will read it first.\n```json\n{"thought": "t", "tool": "grep", '
            '"args": {"pattern": "def {x}"}}\n```\nThat should work.')
    assert parse_decision(text).args == {"pattern": "def {x}"}


def test_prose_with_braces_before_the_object() -> None:
    text = 'Given {that} and {"a": 1}, here: {"tool": "list_dir", "args": {}} done.'
    assert parse_decision(text).tool == "list_dir"


def test_key_drift_and_string_args() -> None:
    d = parse_decision('{"name": "read_file", "arguments": "{\\"path\\": \\"x\\"}"}')
    assert (d.tool, d.args, d.error) == ("read_file", {"path": "x"}, "")
    assert parse_decision('{"action": "find", "input": {"pattern": "*.py"}}').tool == "find"
    assert parse_decision('{"done": "true", "final_answer": "42"}').answer == "42"


def test_done_without_answer_uses_the_thought() -> None:
    assert parse_decision('{"thought": "nothing to do", "done": true}').answer == "nothing to do"


def test_bad_args_are_an_error_for_the_observation_not_a_raise() -> None:
    d = parse_decision('{"tool": "read_file", "args": ["a.py"]}')
    assert d.tool == "read_file" and "must be a JSON object" in d.error
    d = parse_decision('{"tool": "read_file", "args": "{not json"}')
    assert "not valid JSON" in d.error


@pytest.mark.parametrize(("text", "problem"), [
    ("", "empty"),
    ("I think I should read the file now.", "no JSON object"),
    ('{"path": "a.py"}', 'neither a "tool" nor "done"'),
    ('{"tool": "read_file", "args": {"path": ', "no JSON object"),
])
def test_not_a_decision(text: str, problem: str) -> None:
    with pytest.raises(NotADecision, match=problem):
        parse_decision(text)


def test_truncated_reply_says_so() -> None:
    with pytest.raises(NotADecision, match="cut off"):
        decisions_from(Completion(text='{"tool": "write_file", "args": {"content": "aaa',
                                  truncated=True))


def test_native_calls_become_one_decision_each() -> None:
    completion = Completion(text="two reads", tool_calls=[
        ToolCall("c1", "read_file", {"path": "a"}), ToolCall("c2", "read_file", {}, "bad")])
    first, second = decisions_from(completion)
    assert (first.thought, first.call_id, first.args) == ("two reads", "c1", {"path": "a"})
    assert (second.thought, second.call_id, second.error) == ("", "c2", "bad")


def test_completion_round_trips_through_a_dict() -> None:
    completion = Completion("t", [ToolCall("c", "grep", {"pattern": "x"})], {"input_tokens": 3},
                            "m", True)
    assert Completion.from_dict(completion.to_dict()) == completion


def test_a_brace_heavy_reply_is_bounded() -> None:
    with pytest.raises(NotADecision):
        parse_decision("{" * 50_000)


def test_deeply_nested_args_are_an_error_not_a_crash() -> None:
    from yggdrasil.loki.engines import decode_arguments

    deep = "[" * 5_000 + "]" * 5_000
    decision = parse_decision('{"tool": "list_dir", "args": "' + deep + '"}')
    assert decision.tool == "list_dir" and "not valid JSON" in decision.error
    assert decode_arguments("list_dir", deep)[1].startswith("the args for list_dir are not valid JSON")
    with pytest.raises(NotADecision):
        parse_decision('{"tool": "list_dir", "args": ' + deep + "}")


def test_a_hostile_reply_costs_a_step_and_the_run_goes_on(tmp_path) -> None:
    from yggdrasil.loki import Loki
    from yggdrasil.loki.engines.scripted import ScriptedEngine

    hostile = '{"tool": "list_dir", "args": ' + "[" * 200_000 + "]" * 200_000 + "}"
    result = Loki(ScriptedEngine([hostile, {"done": True, "answer": "fine"}])).act(
        "look", root=tmp_path)
    assert result.completed and result.answer == "fine"
    assert result.steps[0].tool == "" and result.steps[0].observation.startswith("ERROR:")
