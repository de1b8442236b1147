"""The `loki` command end to end, as a subprocess: output, exit codes, confirmation, errors."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cli_run import child_env, loki, loki_process
from yggdrasil.loki.tools import filesystem_toolbox


def test_tools_json_is_the_toolbox_catalog(root: Path) -> None:
    done = loki(root.parent, "tools", "--root", str(root), "--json")
    assert done.returncode == 0, done.stderr
    catalog = json.loads(done.stdout)
    assert catalog["root"] == str(root.resolve())
    assert catalog["tools"] == filesystem_toolbox(root).to_dict()["tools"]
    mutating = {t["name"] for t in catalog["tools"] if t["mutates"]}
    assert mutating == {"write_file", "edit_file", "apply_patch", "undo_edit", "run_python", "run",
                        "job_input", "job_stop", "edit_notebook"}  # job_output, jobs: read tools


def test_tools_text_marks_mutating_tools_and_read_only_drops_them(root: Path) -> None:
    full = loki(root.parent, "tools", "--root", str(root))
    assert full.returncode == 0
    assert ('edit_file(path, old="", new="", replace_all=false, edits=null)  [changes files]'
            in full.stdout)
    assert "read_file(path, start=1, end=0, symbol=\"\", pages=\"\", as_images=false, rendered=false)\n" in full.stdout
    read_only = loki(root.parent, "tools", "--root", str(root), "--read-only")
    assert "read_file(" in read_only.stdout
    assert "[changes files]" not in read_only.stdout.split("\n", 1)[1]
    assert "write_file" not in read_only.stdout


def _run_with_columns(root: Path, columns: str | None, *args: str) -> str:
    env = {k: v for k, v in child_env(root.parent).items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run([sys.executable, "-m", "yggdrasil.loki", *args, "--root", str(root)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", ["tools", "config"])
def test_tools_and_config_wrap_to_the_terminal_width(root: Path, command: str) -> None:
    whole = _run_with_columns(root, None, command)  # a pipe: lines whole
    fitted = _run_with_columns(root, "72", command)
    assert max(map(len, whole.splitlines())) > 200
    too_long = [x for x in fitted.splitlines() if len(x) > 72]
    assert all(len(x.lstrip("# ").split()) == 1 for x in too_long), too_long  # a long path
    if command == "tools":  # the same words, only the line breaks differ
        assert whole.replace("#", "").split() == fitted.replace("#", "").split()
        return
    start = fitted.index("fence.hidden = [")
    block = fitted[start: fitted.index("\n]\n", start) + 3]
    table = tomllib.loads(block)
    assert table["fence"]["hidden"] == json.loads(
        next(line for line in whole.splitlines() if line.startswith("fence.hidden = "))
        .split(" = ", 1)[1].rsplit("  # ", 1)[0])


def test_tools_web_adds_the_web_tools(root: Path) -> None:
    done = loki(root.parent, "tools", "--root", str(root), "--web", "--json")
    assert done.returncode == 0, done.stderr
    names = {t["name"] for t in json.loads(done.stdout)["tools"]}
    assert {"web_fetch", "web_table", "web_image"} <= names


def test_call_prints_the_observation_with_typed_pairs(root: Path) -> None:
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    done = loki(root.parent, "call", "read_file", "--root", str(root), "path=a.txt",
                "start=2", "end=2")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("2\ttwo\n[showing lines 2-2 of 3; read_file(path='a.txt', start=3)")


def test_args_json_merges_and_string_params_stay_text(root: Path) -> None:
    done = loki(root.parent, "call", "write_file", "--root", str(root),
                "--args", '{"path": "n.txt", "content": "from json"}', "content=123")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "created n.txt (3 bytes)\n"
    assert (root / "n.txt").read_text() == "123"


def test_error_observation_exits_1_and_stays_confined(root: Path) -> None:
    done = loki(root.parent, "call", "read_file", "path=../outside/secret.txt", "--root", str(root))
    assert done.returncode == 1
    assert done.stdout.startswith("ERROR: path '../outside/secret.txt' escapes the agent root")
    assert "TOP SECRET" not in done.stdout + done.stderr


def test_edit_without_terminal_is_refused_and_yes_allows_it(root: Path) -> None:
    target = root / "app.py"
    target.write_text("debug = False\n")
    edit = ("call", "edit_file", "path=app.py", "old=False", "new=True", "--root", str(root))
    refused = loki_process(root.parent, *edit)  # a real process: its stdin, its exit code
    assert refused.returncode == 3
    assert refused.stdout == "REFUSED: user declined to edit app.py\n"
    assert "--yes" in refused.stderr
    assert target.read_text() == "debug = False\n"
    allowed = loki(root.parent, *edit, "--yes")
    assert (allowed.returncode, allowed.stdout.splitlines()[0]) == (0, "edited app.py (1 replacement)")
    assert target.read_text() == "debug = True\n"


@pytest.mark.parametrize(("answer", "code", "content"),
                         [("y\n", 0, "x = 2\n"), ("n\n", 3, "x = 1\n"), ("\n", 3, "x = 1\n")])
def test_on_a_terminal_the_user_is_asked(root: Path, answer: str, code: int, content: str) -> None:
    target = root / "x.py"
    target.write_text("x = 1\n")
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer.encode())  # typed ahead: the terminal holds it for readline
        done = subprocess.run(
            [sys.executable, "-m", "yggdrasil.loki", "call", "write_file", "path=x.py",
             "content=x = 2\n", "--root", str(root)],
            stdin=follower, capture_output=True, text=True, env=child_env(root.parent),
            timeout=60)
    finally:
        os.close(follower)
        os.close(leader)
    assert "loki: overwrite x.py? [y]es/[N]o/[a]lways for this session: " in done.stderr
    assert done.returncode == code
    assert target.read_text() == content


@pytest.mark.parametrize(("args", "says"), [
    (["tools", "--root", "{root}/missing"], "is not an existing folder"),
    (["call", "nope", "--root", "{root}"], "unknown tool 'nope'; available tools: list_dir"),
    (["call", "write_file", "--read-only", "--root", "{root}"], "off with --read-only"),
    (["call", "read_file", "README.md", "--root", "{root}"], "is not key=value"),
    (["call", "read_file", "--args", "{{bad", "--root", "{root}"], "--args is not valid JSON"),
    (["call", "read_file", "--args", "[1]", "--root", "{root}"], "--args must be a JSON object"),
    (["call", "read_file", "--root", "{root}"], "missing required argument 'path'"),
    (["call", "read_file", "path=a", "end=x", "--root", "{root}"], "'end' must be an integer"),
    (["call", "read_file", "path=a", "size=1", "--root", "{root}"], "has no argument 'size'"),
    (["frobnicate"], "invalid choice"),
    ([], "required: COMMAND"),
])
def test_errors_are_one_line_and_exit_2(root: Path, args: list[str], says: str) -> None:
    done = loki(root.parent, *[a.format(root=root) for a in args])
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("loki"), done.stderr
    assert says in done.stderr


def test_help_everywhere_with_examples(tmp_path: Path) -> None:
    for command in ([], ["tools"], ["call"], ["mcp"]):
        done = loki(tmp_path, *command, "--help")
        assert done.returncode == 0
        assert "examples:" in done.stdout and "loki " in done.stdout
    assert "3    call: the tool answered 'REFUSED" in loki(tmp_path, "call", "--help").stdout


def test_sandbox_options_reach_the_commands(root: Path) -> None:
    from yggdrasil.loki.tools import sandbox_status

    off = loki(root.parent, "call", "run", "command=echo $LOKI_SANDBOX", "--root", str(root),
               "--sandbox", "off")
    assert off.returncode == 0 and "stdout:\nnone\n" in off.stdout
    status = sandbox_status()
    if not status.network_control:
        return  # the kernel cannot block TCP: nothing more to check here
    code = "import socket; socket.create_server(('127.0.0.1', 0)); print('bound')"
    closed = loki(root.parent, "call", "run_python", f"code={code}", "--root", str(root),
                  "--no-network")
    assert "PermissionError" in closed.stdout and "stdout:\nbound" not in closed.stdout
