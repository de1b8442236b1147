"""`loki rewind` for a finished run, and `loki do --continue` rewinding the earlier run's
changes, end to end as subprocesses against the fake OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import loki
from fake_servers import openai_reply, serve


def do(tmp: Path, root: Path, url: str, *args: str):  # type: ignore[no-untyped-def]
    return loki(tmp, "do", *args, "--root", str(root), "--engine", "openai", "--base-url",
                f"{url}/v1", "--model", "m", "--yes")


def run_id(done) -> str:  # type: ignore[no-untyped-def]
    return str(done.stderr.rsplit("loki do --resume ", 1)[1].split()[0])


def test_loki_rewind_lists_dry_runs_and_puts_a_finished_run_back(root: Path) -> None:
    (root / "a.txt").write_text("mine\n")
    with serve() as server:
        server.queue(openai_reply(None, [("run", {"command": "echo agent > a.txt; rm -f x"})]),
                     openai_reply(None, [("write_file", {"path": "b.txt", "content": "b\n"})]),
                     openai_reply("done"))
        first = do(root.parent, root, server.url, "change things")
    assert first.returncode == 0, first.stderr
    run = run_id(first)
    listed = loki(root.parent, "rewind", run)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1:] == ["1  run  1 file(s): a.txt",
                                              "2  write_file  1 file(s): b.txt"]
    dry = loki(root.parent, "rewind", run, "0", "--dry-run")
    assert dry.returncode == 0 and (root / "a.txt").read_text() == "agent\n"
    assert "would be restored a.txt" in dry.stdout and "-agent\n+mine" in dry.stdout
    done = loki(root.parent, "rewind", run, "0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / "a.txt").read_text() == "mine\n" and not (root / "b.txt").exists()
    again = loki(root.parent, "rewind", run, "2")  # the rewind was step 3: undo it
    assert again.returncode == 0 and (root / "b.txt").read_text() == "b\n"
    transcript = root.parent / "loki-state" / "runs" / f"{run}.jsonl"
    by_file = loki(root.parent, "rewind", str(transcript))
    assert by_file.stdout.splitlines()[1] == "1  run  1 file(s): a.txt"


def test_loki_rewind_says_what_it_cannot_do(root: Path) -> None:
    none = loki(root.parent, "rewind", "nope")
    assert none.returncode == 2 and "no checkpoints" in none.stderr
    (root / "a.txt").write_text("mine\n")
    with serve() as server:
        server.queue(openai_reply(None, [("run", {"command": "echo agent > a.txt"})]),
                     openai_reply("done"))
        first = do(root.parent, root, server.url, "change a")
    run = run_id(first)
    assert loki(root.parent, "rewind", run, "7").returncode == 2
    (root / "a.txt").write_text("the user's own edit\n")
    kept = loki(root.parent, "rewind", run, "0")
    assert kept.returncode == 1 and "not restored a.txt" in kept.stdout
    assert (root / "a.txt").read_text() == "the user's own edit\n"


def test_do_continue_can_rewind_the_earlier_runs_changes(root: Path) -> None:
    import os

    config = Path(os.environ["XDG_CONFIG_HOME"]) / "loki" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[checkpoints]\nrewind_tool = true\n")  # the model may rewind
    (root / "a.txt").write_text("mine\n")
    with serve() as server:
        server.queue(openai_reply(None, [("run", {"command": "echo first > a.txt"})]),
                     openai_reply("changed"),
                     openai_reply(None, [("rewind", {"step": 0})]),
                     openai_reply("rewound"))
        first = do(root.parent, root, server.url, "change a")
        assert (root / "a.txt").read_text() == "first\n"
        second = loki(root.parent, "do", "put it back", "--root", str(root), "--engine",
                      "openai", "--base-url", f"{server.url}/v1", "--model", "m", "--yes",
                      "--continue", "--json")
        env_posts = server.posts()
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert "rewind" in json.dumps(env_posts[2]["tools"])
    result = json.loads(second.stdout)
    assert result["checkpoints"] == result["run"]
    assert f"loki rewind {run_id(first)} 0" in second.stderr
    assert (root / "a.txt").read_text() == "mine\n"
    assert result["steps"][0]["tool"] == "rewind"
    assert result["steps"][0]["data"]["restored"] == [{"path": "a.txt", "action": "write"}]
