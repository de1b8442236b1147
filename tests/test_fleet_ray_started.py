"""A Ray cluster the fleet starts itself honours ``workers``: it is given the CPUs that
many attempts need, not one per core (on a 2-core machine Ray ran 2 at once whatever
``workers`` said). No other test's cluster may be running in this process: the fleet
starts its own and shuts it down when it ends."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from fleet_kit import attempt_pids, done, make_repo, run, wait_for, write_script
from yggdrasil.loki.fleet import Fleet, Task

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.xdist_group("ray")  # beside the run's cluster, not beside its tests


def test_a_fleet_started_cluster_runs_as_many_attempts_as_workers(tmp_path: Path) -> None:
    assert not ray.is_initialized()
    repo = tmp_path / "repo"
    make_repo(repo, {"a.txt": "a\n"})
    scripts = tmp_path / "s"
    # one more attempt than the machine has cores (Ray's own default: one CPU a core; at
    # most 5, each is a Ray worker process), so a cluster that ignored ``workers`` could not
    # run them all at once; each waits for `go` (outside /tmp: a command's /tmp is its own),
    # made once all run; had Ray run fewer at once, they would end in turns after the wait
    workers = min((os.cpu_count() or 1) + 1, 5)
    gate = Path(tempfile.mkdtemp(prefix="loki-gate-", dir="/var/tmp"))
    for i in range(workers):
        write_script(scripts, f"t{i}", run(f"while [ ! -e {gate}/go ]; do sleep 0.05; done"),
                     done())
    tasks = [Task(id=f"t{i}", repo=str(repo), prompt="x") for i in range(workers)]
    ran = Fleet("scripted", model=str(scripts / "{id}.jsonl"), backend="ray", workers=workers,
                out=tmp_path / "out", cache_dir=tmp_path / "cache")

    def open_the_gate() -> None:
        try:
            wait_for(lambda: all(attempt_pids(tmp_path / "cache", t.id) for t in tasks), 300)
        finally:
            (gate / "go").touch()

    opener = threading.Thread(target=open_the_gate, daemon=True)
    opener.start()
    try:
        results = list(ran.run(tasks))
    finally:
        opener.join(5)
        shutil.rmtree(gate, ignore_errors=True)
    assert not ray.is_initialized()  # the fleet's cluster is gone with it
    assert [r.status for r in results] == ["done"] * workers, [r.reason for r in results]
    spans = [(r.attempts[0]["started_at"], r.attempts[0]["ended_at"]) for r in results]
    latest_start = max(start for start, _ in spans)
    earliest_end = min(end for _, end in spans)
    assert latest_start < earliest_end  # all ran at once
    assert ran.status.notes == []
