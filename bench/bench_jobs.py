"""What background jobs cost, side by side with foreground commands.

- drain: a command printing ``--mb`` MB, read to its end through ``job_output`` (wait=5,
  in a loop) vs the same command through ``run`` vs bash writing to /dev/null; time and
  the agent's peak RSS growth (VmHWM, reset before each case);
- reply: ``job_input`` to a ``cat`` job (a line in, the same line back) vs a whole
  ``run("echo x")``; job_input waits for the reply and then 0.1 s of quiet (QUIET);
- settle: a ``write_file`` on a ``--files``-file tree with a job running (the tracker is
  open and settled before and after the call) vs with no job;
- stop: ``job_stop`` of a job that exits on SIGINT.

Usage: PYTHONPATH=src python bench/bench_jobs.py [--mb 512] [--rounds 15] [--files 5000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _timing import median_ms
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def measured(fn: Callable[[], object]) -> tuple[float, float]:
    """(seconds, peak RSS growth in MB) of one call."""
    Path("/proc/self/clear_refs").write_text("5")
    base = peak_kb()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start, (peak_kb() - base) / 1024


def drain_job(box: Toolbox, command: str) -> None:
    obs = box.call("run", {"command": command, "background": True})
    job = int(obs.split()[2].rstrip(":"))
    while not box.call("job_output", {"job": job, "wait": 5}).startswith("exit="):
        pass


def drain(box: Toolbox, mb: int) -> None:
    command = f"head -c {mb << 20} /dev/zero | tr '\\0' a"
    cases = {
        "bash > /dev/null": lambda: subprocess.run(["bash", "-c", command + " > /dev/null"],
                                                   check=True),
        "run (foreground)": lambda: box.call("run", {"command": command, "timeout": 600}),
        "job + job_output": lambda: drain_job(box, command),
    }
    print(f"\ndrain {mb} MB of output")
    results = {name: measured(fn) for name, fn in cases.items()}
    base = results["run (foreground)"][0]
    for name, (secs, grew) in results.items():
        print(f"  {name:18} {secs:7.2f} s  x{secs / base:5.2f} of run   peak RSS +{grew:6.1f} MB")


def reply(box: Toolbox, rounds: int) -> None:
    obs = box.call("run", {"command": "cat", "background": True})
    job = int(obs.split()[2].rstrip(":"))
    echo = median_ms(lambda: box.call("run", {"command": "echo x"}), rounds)
    line = median_ms(lambda: box.call("job_input", {"job": job, "text": "x"}), rounds)
    box.call("job_stop", {"job": job})
    print(f"\nreply: run('echo x') {echo:7.1f} ms   job_input to cat {line:7.1f} ms   "
          f"x{line / echo:.2f}")


def settle(root: Path, files: int, rounds: int) -> None:
    for i in range(files):
        folder = root / f"d{i % 50}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i}.txt").write_text("x\n")
    with filesystem_toolbox(root) as box:
        box.call("run", {"command": "true"})  # the inotify view is built once

        def write() -> object:
            return box.call("write_file", {"path": "note.txt", "content": str(time.time())})

        alone = median_ms(write, rounds)
        box.call("run", {"command": "sleep 600", "background": True})
        beside = median_ms(write, rounds)
    print(f"\nsettle ({files} files): write_file {alone:6.2f} ms alone, {beside:6.2f} ms with "
          f"a job running  x{beside / alone:.2f}")


def stop(box: Toolbox, rounds: int) -> None:
    times = []
    for _ in range(rounds):
        obs = box.call("run", {"command": "sleep 600", "background": True})
        job = int(obs.split()[2].rstrip(":"))
        start = time.perf_counter()
        box.call("job_stop", {"job": job})
        times.append((time.perf_counter() - start) * 1000)
    print(f"\nstop: job_stop of a job that exits on SIGINT {statistics.median(times):7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--files", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir="/var/tmp") as small, \
            filesystem_toolbox(small) as box:
        drain(box, args.mb)
        reply(box, args.rounds)
        stop(box, max(3, args.rounds // 3))
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tree:
        settle(Path(tree), args.files, args.rounds)


if __name__ == "__main__":
    main()
