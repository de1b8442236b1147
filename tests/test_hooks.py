"""before_call / after_call: refuse a call, rewrite an observation, never raise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from yggdrasil.loki import Loki
from yggdrasil.loki.engines.scripted import ScriptedEngine
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def test_before_call_refuses_with_its_message(root: Path) -> None:
    seen: list[tuple[str, Any]] = []

    def before(tool: str, args: Any) -> str | None:
        seen.append((tool, args))
        args["path"] = "elsewhere.txt"  # a copy: the call is not changed by this
        return "writing docs/ is for humans" if str(args.get("content", "")).startswith("x") else None

    box = filesystem_toolbox(root, before_call=before)
    out = box.run("write_file", {"path": "a.txt", "content": "x"})
    assert out.text == "REFUSED: writing docs/ is for humans" and out.refused
    assert not (root / "a.txt").exists() and not (root / "elsewhere.txt").exists()
    assert box.call("write_file", {"path": "a.txt", "content": "ok"}) == "created a.txt (2 bytes)"
    assert (root / "a.txt").read_text() == "ok" and not (root / "elsewhere.txt").exists()
    assert seen[0] == ("write_file", {"path": "elsewhere.txt", "content": "x"})
    # an observation prefix given by the hook is kept as it is
    box.before_call = lambda tool, args: "ERROR: not now"
    assert box.run("list_dir", {}).is_error


def test_after_call_rewrites_the_observation(root: Path) -> None:
    box: Toolbox = filesystem_toolbox(root)

    def format_after_edit(tool: str, args: Any, observation: str) -> str | None:
        if tool not in ("write_file", "edit_file"):
            return None
        # run a formatter through the box itself: its change is the call's change
        fmt = box.call("run", {"command": f"sed -i 's/[ ]*$//' {args['path']}"})
        return f"{observation}\nformatter: {fmt.splitlines()[0]}"

    box.after_call = format_after_edit
    out = box.run("write_file", {"path": "m.py", "content": "x = 1   \n"})
    assert out.text == "created m.py (9 bytes)\nformatter: exit=0"
    assert (root / "m.py").read_text() == "x = 1\n"
    assert out.changed == ("m.py",)
    assert box.call("list_dir", {}) == "m.py  (6b)"  # None keeps the observation


def test_exceptions_in_hooks_are_errors_not_raises(root: Path) -> None:
    def broken(*args: Any) -> str | None:
        raise RuntimeError("hook bug")

    box = filesystem_toolbox(root, before_call=broken)
    out = box.run("write_file", {"path": "a.txt", "content": "x"})
    assert out.is_error and out.text == ("ERROR: the before_call hook failed on write_file "
                                         "(RuntimeError: hook bug); the call did not run")
    assert not (root / "a.txt").exists()
    box = filesystem_toolbox(root, after_call=broken)
    out = box.run("write_file", {"path": "a.txt", "content": "x"})
    assert out.is_error and out.text.startswith("ERROR: the after_call hook failed on "
                                                 "write_file (RuntimeError: hook bug); the tool "
                                                 "ran, and said:\ncreated a.txt (1 bytes)")
    assert (root / "a.txt").read_text() == "x"


def test_hooks_in_the_loop(root: Path) -> None:
    engine = ScriptedEngine([
        {"thought": "t", "tool": "run", "args": {"command": "echo hi"}},
        {"thought": "t", "tool": "read_file", "args": {"path": "notes.txt"}},
        {"thought": "done", "done": True, "answer": "ok"},
    ])
    (root / "notes.txt").write_text("line\n")
    box = filesystem_toolbox(root, before_call=lambda t, a: "no commands today" if t == "run" else None,
                             after_call=lambda t, a, o: o.upper() if t == "read_file" else None)
    result = Loki(engine).act("look", root=root, toolbox=box, max_steps=3)
    observations = [step.observation for step in result.steps]
    assert observations[:2] == ["REFUSED: no commands today", "1\tLINE"]
    assert json.loads(result.to_json())["completed"] is True
