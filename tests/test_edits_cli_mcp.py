"""The edit features through the `loki` command (call, do, a real terminal) and MCP."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_run import child_env, loki

APP = "def main():\n\tif ready:\n\t\treturn 1\n\treturn 0\n"
PATCH = ("*** Begin Patch\n*** Update File: app.py\n@@ def main():\n     if ready:\n"
         "-        return 1\n+        return 2\n*** Add File: notes.txt\n+hello\n*** End Patch\n")


def call(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return loki(root.parent, "call", *args, "--root", str(root))


def test_cli_apply_patch_dry_run_then_for_real(root: Path) -> None:
    (root / "app.py").write_text(APP)
    dry = call(root, "apply_patch", f"patch={PATCH}", "dry_run=true")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("dry run: nothing was changed; the patch would do this:\n"
                                 "M app.py (hunk 1 matched ignoring indentation)\nA notes.txt\n")
    assert (root / "app.py").read_text() == APP and not (root / "notes.txt").exists()
    refused = call(root, "apply_patch", f"patch={PATCH}")
    assert (refused.returncode, refused.stdout) == (3, "REFUSED: user declined to edit app.py\n")
    assert not (root / "notes.txt").exists()
    done = call(root, "apply_patch", f"patch={PATCH}", "--yes")
    assert done.returncode == 0 and "+\t\treturn 2" in done.stdout
    assert (root / "app.py").read_text() == APP.replace("return 1", "return 2")
    failed = call(root, "apply_patch", f"patch={PATCH}", "--yes")
    assert failed.returncode == 1 and failed.stdout.startswith("ERROR: apply_patch changed nothing")


def test_cli_edits_syntax_gate_and_undo(root: Path) -> None:
    (root / "app.py").write_text(APP)
    edits = {"path": "app.py", "edits": [{"old": "    if ready:", "new": "    if ready():"},
                                         {"old": "return 0", "new": "return -1"}]}
    done = call(root, "edit_file", "--args", json.dumps(edits), "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("edited app.py (2 edits, 2 replacements; edit 1 matched "
                                  "ignoring indentation)")
    assert (root / "app.py").read_text() == APP.replace("ready:", "ready():").replace("0", "-1")
    rejected = call(root, "edit_file", "path=app.py", "old=ready():", "new=ready(:", "--yes",
                    "--on-syntax-error", "reject")
    assert rejected.returncode == 1
    assert rejected.stdout.startswith("ERROR: app.py would no longer parse (line 2: ")
    assert "ready():" in (root / "app.py").read_text()
    undo = call(root, "undo_edit", "path=app.py")  # a new process: a new run, nothing to undo
    assert undo.returncode == 1 and "was not changed in this run" in undo.stdout


def test_do_refuses_an_edit_from_a_stale_view(root: Path) -> None:
    (root / "app.py").write_text("x=1\n")
    plan = root.parent / "plan.jsonl"
    plan.write_text("".join(json.dumps(d) + "\n" for d in [
        {"thought": "", "tool": "read_file", "args": {"path": "app.py"}},
        {"thought": "", "tool": "run", "args": {"command": "printf 'x = 1\\n' > app.py"}},
        {"thought": "", "tool": "edit_file", "args": {"path": "app.py", "old": "x=1", "new": "x=2"}},
        {"thought": "", "tool": "read_file", "args": {"path": "app.py"}},
        {"thought": "", "tool": "edit_file", "args": {"path": "app.py", "old": "x = 1", "new": "x = 2"}},
        {"thought": "", "tool": "undo_edit", "args": {"path": "app.py"}},
        {"thought": "", "done": True, "answer": "ok"}]))
    done = loki(root.parent, "do", "t", "--root", str(root), "--engine", "scripted",
                "--model", str(plan), "--yes", "--json")
    steps = json.loads(done.stdout)["steps"]
    assert steps[2]["is_error"] and steps[2]["data"]["kind"] == "error"
    assert steps[2]["observation"].startswith("ERROR: app.py changed since you last read it (")
    assert (steps[4]["data"]["kind"], steps[4]["data"]["replacements"]) == ("edit", 1)
    assert steps[4]["changed"] == ["app.py"]
    assert steps[5]["observation"] == "ERROR: cannot undo app.py: changed by a command (run/run_python); no copy of the original was kept"
    assert (root / "app.py").read_text() == "x = 2\n"


def run_on_terminal(root: Path, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer.encode())  # typed ahead: the terminal holds it for readline
        return subprocess.run([sys.executable, "-m", "yggdrasil.loki", "call", *args,
                               "--root", str(root)], stdin=follower, capture_output=True,
                              text=True, env=child_env(root.parent), timeout=60)
    finally:
        os.close(follower)
        os.close(leader)


def test_the_terminal_prompt_shows_the_diff_it_asks_about(root: Path) -> None:
    (root / "app.py").write_text("a = 1\nb = 2\n")
    done = run_on_terminal(root, "y\n", "edit_file", "path=app.py", "old=b = 2", "new=b = 3")
    assert done.stderr.startswith("--- app.py\n+++ app.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n"
                                  "+b = 3\nloki: edit app.py? [y]es/[N]o/[a]lways for this session: ")
    assert done.returncode == 0 and (root / "app.py").read_text() == "a = 1\nb = 3\n"
    done = run_on_terminal(root, "n\n", "write_file", "path=app.py", "content=c = 4\n")
    assert "-a = 1\n-b = 3\n+c = 4\nloki: overwrite app.py? [y]es/[N]o/[a]lways for this session: " in done.stderr
    assert done.returncode == 3 and (root / "app.py").read_text() == "a = 1\nb = 3\n"
    (root / "gone.txt").write_text("x\n")
    done = run_on_terminal(root, "n\n", "apply_patch",
                           "patch=*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch")
    assert done.stderr.endswith("loki: delete gone.txt? [y]es/[N]o/[a]lways for this session: ") and (root / "gone.txt").exists()


def test_the_terminal_prompt_shows_control_characters_escaped(root: Path) -> None:
    """A file's content must not drive the user's terminal: erase the diff, retitle the
    window, or reorder text so that another change seems to be asked about."""
    (root / "evil.txt").write_text("start\n\x1b[2K\x1b[1A\rlooks harmless\x1b]0;title\x07 \u202eevil\n")
    done = run_on_terminal(root, "n\n", "edit_file", "path=evil.txt", "old=start", "new=START")
    assert "\x1b" not in done.stderr and "\u202e" not in done.stderr and "\x07" not in done.stderr
    assert "\\x1b[2K\\x1b[1A\\x0dlooks harmless\\x1b]0;title\\x07 \\u202eevil" in done.stderr


mcp = pytest.importorskip("mcp")


def mcp_session(root: Path, scenario: Any, *flags: str) -> Any:
    from test_mcp import serve_and

    result, _ = serve_and(sys.executable, root, scenario, *flags)
    return result


def field(obj: Any, name: str) -> Any:
    from test_mcp import field as of

    return of(obj, name)


def text(result: Any) -> str:
    return "".join(part.text for part in result.content)


def test_mcp_lists_the_new_tools(root: Path) -> None:
    async def scenario(client: Any) -> Any:
        return {t.name: t for t in (await client.list_tools()).tools}

    tools = mcp_session(root, scenario)
    assert field(tools["apply_patch"].annotations, "destructive_hint") is True
    assert field(tools["undo_edit"].annotations, "idempotent_hint") is True
    assert "*** Begin Patch" in tools["apply_patch"].description
    schema = field(tools["edit_file"], "input_schema")
    assert schema["properties"]["edits"]["items"]["required"] == ["old", "new"]


def test_mcp_patch_edits_stale_view_and_undo_in_one_session(root: Path) -> None:
    (root / "app.py").write_text(APP)

    async def scenario(client: Any) -> Any:
        dry = await client.call_tool("apply_patch", {"patch": PATCH, "dry_run": True})
        applied = await client.call_tool("apply_patch", {"patch": PATCH})
        again = await client.call_tool("apply_patch", {"patch": PATCH})
        await client.call_tool("read_file", {"path": "app.py"})
        (root / "app.py").write_text((root / "app.py").read_text() + "# saved by the user\n")
        stale = await client.call_tool("edit_file", {"path": "app.py", "edits": [
            {"old": "return 2", "new": "return 3"}]})
        await client.call_tool("read_file", {"path": "app.py"})
        edited = await client.call_tool("edit_file", {"path": "app.py", "edits": [
            {"old": "return 2", "new": "return 3"}, {"old": "    return 0", "new": "    return 9"}]})
        undone = await client.call_tool("undo_edit", {"path": "notes.txt"})
        return dry, applied, again, stale, edited, undone

    dry, applied, again, stale, edited, undone = mcp_session(root, scenario)
    assert not field(dry, "is_error") and text(dry).startswith("dry run: nothing was changed")
    assert field(dry, "structured_content")["dry_run"] is True
    assert not field(applied, "is_error") and text(applied).startswith("M app.py (hunk 1 matched ignoring indentation)\nA notes.txt")
    files = field(applied, "structured_content")["files"]
    assert [(f["op"], f["path"], f["loose"]) for f in files] == [
        ("M", "app.py", [{"hunk": 1, "ignored": "indentation"}]), ("A", "notes.txt", [])]
    assert field(again, "is_error") and "apply_patch changed nothing" in text(again)
    assert field(stale, "is_error") and text(stale).startswith("ERROR: app.py changed since you last read it")
    assert not field(edited, "is_error") and text(edited).startswith(
        "edited app.py (2 edits, 2 replacements; edit 2 matched ignoring indentation)")
    data = field(edited, "structured_content")
    assert [(e["match"], e["ignored"]) for e in data["edits"]] == [
        ("exact", []), ("loose", ["indentation"])]
    assert text(undone) == "removed notes.txt (this run created it)"
    assert field(undone, "structured_content") == {"kind": "undo", "path": "notes.txt",
                                                   "outcome": "removed"}
    assert (root / "app.py").read_text() == APP.replace("return 1", "return 3").replace(
        "return 0", "return 9") + "# saved by the user\n"
    assert not (root / "notes.txt").exists()


def test_mcp_syntax_gate(root: Path) -> None:
    (root / "conf.json").write_text('{"a": 1}\n')

    async def scenario(client: Any) -> Any:
        return await client.call_tool("edit_file", {"path": "conf.json", "old": "1", "new": "1,"})

    result = mcp_session(root, scenario, "--on-syntax-error", "reject")
    assert field(result, "is_error") and text(result).startswith("ERROR: conf.json would no longer parse (line 1:")
    assert field(result, "structured_content")["kind"] == "error"
    assert (root / "conf.json").read_text() == '{"a": 1}\n'
