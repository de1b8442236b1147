"""`loki do` end to end as a subprocess: a scripted engine and a real fake OpenAI server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli_run import child_env, interruptible, loki
from fake_servers import openai_error, openai_reply, serve


def script(path: Path, *decisions: dict[str, object]) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in decisions))
    return str(path)


EDIT = [
    {"thought": "look first", "tool": "read_file", "args": {"path": "app.py"}},
    {"thought": "fix it", "tool": "edit_file", "args": {"path": "app.py", "old": "hi", "new": "hello"}},
    {"thought": "all good", "done": True, "answer": "Greeting changed."},
]


def test_do_runs_the_loop_and_reports(root: Path) -> None:
    (root / "app.py").write_text('print("hi")\n')
    plan = script(root.parent / "plan.jsonl", *EDIT)
    done = loki(root.parent, "do", "change the greeting", "--root", str(root),
                "--engine", "scripted", "--model", plan, "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Greeting changed.\n"
    assert "1/12 read_file" in done.stderr and "2/12 edit_file" in done.stderr
    assert "files changed (1):\n  M app.py  (+1 -1)" in done.stderr and "tokens:" in done.stderr
    assert (root / "app.py").read_text() == 'print("hello")\n'


def test_do_lists_changes_with_status_and_line_counts(root: Path) -> None:
    (root / "app.py").write_text("a\nb\nc\n")
    (root / "old.txt").write_text("bye\n")
    plan = script(root.parent / "plan.jsonl",
                  {"thought": "", "tool": "edit_file",
                   "args": {"path": "app.py", "old": "b\n", "new": "B\nB2\n"}},
                  {"thought": "", "tool": "run",
                   "args": {"command": "rm old.txt; printf 'x\\ny\\n' > new.txt; echo z >> app.py"}},
                  {"thought": "", "done": True, "answer": "done"})
    done = loki(root.parent, "do", "t", "--root", str(root), "--engine", "scripted",
                "--model", plan, "--yes")
    assert done.returncode == 0, done.stderr
    assert "files changed (3):\n  M app.py  (+3 -1)\n  A new.txt  (+2 -0)\n  D old.txt\n" in done.stderr


def test_do_refuses_edits_without_a_terminal_or_yes(root: Path) -> None:
    (root / "app.py").write_text('print("hi")\n')
    plan = script(root.parent / "plan.jsonl", *EDIT)
    done = loki(root.parent, "do", "change it", "--root", str(root), "--engine", "scripted",
                "--model", plan, "--json")
    result = json.loads(done.stdout)
    assert result["steps"][1]["observation"] == "REFUSED: user declined to edit app.py"
    assert result["files_changed"] == [] and result["completed"] is True
    assert (root / "app.py").read_text() == 'print("hi")\n'
    assert "no terminal to ask; pass --yes" in done.stderr
    # said before the first step, and a declined step is not a success
    warned = done.stderr.index("loki: no terminal to ask: edits of existing files")
    assert warned < done.stderr.index("1/12 read_file")
    assert done.returncode == 3 and done.stderr.endswith("loki: 1 step declined (exit 3)\n")


def test_without_a_terminal_yes_or_read_only_say_nothing_is_declined(root: Path) -> None:
    (root / "app.py").write_text('print("hi")\n')
    plan = script(root.parent / "plan.jsonl", *EDIT)
    for given in ("--yes", "--read-only"):
        done = loki(root.parent, "do", "t", "--root", str(root), "--engine", "scripted",
                    "--model", plan, given)
        assert "loki: no terminal to ask:" not in done.stderr, done.stderr
        assert "declined (exit 3)" not in done.stderr
        assert done.returncode == 0, done.stderr


def test_a_root_in_the_system_temp_folder_is_said_at_start(root: Path) -> None:
    temp = child_env(root.parent)["TMPDIR"]
    scratch = Path(temp) / "checkout"
    scratch.mkdir()
    (scratch / "app.py").write_text('print("hi")\n')
    plan = script(root.parent / "plan.jsonl", *EDIT)
    done = loki(root.parent, "do", "t", "--root", str(scratch), "--engine", "scripted",
                "--model", plan)
    lines = done.stderr.splitlines()
    said = [n for n, line in enumerate(lines) if "inside the system temp folder" in line]
    assert len(said) == 1 and said[0] < lines.index(next(x for x in lines if "1/12" in x))
    assert "edited without confirmation" in lines[said[0]]
    assert done.returncode == 0 and (scratch / "app.py").read_text() == 'print("hello")\n'


def test_do_json_log_and_replay(root: Path) -> None:
    (root / "app.py").write_text('print("hi")\n')
    plan = script(root.parent / "plan.jsonl", *EDIT)
    log = root.parent / "run.jsonl"
    first = loki(root.parent, "do", "t", "--root", str(root), "--engine", "scripted", "--model",
                 plan, "--yes", "--json", "--log", str(log))
    assert first.returncode == 0, first.stderr
    (root / "app.py").write_text('print("hi")\n')
    again = loki(root.parent, "do", "t", "--root", str(root), "--engine", "scripted", "--model",
                 str(log), "--yes", "--json")
    steps = [(s["tool"], s["observation"]) for s in json.loads(again.stdout)["steps"]]
    assert steps == [(s["tool"], s["observation"]) for s in json.loads(first.stdout)["steps"]]


def test_do_out_of_steps_exits_4(root: Path) -> None:
    (root / "a.txt").write_text("a\n")
    look = {"thought": "look", "tool": "read_file", "args": {"path": "a.txt"}}
    plan = script(root.parent / "plan.jsonl", look, look, look)
    done = loki(root.parent, "do", "t", "--root", str(root), "--engine", "scripted",
                "--model", plan, "--max-steps", "2")
    assert done.returncode == 4
    assert done.stdout == "(no answer: the step budget ran out)\n"


def test_do_through_an_openai_compatible_server(root: Path) -> None:
    (root / "notes.txt").write_text("one\n")
    with serve() as server:
        server.queue(openai_reply(calls=[("write_file", {"path": "todo.txt", "content": "x\n"})]),
                     openai_reply("Wrote todo.txt."))
        done = loki(root.parent, "do", "make a todo", "--root", str(root), "--engine", "openai",
                    "--base-url", server.url, "--model", "gpt-fake")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Wrote todo.txt.\n" and (root / "todo.txt").read_text() == "x\n"
    assert "files changed (1):\n  A todo.txt  (+1 -0)" in done.stderr


def test_do_exits_1_when_the_engine_fails_and_still_reports(root: Path) -> None:
    with serve() as server:
        server.queue(openai_reply(calls=[("write_file", {"path": "a.txt", "content": "x\n"})]),
                     openai_error(401, "Incorrect API key provided"))
        done = loki(root.parent, "do", "make a", "--root", str(root), "--engine", "openai",
                    "--base-url", server.url, "--model", "gpt-fake")
    assert done.returncode == 1, done.stderr
    assert "loki: engine error" in done.stderr and "Incorrect API key" in done.stderr
    assert "files changed (1):\n  A a.txt" in done.stderr  # what the run did is still said


def test_do_without_an_engine_says_every_way_to_configure_one(root: Path) -> None:
    env = {k: v for k, v in child_env(root.parent).items()
           if not k.startswith(("LOKI_", "OPENAI_", "ANTHROPIC_"))}
    env["OLLAMA_HOST"] = "http://127.0.0.1:9"  # nothing listens on the discard port
    done = subprocess.run([sys.executable, "-m", "yggdrasil.loki", "do", "t", "--root", str(root)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("loki: error: no engine is configured. Choose one of:\n")
    for way in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ollama serve", "LOKI_BASE_URL",
                "Loki(engine=", "--engine openai --base-url", "--model <model>",
                "--engine scripted --model steps.jsonl"):
        assert way in done.stderr
    assert "Traceback" not in done.stderr and not done.stderr.rstrip().endswith(":")


def test_ctrl_c_stops_and_still_reports_changes(root: Path) -> None:
    plan = script(root.parent / "plan.jsonl",
                  {"thought": "", "tool": "write_file", "args": {"path": "w.txt", "content": "w"}},
                  {"thought": "", "tool": "run", "args": {"command": "sleep 60", "timeout": 120}},
                  {"thought": "", "done": True, "answer": "never"})
    with interruptible():
        proc = subprocess.Popen([sys.executable, "-m", "yggdrasil.loki", "do", "t", "--root",
                                 str(root), "--engine", "scripted", "--model", plan],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=child_env(root.parent))
    assert proc.stderr is not None
    assert proc.stderr.readline().startswith("loki: scripted model ")  # the start line
    first = proc.stderr.readline()
    assert first.startswith("loki: fence: commands ")  # the fence in force is said first
    while first.startswith("loki: "):  # then the warnings (the root is in the temp folder)
        first = proc.stderr.readline()
    assert first.startswith("1/12 write_file")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "loki: interrupted" in err and "files changed (1):\n  A w.txt  (+1 -0)" in err
    assert out == ""


def test_ctrl_c_lists_what_the_interrupted_command_created(root: Path) -> None:
    plan = script(root.parent / "plan.jsonl",
                  {"thought": "w", "tool": "write_file", "args": {"path": "first.txt", "content": "1"}},
                  {"thought": "r", "tool": "run",
                   "args": {"command": "echo x > made.txt; touch started; sleep 300"}})
    with interruptible():
        proc = subprocess.Popen(
            [sys.executable, "-m", "yggdrasil.loki", "do", "t", "--root", str(root), "--engine",
             "scripted", "--model", plan, "--yes"], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(root.parent))
    try:
        while not (root / "started").exists():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert "loki: interrupted" in err
    assert "A made.txt" in err and "A started" in err and "A first.txt" in err


def test_a_failed_command_step_shows_the_last_line_of_stderr(root: Path) -> None:
    plan = script(root.parent / "plan.jsonl",
                  {"thought": "r", "tool": "run",
                   "args": {"command": "echo noise >&2; echo 'boom: no such thing' >&2; exit 3"}},
                  {"thought": "d", "done": True, "answer": "gave up"})
    done = loki(root.parent, "do", "t", "--root", str(root), "--engine", "scripted",
                "--model", plan)
    assert done.returncode == 0
    line = next(line for line in done.stderr.splitlines() if line.startswith("1/12 run"))
    assert line.endswith("-> exit=3: boom: no such thing")


def test_every_exit_code_is_in_help(tmp_path: Path) -> None:
    shown = loki(tmp_path, "--help").stdout + loki(tmp_path, "do", "--help").stdout
    for code in ("0", "1", "2", "3", "4", "130", "141"):
        assert f"\n  {code} " in shown, code
    assert "the engine" in shown.split("exit codes")[1]
