"""`loki fleet --backend ray --address ...` as a real subprocess, on the run's real Ray
cluster, started with `ray start --head` (conftest ``ray_head``), and, for a lost node, a
second `ray start` node that the test kills mid-task. Nodes are stopped by their own
process ids at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from cli_run import child_env
from fleet_kit import attempt_pids, leftovers, marked_processes, wait_for
from ray_nodes import RayNode, free_port, ray_env
from test_fleet_cli import tasks_file

pytest.importorskip("ray")
pytestmark = pytest.mark.xdist_group("ray")

CLI_TIMEOUT = 300  # a driver that hangs fails the test instead of the suite


@pytest.fixture
def head(ray_head: RayNode) -> RayNode:
    """The run's one cluster (conftest ``ray_head``)."""
    return ray_head


def driver_env(tmp_path: Path) -> dict[str, str]:
    return ray_env(child_env(tmp_path))


def fleet_argv(tmp_path: Path, tasks: Path, address: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "yggdrasil.loki", "fleet", str(tasks),
            "--out", str(tmp_path / "out"), "--engine", "scripted",
            "--model", str(tmp_path / "scripts" / "{id}.jsonl"), "--cache",
            str(tmp_path / "cache"), "--backend", "ray", "--address", address, *extra]


def run_fleet(tmp_path: Path, tasks: Path, address: str,
              *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(fleet_argv(tmp_path, tasks, address, *extra), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=driver_env(tmp_path),
                          timeout=CLI_TIMEOUT)


def recorded(tmp_path: Path) -> list[dict[str, object]]:
    text = (tmp_path / "out" / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_the_cli_runs_a_fleet_on_a_running_cluster(tmp_path: Path, head: RayNode) -> None:
    tasks = tasks_file(tmp_path, ["r1", "r2"])
    shown = run_fleet(tmp_path, tasks, head.address, "--workers", "2")
    assert shown.returncode == 0, shown.stderr[-3000:]
    lines = shown.stdout.splitlines()
    assert sorted(line.split()[1] for line in lines[:2]) == ["r1", "r2"]
    assert all("done  verified  steps=1" in line for line in lines[:2])
    assert "verified 2/2 (100.0%)" in shown.stdout
    results = {r["id"]: r for r in recorded(tmp_path)}
    assert sorted(results) == ["r1", "r2"]
    for name, result in results.items():
        assert result["files_changed"] == [f"{name}.txt"] and len(result["attempts"]) == 1
        assert f"+++ b/{name}.txt" in str(result["patch"]) and f"+{name}" in str(result["patch"])
    preds = json.loads((tmp_path / "out" / "preds.json").read_text())
    assert sorted(p["instance_id"] for p in preds) == ["r1", "r2"]
    assert leftovers(tmp_path / "cache") == []
    # the driver joined the cluster and left it running: it did not start it, so it is
    # not its to stop
    assert head.proc.poll() is None and head.raylet()


def test_a_bad_address_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    tasks = tasks_file(tmp_path, ["x"])
    shown = subprocess.run(
        fleet_argv(tmp_path, tasks, f"127.0.0.1:{free_port()}"), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=CLI_TIMEOUT,
        env=driver_env(tmp_path))
    assert shown.returncode != 0
    assert "Traceback" not in shown.stderr, shown.stderr[-3000:]
    assert "cannot reach the Ray cluster at 127.0.0.1:" in shown.stderr
    assert "ray start --head" in shown.stderr  # and what to do about it


def test_resume_on_ray_after_the_driver_is_killed(tmp_path: Path, head: RayNode) -> None:
    ids = [f"k{i}" for i in range(5)]
    tasks = tasks_file(tmp_path, ids, sleep=1.0)
    results = tmp_path / "out" / "results.jsonl"
    driver = subprocess.Popen(fleet_argv(tmp_path, tasks, head.address, "--workers", "1"),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=driver_env(tmp_path))
    try:
        wait_for(lambda: results.exists() and results.read_text().count("\n") >= 2,
                 timeout=CLI_TIMEOUT)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    before = results.read_text()
    assert before.endswith("\n") and 2 <= before.count("\n") < 5
    first = [json.loads(line)["id"] for line in before.splitlines()]
    again = run_fleet(tmp_path, tasks, head.address, "--workers", "2")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{len(first)} skipped: already there" in again.stdout
    after = results.read_text()
    assert after.startswith(before)  # nothing recorded before was touched
    ran = [json.loads(line)["id"] for line in after.splitlines()]
    assert sorted(ran) == ids  # each task exactly once: none repeated, none lost
    assert all(r["status"] == "done" and r["verified"] for r in recorded(tmp_path))
    preds = json.loads((tmp_path / "out" / "preds.json").read_text())
    assert sorted(p["instance_id"] for p in preds) == ids
    # what the killed driver's attempt left (its copy, its `sleep`) was swept by the rerun
    assert leftovers(tmp_path / "cache") == [] and marked_processes() == []


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat[stat.rfind(")") + 2 :].split()[1])
    return False


def test_a_lost_node_retries_its_task_on_another(tmp_path: Path, head: RayNode) -> None:
    """A second node joins the cluster; its raylet is killed while it runs a task. The task
    is retried on the head node, the others go on, and the driver does not hang. Each task
    waits for `go` (three tasks, three CPUs: one runs on the second node), made once the
    node is lost."""
    side = RayNode(1, address=head.address)
    gate = Path(tempfile.mkdtemp(prefix="loki-gate-", dir="/var/tmp"))
    try:
        ids = ["n0", "n1", "n2"]
        tasks = tasks_file(tmp_path, ids, until=gate / "go")
        lost: list[str] = []

        def kill_the_side_node() -> None:
            deadline = time.monotonic() + CLI_TIMEOUT / 2
            try:
                raylet = side.raylet()
                while not lost and time.monotonic() < deadline:
                    for name in ids:
                        if any(_descends_from(pid, raylet)
                               for pid in attempt_pids(tmp_path / "cache", name)):
                            os.kill(raylet, signal.SIGKILL)  # the node is lost mid-task
                            lost.append(name)
                            return
                    time.sleep(0.05)
            finally:
                (gate / "go").touch()

        watcher = threading.Thread(target=kill_the_side_node, daemon=True)
        watcher.start()
        shown = run_fleet(tmp_path, tasks, head.address, "--workers", "3")
        watcher.join(5)
        assert lost, "no task ran on the second node"
        assert shown.returncode == 0, (shown.stdout, shown.stderr[-3000:])
        results = {r["id"]: r for r in recorded(tmp_path)}
        assert sorted(results) == ids
        victim = results[lost[0]]
        assert victim["status"] == "done" and len(victim["attempts"]) == 2, victim
        assert "attempt 1: the node running it died" in str(victim["reason"])
        assert all(len(results[n]["attempts"]) == 1 for n in ids if n != lost[0])
        assert all(r["verified"] for r in results.values())
        assert leftovers(tmp_path / "cache") == [] and marked_processes() == []
    finally:
        side.stop()
        shutil.rmtree(gate, ignore_errors=True)
    assert head.proc.poll() is None  # the head node lived through it
