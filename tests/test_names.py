"""File names that are not valid UTF-8, and lone surrogates in a model's JSON: every tool
answers, observations stay valid text, runs and transcripts are written."""

from __future__ import annotations

import json
import os
from pathlib import Path

from yggdrasil.loki import Loki
from yggdrasil.loki.engines.scripted import ScriptedEngine
from yggdrasil.loki.tools import filesystem_toolbox


def _bad_name(root: Path) -> str:
    """Create a file whose name holds the byte 0xff; its name as Python sees it."""
    path = os.path.join(os.fsencode(root), b"bad\xffname.txt")
    with open(path, "wb") as fh:
        fh.write(b"def f():\n    pass\n")
    return os.fsdecode(b"bad\xffname.txt")


def test_a_name_of_stray_bytes_breaks_no_tool(root: Path) -> None:
    (root / "ok.py").write_text("def g():\n    return 'hi'\n")
    name = _bad_name(root)
    box = filesystem_toolbox(root)  # default protection: its globs meet the name too
    answers = {
        "list_dir": box.call("list_dir", {}),
        "find": box.call("find", {"pattern": "*.txt"}),
        "grep": box.call("grep", {"pattern": "def"}),
        "run": box.call("run", {"command": "ls"}),
        "outline": box.call("outline", {"path": "."}),
        "find_symbol": box.call("find_symbol", {"name": "g"}),
        "read_file": box.call("read_file", {"path": name}),
    }
    for tool, out in answers.items():
        assert "failed:" not in out, (tool, out)
        out.encode("utf-8")  # valid text: any wire format can carry it
    assert "bad\\xffname.txt  (" in answers["list_dir"]
    assert answers["find"] == "bad\\xffname.txt"
    assert answers["run"].startswith("exit=0")
    assert answers["read_file"] == "1\tdef f():\n2\t    pass"


def test_a_lone_surrogate_in_a_path_is_a_clear_error(root: Path) -> None:
    box = filesystem_toolbox(root)
    out = box.call("read_file", {"path": "x\ud800"})
    assert out.startswith("ERROR: path 'x\\ud800' holds a character no file name can")
    out.encode("utf-8")


def test_a_run_that_made_such_a_file_writes_its_result_and_transcript(
        root: Path, tmp_path: Path) -> None:
    engine = ScriptedEngine([
        {"thought": "", "tool": "run", "args": {"command": "touch \"$(printf 'a\\377b')\""}},
        {"thought": "", "tool": "read_file", "args": {"path": "q\ud800"}},
        {"thought": "", "done": True, "answer": "ok"}])
    log = tmp_path / "run.jsonl"
    result = Loki(engine).act("x", root=root, transcript=log)
    assert result.completed and result.files_changed == [os.fsdecode(b"a\xffb")]
    assert json.loads(result.to_json())["files_changed"] == result.files_changed  # lossless
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert lines[-1]["type"] == "end" and lines[-1]["files_changed"] == result.files_changed
