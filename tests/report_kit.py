"""What the report tests share: output folders written by hand (old and new result
shapes, hostile text) and a real 20-task fleet run with the scripted engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fleet_kit import done, make_repo, write_script
from yggdrasil.loki.fleet import Fleet, Task

# What a hostile run may hold: if any of it ran as markup, the page's body gets `data-pwned`.
PWN_SCRIPT = "</script><script>document.body.setAttribute('data-pwned', 'script')</script>"
PWN_IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned', 'img')\">"
PWN_ID = "<b>bold</b><img src=y onerror=\"document.body.setAttribute('data-pwned', 'id')\">"


def result(task_id: str, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"id": task_id, "status": "done", "reason": "", "attempts": 1,
                            "patch": "", "steps": 1, "stop_reason": "done", "usage": {},
                            "verified": True, "verify_exit": 0, "seconds": 1.0}
    data.update(fields)
    return data


def write_out(out: Path, results: list[dict[str, Any]],
              transcripts: dict[str, list[dict[str, Any]]] | None = None,
              extra_lines: tuple[str, ...] = ()) -> Path:
    """An output folder as a fleet leaves it: results.jsonl and transcripts."""
    out.mkdir(parents=True, exist_ok=True)
    for n, (task_id, records) in enumerate((transcripts or {}).items()):
        folder = out / f"transcript-{n}"
        folder.mkdir(exist_ok=True)
        (folder / "transcript.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        for data in results:
            if data["id"] == task_id:
                data["transcript"] = f"{folder.name}/transcript.jsonl"
    lines = [json.dumps(r) for r in results] + list(extra_lines)
    (out / "results.jsonl").write_text("".join(line + "\n" for line in lines))
    return out


def conversation(prompt: str, *steps: tuple[str, str, dict[str, Any], str],
                 answer: str = "done") -> list[dict[str, Any]]:
    """A transcript: start, one step per (thought, tool, args, observation), end."""
    records: list[dict[str, Any]] = [{"type": "start", "task": prompt, "model": "m",
                                      "max_steps": 30}]
    for n, (thought, tool, args, seen) in enumerate(steps, 1):
        records.append({"type": "turn", "text": thought, "tool_calls": [], "usage": {}})
        records.append({"type": "step", "n": n, "thought": thought, "tool": tool,
                        "args": args, "observation": seen})
    records.append({"type": "end", "answer": answer, "completed": True, "stop_reason": "done",
                    "files_changed": [], "usage": {}})
    return records


def hostile_out(out: Path) -> Path:
    """Results and a transcript whose every text tries to become markup, with a timeline."""
    base = 1_760_000_000.0
    timed = [{"node": f"node-{PWN_IMG}", "started_at": base, "ended_at": base + 4.0,
              "queued_seconds": 0.5, "reason": f"boom {PWN_SCRIPT}"},
             {"node": "node-b", "started_at": base + 4.5, "ended_at": base + 9.0}]
    results = [
        result(PWN_ID, repo=f"/src/{PWN_IMG}", patch=f"diff --git a/x b/x\n+{PWN_SCRIPT}\n",
               answer=PWN_SCRIPT, verify_output=PWN_IMG, usage={"input_tokens": 10},
               attempts=timed),
        result("plain-one", repo="/src/alpha", verified=False, verify_exit=1,
               attempts=[{"node": "node-b", "started_at": base + 1, "ended_at": base + 3}]),
        result("failed-one", status="failed", repo="/src/alpha", verified=None,
               reason=f"attempt 1: RuntimeError: {PWN_SCRIPT}; attempt 2: RuntimeError: "
                      f"{PWN_SCRIPT}", attempts=2),
    ]
    talk = conversation(PWN_SCRIPT, (PWN_SCRIPT, "read_file", {"path": PWN_IMG}, PWN_IMG),
                        answer=PWN_IMG)
    return write_out(out, results, {PWN_ID: talk})


# --- a real run: 20 tasks, 3 repositories, every outcome ---------------------------------

OUTCOMES_WANTED = {"verified": 12, "not verified": 4, "done": 2, "failed": 2}


def twenty_tasks(root: Path) -> tuple[list[Task], Path]:
    """20 tasks over two git repositories and a plain folder, made to end in each outcome
    (12 verified, 4 not verified, 2 without verify, 2 failed), their scripts carrying
    token counts; one transcript holds hostile text."""
    repos = {"alpha": root / "alpha", "beta": root / "beta", "gamma": root / "gamma"}
    for name, path in repos.items():
        if name == "gamma":
            path.mkdir(parents=True)
            (path / "value.txt").write_text("old\n")
        else:
            make_repo(path, {"value.txt": "old\n", "README.md": f"# {name}\n"})
    scripts = root / "scripts"
    tasks = []
    for i in range(20):
        task_id = f"task-{i:02d}"
        repo = list(repos.values())[i % 3]
        verify: str | None = "grep -qx new value.txt"
        steps: list[dict[str, Any]] = [
            _said(i, "look first", "read_file", {"path": "value.txt"}),
            _said(i, "fix the value", "edit_file",
                  {"path": "value.txt", "old": "old", "new": "new" if i < 12 else "wrong"})]
        if i == 0:
            steps.insert(1, _said(i, PWN_SCRIPT, "write_file",
                                  {"path": "notes.html", "content": PWN_IMG + "\n"}))
        if i in (16, 17):
            verify = None
        script = [*steps, {"text": json.dumps(done(f"finished {task_id}")),
                           "usage": {"input_tokens": 900 + 40 * i, "output_tokens": 30 + i}}]
        setup = None
        if i == 18:
            script = script[:1]  # the script runs out: the engine fails, twice
        if i == 19:
            setup = "echo cannot set up >&2; exit 3"
        write_script(scripts, task_id, *script)
        tasks.append(Task(id=task_id, repo=str(repo), prompt=f"set value.txt to new ({i})",
                          verify=verify, setup=setup, max_steps=10))
    return tasks, scripts


def _said(i: int, thought: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps({"thought": thought, "tool": tool, "args": args})
    return {"text": text, "usage": {"input_tokens": 700 + 35 * i, "output_tokens": 40 + 2 * i}}


def run_twenty(root: Path) -> Path:
    """The 20 tasks through the project's real fleet (local backend); the output folder,
    with the report.html the fleet writes at the end of its run."""
    tasks, scripts = twenty_tasks(root / "src")
    fleet = Fleet("scripted", model=str(scripts / "{id}.jsonl"), workers=4, out=root / "out",
                  cache_dir=root / "cache")
    finished = list(fleet.run(tasks))
    assert len(finished) == 20
    return root / "out"

