"""`loki do` as a daily agent, end to end as a subprocess against the fake OpenAI server:
the start line, --instructions, --continue/--resume, --events."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jsonschema

from cli_run import interruptible, loki
from fake_servers import openai_reply, serve
from yggdrasil.loki.loop import events_schema


def do(tmp: Path, root: Path, url: str, *args: str):  # type: ignore[no-untyped-def]
    return loki(tmp, "do", *args, "--root", str(root), "--engine", "openai", "--base-url",
                f"{url}/v1", "--yes")


def test_the_start_line_names_engine_model_and_where_they_came_from(root: Path) -> None:
    with serve() as server:
        server.queue(openai_reply("hi"), openai_reply("hi"))
        chosen = do(root.parent, root, server.url, "t", "--model", "gpt-fake")
        default = do(root.parent, root, server.url, "t")
    first = chosen.stderr.splitlines()[0]
    assert first.startswith(f"loki: openai model gpt-fake (--model) at {server.url}/v1")
    assert default.stderr.splitlines()[0].startswith(
        "loki: openai model gpt-4.1 (the openai engine's default; --model or LOKI_MODEL to "
        f"choose) at {server.url}/v1")


def test_continue_resumes_the_last_run_in_the_root(root: Path) -> None:
    (root / "AGENTS.md").write_text("Say please.\n")
    rules = root.parent / "mine.md"
    rules.write_text("Answer in haiku.\n")
    with serve() as server:
        server.queue(openai_reply(None, [("write_file", {"path": "n.txt", "content": "1\n"})]),
                     openai_reply("Wrote n.txt."), openai_reply("It holds 1."),
                     openai_reply("Still 1."))
        first = do(root.parent, root, server.url, "write n.txt", "--model", "m",
                   "--instructions", str(rules))
        second = do(root.parent, root, server.url, "what is in it?", "--model", "m",
                    "--continue")
        run_id = first.stderr.rsplit("loki do --resume ", 1)[1].split()[0]
        third = do(root.parent, root, server.url, "and now?", "--model", "m", "--resume",
                   run_id, "--json")
        posts = server.posts()
    assert first.returncode == second.returncode == third.returncode == 0, second.stderr
    system = posts[0]["messages"][0]["content"]
    assert system.index("Say please.") < system.index("Answer in haiku.")
    assert f"continuing {run_id} (4 messages)" in second.stderr
    assert "listed as changed again, but cannot be undone" in second.stderr
    assert "files changed (1):\n  M n.txt" in second.stderr
    roles = [m["role"] for m in posts[2]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert posts[2]["messages"][-1]["content"] == "Task: what is in it?"
    # --resume of the first run: the second run's turn is not in it
    assert [m["content"] for m in posts[3]["messages"]][-1] == "Task: and now?"
    assert len(posts[3]["messages"]) == 6
    assert json.loads(third.stdout)["answer"] == "Still 1."


def test_resume_of_an_unknown_run_says_so(root: Path) -> None:
    done = loki(root.parent, "do", "t", "--root", str(root), "--engine", "scripted",
                "--model", "x", "--resume", "nope")
    assert done.returncode == 2 and "--resume 'nope': no such run id" in done.stderr
    done = loki(root.parent, "do", "t", "--root", str(root), "--engine", "scripted",
                "--model", "x", "--continue")
    assert done.returncode == 2 and "--continue: no earlier run in" in done.stderr


def test_events_validate_against_the_schema_and_times_increase(root: Path) -> None:
    (root / "a.txt").write_text("one\n")
    events = root.parent / "events.jsonl"
    with serve() as server:
        server.queue(openai_reply(None, [("edit_file", {"path": "a.txt", "old": "one",
                                                        "new": "uno"})]),
                     openai_reply("Done."), openai_reply("Nothing to do."))
        done = do(root.parent, root, server.url, "t", "--model", "m", "--events", str(events))
        to_stdout = do(root.parent, root, server.url, "t", "--model", "m", "--events", "-")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    schema = events_schema()
    for event in lines:
        jsonschema.validate(event, schema, format_checker=jsonschema.FormatChecker())
    assert [e["type"] for e in lines] == ["run_started", "request", "usage", "tool_call",
                                          "observation", "request", "usage", "finished"]
    assert [e["elapsed"] for e in lines] == sorted(e["elapsed"] for e in lines)
    assert [e["time"] for e in lines] == sorted(e["time"] for e in lines)
    assert lines[4]["changed"] == ["a.txt"] and lines[-1]["answer"] == "Done."
    # '-': the events are stdout (the answer rides in the finished event)
    assert to_stdout.stdout.splitlines()[0].startswith('{"type": "run_started"')


def test_bad_daily_flags_say_what_is_allowed(root: Path) -> None:
    plan = root.parent / "plan.jsonl"
    plan.write_text('{"done": true, "answer": "ok"}\n')
    base = ("do", "t", "--root", str(root), "--engine", "scripted", "--model", str(plan))
    both = loki(root.parent, *base, "--events", "-", "--json")
    assert both.returncode == 2 and "--events - and --json both write to stdout" in both.stderr
    missing = loki(root.parent, *base, "--instructions", str(root / "nope.md"))
    assert missing.returncode == 2 and "--instructions" in missing.stderr
    assert "cannot read it" in missing.stderr
    bad = loki(root.parent, *base, "--mcp", "no-equals-sign")
    assert bad.returncode == 2 and "write NAME=COMMAND ARGS or NAME=URL" in bad.stderr
    assert "Traceback" not in both.stderr + missing.stderr + bad.stderr


def test_an_interrupted_run_still_ends_its_events(root: Path) -> None:
    import signal
    import subprocess
    import sys

    from cli_run import child_env

    plan = root.parent / "plan.jsonl"
    plan.write_text(json.dumps({"thought": "", "tool": "run",
                                "args": {"command": "touch started; sleep 60", "timeout": 120}})
                    + "\n")
    events = root.parent / "events.jsonl"
    with interruptible():
        proc = subprocess.Popen([sys.executable, "-m", "yggdrasil.loki", "do", "t", "--root",
                                 str(root), "--engine", "scripted", "--model", str(plan),
                                 "--events", str(events)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=child_env(root.parent))
    try:
        deadline = time.monotonic() + 60  # a guard against a run that never starts
        while not (root / "started").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    last = json.loads(events.read_text().splitlines()[-1])
    assert last["type"] == "finished" and last["stop_reason"] == "interrupted"
    jsonschema.validate(last, events_schema())
