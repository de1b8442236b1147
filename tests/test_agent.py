"""Loki.act driven by the scripted engine over a real toolbox on real files."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from yggdrasil.loki import ActResult, ActStep, Loki
from yggdrasil.loki.engine import Completion, ToolCall
from yggdrasil.loki.engines.scripted import ScriptedEngine
from yggdrasil.loki.errors import EngineError, EngineRequestError


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"thought": f"edit {path}", "tool": "edit_file",
            "args": {"path": path, "old": old, "new": new}}


def done(answer: str) -> dict[str, Any]:
    return {"thought": "finished", "done": True, "answer": answer}


def test_public_api() -> None:
    import yggdrasil.loki as loki

    assert loki.__all__ == ["ActResult", "ActStep", "Loki", "Tool", "Toolbox",
                            "filesystem_toolbox"]
    assert set(loki.__all__) <= set(dir(loki))


def test_importing_loads_no_engine_sdk() -> None:
    code = ("import sys, yggdrasil.loki as l; from yggdrasil.loki import Loki; "
            "print(any(m.split('.')[0] in ('openai', 'anthropic') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": str(Path("src").resolve())})
    assert out.stdout.strip() == "False"


def test_a_run_edits_real_files_and_reports(root: Path) -> None:
    (root / "cli.py").write_text("VERBOSE = False\n")
    seen: list[ActStep] = []
    script = [{"thought": "look", "tool": "read_file", "args": {"path": "cli.py"}},
              edit("cli.py", "False", "True"),
              {"thought": "new file", "tool": "write_file",
               "args": {"path": "docs/notes.md", "content": "verbose on\n"}},
              done("VERBOSE is now True")]
    result = Loki(ScriptedEngine(script)).act("turn verbose on", root=root, on_step=seen.append)
    assert (root / "cli.py").read_text() == "VERBOSE = True\n"
    assert (root / "docs" / "notes.md").read_text() == "verbose on\n"
    assert result.completed and result.stop_reason == "done"
    assert result.answer == "VERBOSE is now True"
    assert result.files_changed == ["cli.py", "docs/notes.md"]
    assert [s.tool for s in result.steps] == ["read_file", "edit_file", "write_file"]
    assert result.steps[0] == ActStep(1, "look", "read_file", {"path": "cli.py"},
                                      "1\tVERBOSE = False", data={
                                          "kind": "read", "path": "cli.py", "content": "text",
                                          "size": 16, "encoding": "utf-8", "first": 1, "last": 1,
                                          "total": 1, "lines": ["VERBOSE = False"], "symbol": "",
                                          "note": ""})
    assert seen == result.steps
    edited = result.steps[1].data  # each step carries its call's typed result as JSON values
    assert (edited["kind"], edited["replacements"], edited["edits"][0]["match"]) == (
        "edit", 1, "exact")
    assert result.steps[2].data["created"] is True and result.steps[2].changed == ["docs/notes.md"]
    assert (result.engine, result.model, result.root) == ("scripted", "script", str(root))
    assert json.loads(result.to_json())["steps"][1]["observation"] == (
        "edited cli.py (1 replacement)\n--- cli.py\n+++ cli.py\n@@ -1,1 +1,1 @@\n"
        "-VERBOSE = False\n+VERBOSE = True")


def test_tool_mistakes_are_observations_and_cost_a_step(root: Path) -> None:
    script = [{"tool": "delete_everything", "args": {}},
              {"tool": "read_file", "args": {"paht": "x"}},
              {"tool": "read_file", "args": {"path": "../outside/secret.txt"}},
              done("gave up")]
    result = Loki(ScriptedEngine(script)).act("x", root=root)
    first, second, third = (s.observation for s in result.steps)
    assert first.startswith("ERROR: unknown tool 'delete_everything'; available tools: list_dir")
    assert second.startswith("ERROR: read_file has no argument 'paht'")
    assert "escapes the agent root" in third
    assert result.completed


def test_a_reply_that_is_not_a_decision_gets_a_correction(root: Path) -> None:
    engine = ScriptedEngine(["Let me think about it.", done("ok")])
    result = Loki(engine).act("x", root=root)
    (step,) = result.steps
    assert step.tool == "" and step.thought == "Let me think about it."
    assert step.observation.startswith("ERROR: your reply was not a decision (no JSON object")
    second_request = engine.requests[1]
    assert second_request[-1] == {"role": "user", "content": step.observation}
    assert second_request[-2] == {"role": "assistant", "content": "Let me think about it."}


def test_the_step_budget_ends_a_run(root: Path) -> None:
    script = [{"tool": "list_dir", "args": {}}] * 5
    result = Loki(ScriptedEngine(script)).act("loop", root=root, max_steps=3)
    assert len(result.steps) == 3 and not result.completed
    assert result.stop_reason == "max_steps" and result.answer == ""


def test_read_only_run_cannot_write(root: Path) -> None:
    script = [{"tool": "write_file", "args": {"path": "a.txt", "content": "x"}}, done("no")]
    result = Loki(ScriptedEngine(script)).act("x", root=root, read_only=True)
    assert result.steps[0].observation.startswith("ERROR: unknown tool 'write_file'")
    assert not (root / "a.txt").exists() and result.files_changed == []


def test_confirm_is_passed_to_the_toolbox(
    root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # the root must not count as scratch space, or nothing is asked
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("systemtmp")))
    (root / "a.txt").write_text("old\n")
    asked: list[str] = []

    def decline(action: str) -> bool:
        asked.append(action)
        return False

    result = Loki(ScriptedEngine([edit("a.txt", "old", "new"), done("")])).act(
        "x", root=root, confirm=decline)
    assert asked == ["edit a.txt"] and (root / "a.txt").read_text() == "old\n"
    assert result.steps[0].observation == "REFUSED: user declined to edit a.txt"


def test_the_transcript_replays_the_same_run(root: Path, tmp_path: Path) -> None:
    (root / "app.py").write_text("x = 1\n")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "app.py").write_text("x = 1\n")
    log = tmp_path / "run.jsonl"
    script = ["not json", edit("app.py", "x = 1", "x = 2"),
              Completion("native", [ToolCall("c1", "read_file", {"path": "app.py"})]),
              done("x is 2")]
    first = Loki(ScriptedEngine(script)).act("set x", root=root, transcript=log)
    kinds = [json.loads(line)["type"] for line in log.read_text().splitlines()]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("turn") == 4
    replay = Loki("scripted", model=str(log)).act("set x", root=copy)
    assert [s.to_dict() for s in replay.steps] == [s.to_dict() for s in first.steps]
    assert (replay.answer, replay.files_changed) == (first.answer, first.files_changed)
    assert (copy / "app.py").read_text() == "x = 2\n"


def test_a_decisions_file_is_a_script(root: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.jsonl"
    script.write_text("# a demo\n" + json.dumps({"tool": "write_file", "args": {
        "path": "hi.txt", "content": "hi\n"}}) + "\n\n" + json.dumps(done("wrote it")) + "\n")
    result = Loki(engine="scripted", model=str(script)).act("greet", root=root)
    assert result.answer == "wrote it" and (root / "hi.txt").read_text() == "hi\n"


def test_an_exhausted_script_raises_with_the_partial_result(root: Path) -> None:
    with pytest.raises(EngineRequestError, match="no reply left") as info:
        Loki(ScriptedEngine([{"tool": "list_dir", "args": {}}])).act("x", root=root)
    partial = info.value.result
    assert isinstance(partial, ActResult) and len(partial.steps) == 1
    assert partial.stop_reason == "error" and not partial.completed


class RecordingEngine:
    """A scripted engine that measures every conversation it is sent."""

    name, model, native_tools = "recording", "r", False

    def __init__(self, replies: list[Any]) -> None:
        self.inner = ScriptedEngine(replies)
        self.sizes: list[int] = []

    def complete(self, messages: Sequence[dict[str, Any]], *, system: str,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> Completion:
        self.sizes.append(len(system) + sum(len(m["content"]) for m in messages))
        return self.inner.complete(messages, system=system, tools=tools)


def test_a_fifty_step_run_fits_its_budget_by_eliding_old_observations(root: Path) -> None:
    (root / "big.txt").write_text("".join(f"line {i} {'x' * 60}\n" for i in range(300)))
    reads = [{"tool": "read_file", "args": {"path": "big.txt"}}] * 50
    engine = RecordingEngine([*reads, done("read it all")])
    budget = 80_000
    loki = Loki(engine, context_chars=budget, observation_chars=10_000)
    result = loki.act("read big.txt many times", root=root, max_steps=60)
    assert result.completed and len(result.steps) == 50
    assert max(engine.sizes) <= budget  # the run never sent more than its budget
    last = engine.inner.requests[-1]
    observations = [m["content"] for m in last if m["content"].startswith("Output of step")]
    assert len(observations) == 50
    assert observations[0].startswith("Output of step 1 (read_file):\n[elided to save context")
    assert "call the tool again" in observations[0]
    assert observations[-1].endswith("line 299 " + "x" * 60)  # the newest are kept whole
    assert "characters cut from the middle" in result.steps[0].observation  # capped at 10_000


def test_engine_errors_are_engine_errors(root: Path) -> None:
    class Broken:
        name, model, native_tools = "broken", "b", False

        def complete(self, messages: Any, *, system: str, tools: Any = None) -> Completion:
            raise EngineError("the brain is gone")

    with pytest.raises(EngineError, match="the brain is gone") as info:
        Loki(Broken()).act("x", root=root)
    assert info.value.result.engine == "broken"


def test_a_bad_protocol_is_rejected() -> None:
    with pytest.raises(ValueError, match="protocol"):
        Loki(ScriptedEngine([]), protocol="xml")  # type: ignore[arg-type]
