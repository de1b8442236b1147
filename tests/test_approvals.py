"""Approvals that remember: confirm answers yes / no / always (a bool still works)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cli_run import child_env
from yggdrasil.loki.tools import filesystem_toolbox


@pytest.fixture(autouse=True)
def _system_tmp_elsewhere(monkeypatch: pytest.MonkeyPatch,
                          tmp_path_factory: pytest.TempPathFactory) -> None:
    """The root's files are the user's, not scratch files in the system temp dir."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("systemtmp")))


def test_always_allows_the_same_verb_on_the_same_path(root: Path) -> None:
    (root / "a.txt").write_text("1\n")
    (root / "b.txt").write_text("1\n")
    asked: list[str] = []

    def confirm(action: str) -> str:
        asked.append(action)
        return "always" if action == "edit a.txt" else "no"

    with filesystem_toolbox(root, confirm=confirm) as box:
        assert box.invoke("edit_file", {"path": "a.txt", "old": "1", "new": "2"}).ok
        assert box.invoke("edit_file", {"path": "a.txt", "old": "2", "new": "3"}).ok
        assert box.call("edit_file", {"path": "b.txt", "old": "1", "new": "2"}) == (
            "REFUSED: user declined to edit b.txt")  # the string "no" declines
        refused = box.invoke("write_file", {"path": "a.txt", "content": "4\n"})
        assert refused.refused and refused.data.verb == "overwrite"
    assert (root / "a.txt").read_text() == "3\n"
    assert asked == ["edit a.txt", "edit b.txt", "overwrite a.txt"]


def test_booleans_and_unknown_answers(root: Path) -> None:
    (root / "a.txt").write_text("1\n")
    for reply, allowed in ((True, True), (False, False), ("yes", True), ("maybe", False),
                           (None, False)):
        with filesystem_toolbox(root, confirm=lambda action, r=reply: r) as box:
            seen = box.invoke("write_file", {"path": "a.txt", "content": "1\n"})
        assert seen.ok is allowed and seen.refused is not allowed, (reply, seen.text)
        assert (seen.data.kind == "write") is allowed, (reply, seen.text)


def test_always_for_an_ask_rule_covers_the_commands_it_matches(root: Path) -> None:
    asked: list[str] = []

    def confirm(action: str) -> str:
        asked.append(str(getattr(action, "key", action)))
        return "always"

    with filesystem_toolbox(root, confirm=confirm, rules=[("ask", "touch")]) as box:
        assert box.call("run", {"command": "touch x"}).startswith("exit=0")
        assert box.call("run", {"command": "touch y"}).startswith("exit=0")
    assert asked == ["commands the rule ask:'touch' matches"]


def test_the_terminal_offers_always(root: Path) -> None:
    (root / "app.py").write_text("a = 1\n")
    plan = root.parent / "plan.jsonl"
    edits = [{"thought": "", "tool": "edit_file",
              "args": {"path": "app.py", "old": f"a = {n}", "new": f"a = {n + 1}"}}
             for n in (1, 2, 3)]
    plan.write_text("".join(json.dumps(d) + "\n" for d in
                            [*edits, {"thought": "", "done": True, "answer": "ok"}]))
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"a\n")  # typed ahead: one answer for the whole run
        done = subprocess.run(
            [sys.executable, "-m", "yggdrasil.loki", "do", "t", "--root", str(root),
             "--engine", "scripted", "--model", str(plan)],
            stdin=follower, capture_output=True, text=True, env=child_env(root.parent),
            timeout=60)
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("loki: edit app.py? [y]es/[N]o/[a]lways for this session: ") == 1
    assert (root / "app.py").read_text() == "a = 4\n"
