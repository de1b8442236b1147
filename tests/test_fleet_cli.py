"""`loki fleet` as a real subprocess: output, errors, the live display, resume after a kill."""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_run import child_env, loki_process
from fleet_kit import done, make_repo, marked_processes, run, wait_for, write_script


def tasks_file(tmp_path: Path, ids: list[str], *, sleep: float = 0.0,
               until: Path | None = None, held: tuple[str, ...] = ()) -> Path:
    """Tasks that each write <id>.txt, after ``sleep`` seconds or once ``until`` exists
    (a path outside /tmp, which a fenced command sees as its own; only the tasks in
    ``held`` wait for it, when given)."""
    repo = tmp_path / "repo"
    if not repo.exists():
        make_repo(repo, {"a.txt": "a\n"})
    for name in ids:
        steps = [run(f"sleep {sleep}")] if sleep else []
        waits = until is not None and (not held or name in held)
        steps += [run(f"while [ ! -e {until} ]; do sleep 0.05; done")] if waits else []
        write_script(tmp_path / "scripts", name, *steps, run(f"echo {name} > {name}.txt"), done())
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"id": n, "repo": "repo", "prompt": "x",
                                        "verify": f"test -f {n}.txt"}) + "\n" for n in ids))
    return path


def children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except (OSError, ValueError):
            continue
        if name.isdigit() and int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
            found.append(int(name))
    return found


def fleet_args(tmp_path: Path, tasks: Path, *extra: str) -> list[str]:
    return ["fleet", str(tasks), "--out", str(tmp_path / "out"), "--engine", "scripted",
            "--model", str(tmp_path / "scripts" / "{id}.jsonl"), "--cache",
            str(tmp_path / "cache"), *extra]


def test_fleet_prints_a_line_per_task_and_a_summary(tmp_path: Path) -> None:
    tasks = tasks_file(tmp_path, ["one", "two"])
    shown = loki_process(tmp_path, *fleet_args(tmp_path, tasks, "--workers", "2", "--price-in", "3",
                                       "--price-out", "15"))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert sorted(line.split()[1] for line in lines[:2]) == ["one", "two"]
    assert all("done  verified  steps=1" in line for line in lines[:2])
    assert "verified 2/2 (100.0%)" in shown.stdout and "cost $0.00" in shown.stdout
    assert f"report {tmp_path / 'out'}/report.html" in shown.stdout  # written by the run
    preds = json.loads((tmp_path / "out" / "preds.json").read_text())
    assert sorted(p["instance_id"] for p in preds) == ["one", "two"]


def test_fleet_exits_1_when_a_task_failed(tmp_path: Path) -> None:
    tasks = tasks_file(tmp_path, ["ok"])
    with tasks.open("a") as handle:
        handle.write(json.dumps({"id": "bad", "repo": "repo", "prompt": "x",
                                 "commit": "feedface"}) + "\n")
    shown = loki_process(tmp_path, *fleet_args(tmp_path, tasks))
    assert shown.returncode == 1
    line = next(x for x in shown.stdout.splitlines() if "bad  FAILED" in x)
    # the failed task's own time (never a made-up 0.0s), then its reason
    spent = float(line.split("FAILED  ", 1)[1].split("s  ", 1)[0])
    assert spent > 0 and "s  attempt 1: commit 'feedface' is not in" in line, line
    result = json.loads(next(x for x in (tmp_path / "out" / "results.jsonl").read_text()
                             .splitlines() if '"bad"' in x))
    assert result["steps"] is None and result["seconds"] == pytest.approx(spent, abs=0.06)
    assert "done 1, failed 1" in shown.stdout


def test_a_bad_tasks_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    shown = loki_process(tmp_path, *fleet_args(tmp_path, tmp_path / "tasks.jsonl"))
    assert shown.returncode == 2
    assert "tasks.jsonl:1: a task needs repo (required: id, repo, prompt)" in shown.stderr
    missing = loki_process(tmp_path, *fleet_args(tmp_path, tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "cannot read the tasks file" in missing.stderr


def test_on_a_terminal_a_live_display_shows_counts(tmp_path: Path) -> None:
    tasks = tasks_file(tmp_path, ["t1", "t2", "t3"], sleep=0.6)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "yggdrasil.loki",
                             *fleet_args(tmp_path, tasks, "--workers", "1")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
                            env={**child_env(tmp_path), "COLUMNS": "80"})
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(60) == 0
    screen = seen.decode("utf-8", "replace")
    assert "running 1" in screen and "ETA 0m" in screen  # on 80 columns
    assert "[1/3] t1  done  verified" in screen  # finished tasks print above the display
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    assert "verified 3/3" in stdout


@pytest.fixture
def gate() -> Iterator[Path]:
    """A path outside /tmp (a fenced command's /tmp is its own) that held tasks wait for."""
    folder = Path(tempfile.mkdtemp(prefix="loki-fleet-gate-", dir="/var/tmp"))
    try:
        yield folder / "open"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_resume_after_the_driver_is_killed_mid_run(tmp_path: Path, gate: Path) -> None:
    ids = [f"t{i}" for i in range(5)]
    # two tasks finish, the third waits (mid-run, whatever the machine's speed) until the
    # driver is killed; the rerun opens the gate
    tasks = tasks_file(tmp_path, ids, until=gate, held=tuple(ids[2:]))
    results = tmp_path / "out" / "results.jsonl"
    driver = subprocess.Popen([sys.executable, "-m", "yggdrasil.loki",
                               *fleet_args(tmp_path, tasks, "--workers", "1")],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=child_env(tmp_path))
    wait_for(lambda: results.exists() and results.read_text().count("\n") >= 2, timeout=60)
    helpers = children(driver.pid)  # its worker, the gate's manager, the resource tracker
    assert helpers
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    before = results.read_text()
    assert before.endswith("\n") and 2 <= before.count("\n") < 5
    first = [json.loads(line)["id"] for line in before.splitlines()]
    wait_for(lambda: marked_processes() == [], timeout=10)  # its workers died with it
    # and so did the gate's manager and the resource tracker: nothing is left
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in helpers), timeout=10)
    gate.touch()
    again = loki_process(tmp_path, *fleet_args(tmp_path, tasks, "--workers", "2"))
    assert again.returncode == 0, again.stderr
    assert f"{len(first)} skipped: already there" in again.stdout
    after = results.read_text()
    assert after.startswith(before)  # nothing recorded before was touched or repeated
    assert sorted(json.loads(line)["id"] for line in after.splitlines()) == ids
    preds = json.loads((tmp_path / "out" / "preds.json").read_text())
    assert sorted(p["instance_id"] for p in preds) == ids
    assert sorted(p.name for p in (tmp_path / "cache" / "work").iterdir()
                  if not p.name.startswith(".")) == []


def test_a_script_without_a_main_guard_runs_its_fleet_once(tmp_path: Path) -> None:
    """The local backend's workers do not re-run the driver's script (multiprocessing would,
    running the fleet again in every worker, unless the script guards itself)."""
    tasks = tasks_file(tmp_path, ["g1", "g2"])
    script = tmp_path / "drive.py"
    script.write_text(
        "from yggdrasil.loki.fleet import Fleet, Task\n"
        f"fleet = Fleet('scripted', model={str(tmp_path / 'scripts' / '{id}.jsonl')!r}, "
        f"workers=2, out={str(tmp_path / 'out')!r}, cache_dir={str(tmp_path / 'cache')!r})\n"
        f"for result in fleet.run(Task.from_jsonl({str(tasks)!r})):\n"
        "    print('finished', result.id, result.status)\n")
    shown = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=child_env(tmp_path), timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert sorted(shown.stdout.splitlines()) == ["finished g1 done", "finished g2 done"]
    assert "Traceback" not in shown.stderr


def test_the_live_status_fits_80_columns_and_keeps_the_eta() -> None:
    from yggdrasil.loki.cli._fleet import status_line
    from yggdrasil.loki.fleet import FleetStatus

    s = FleetStatus(total=12_000, done=4_321, failed=1_234, running=256, queued=1_024,
                    input_tokens=123_456_789, output_tokens=9_876_543, rate_limited=4_567)
    wide = status_line(s, 200)
    assert "tokens 123.5M in / 9.9M out" in wide and "429s 4567" in wide and "queued 1024" in wide
    for width in (68, 40, 20):  # 80 columns less the bar
        line = status_line(s, width)
        assert len(line) <= max(width, len("5555/12000  ETA 0m00s")), line
        assert line.startswith("5555/12000") and "ETA " in line
    assert "failed 1234" in status_line(s, 68) and "tokens" not in status_line(s, 68)


def test_a_bad_resource_flag_is_a_usage_error(tmp_path: Path) -> None:
    tasks = tasks_file(tmp_path, ["t1"])
    for bad in ("GPU", "GPU=lots", "=1", "GPU=0"):
        shown = loki_process(tmp_path, *fleet_args(tmp_path, tasks, "--backend", "ray",
                                           "--resource", bad))
        assert shown.returncode == 2, (bad, shown.stderr)
        assert "give NAME=N" in shown.stderr, shown.stderr
    assert not (tmp_path / "out").exists()  # refused before anything ran
