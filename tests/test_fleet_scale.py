"""A fleet's memory does not grow with its tasks: the driver keeps no result once recorded
(the output folder has them all), the gate forgets what it no longer needs. Structure, not
timing: the objects the driver holds are counted, never its speed or its RSS."""

from __future__ import annotations

import gc
import json
from pathlib import Path

from fleet_kit import done, write_script
from yggdrasil.loki.fleet import Fleet, Task, TaskResult
from yggdrasil.loki.fleet._gate import _KEEP_FORGOTTEN, GateCore
from yggdrasil.loki.fleet._store import read_results

TASKS = 12  # enough to show none is kept (the old driver held every one: 3, 6, 9, 12)


def live_results() -> int:
    gc.collect()
    return sum(isinstance(o, TaskResult) for o in gc.get_objects())


def test_the_driver_holds_no_results_while_the_folder_gets_them_all(tmp_path: Path) -> None:
    repo = tmp_path / "notes"
    repo.mkdir()
    (repo / "notes.txt").write_text("draft\n")
    write_script(tmp_path / "scripts", "same",  # no command: the fence is not what is tested
                 {"tool": "write_file", "args": {"path": "hi.txt", "content": "hi\n"}}, done())
    tasks = [Task(id=f"t{i:03d}", repo=str(repo), prompt="say hi") for i in range(TASKS)]
    fleet = Fleet("scripted", model=str(tmp_path / "scripts" / "same.jsonl"), workers=2,
                  out=tmp_path / "out", cache_dir=tmp_path / "cache", report=False)
    before = live_results()
    seen, held = 0, []
    for result in fleet.run(tasks):
        assert result.status == "done", result.reason
        seen += 1
        del result
        if seen % 3 == 0:  # what the driver holds between one result and the next
            held.append(live_results() - before)
    assert seen == TASKS and fleet.status.done == TASKS and fleet.status.finished == TASKS
    # at most the one in the generator's hands: none kept, however many went by
    assert max(held) <= 1, held
    assert live_results() - before == 0
    recorded = read_results(tmp_path / "out")  # the folder holds every one, whole
    assert sorted(recorded) == [t.id for t in tasks]
    assert all(r.status == "done" and r.files_changed == ["hi.txt"] for r in recorded.values())
    preds = json.loads((tmp_path / "out" / "preds.json").read_text())
    assert sorted(p["instance_id"] for p in preds) == [t.id for t in tasks]
    assert all("+hi" in p["model_patch"] for p in preds)


def test_preds_are_streamed_with_the_last_line_of_an_id_winning(tmp_path: Path) -> None:
    """A rerun (``redo``) appends a second line for a task: preds.json has it once, the
    latest; a line that is not a result is skipped."""
    out = tmp_path / "out"
    out.mkdir()
    lines = [{"id": "a", "status": "failed", "patch": ""},
             {"id": "b", "status": "done", "patch": "diff b"},
             {"id": "a", "status": "done", "patch": "diff a, again"}]
    (out / "results.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines) + "[1, 2]\n\n")
    from yggdrasil.loki.fleet._store import ResultStore

    store = ResultStore(out)
    try:
        store.write_preds("m")
    finally:
        store.close()
    preds = json.loads((out / "preds.json").read_text())
    assert preds == [{"instance_id": "b", "model_name_or_path": "m", "model_patch": "diff b"},
                     {"instance_id": "a", "model_name_or_path": "m",
                      "model_patch": "diff a, again"}]
    assert not list(out.glob(".preds*"))  # no temp file left


def test_the_gate_forgets_ended_attempts_within_a_bound() -> None:
    gate = GateCore(4)
    for n in range(3 * _KEEP_FORGOTTEN):
        holder = f"t{n}#1"
        assert gate.enter(holder, object()) is True
        gate.begin(holder, "here")
        gate.release(holder, {"input_tokens": 1})
        gate.forget(holder)
    assert len(gate._forgotten) == _KEEP_FORGOTTEN
    assert not gate._held and not gate._started and not gate._cohort and not gate._retrying
    assert gate.enter(f"t{3 * _KEEP_FORGOTTEN - 1}#1", object()) is False  # the latest: refused
    assert gate.stats()["input_tokens"] == 3 * _KEEP_FORGOTTEN
