"""Driving background jobs from a test: parse their observations, wait for them to end."""

from __future__ import annotations

import re
import time

from yggdrasil.loki.tools import Toolbox

GUARD = 60.0  # seconds: a guard against a hang, not a timing


def sections(observation: str) -> tuple[str, str, str]:
    """(state line, stdout, stderr) of a job observation (job_output, job_stop, a start)."""
    lines = observation.split("\n")
    if lines[0].startswith("started job ") or (lines[0].startswith("job ") and ": " in lines[0]):
        lines = lines[1:]
    state, rest = lines[0], "\n".join(lines[1:])
    assert rest.startswith("stdout:\n"), observation
    out, found, err = rest[len("stdout:\n"):].partition("\nstderr:\n")
    assert found, observation
    # what follows the sections, last first: the start's hint, changes, a held-open note
    for trailer in ("\n[job_output(job=", "\nchanged:\n", "\n[a background process",
                    "\nproxy:\n"):
        at = err.rfind(trailer)
        if at >= 0:
            err = err[: at + 1]
    assert err.endswith("\n"), observation  # each section ends with a newline of its own
    return state, out, err[:-1]


def started_id(observation: str) -> int:
    match = re.match(r"started job (\d+): ", observation)
    assert match, observation
    return int(match.group(1))


def read_until_exit(box: Toolbox, job: int) -> tuple[str, str, str, int]:
    """job_output until the job ends: (final state, all stdout, all stderr, reads)."""
    outs, errs, reads = [], [], 0
    deadline = time.monotonic() + GUARD * 5
    while True:
        assert time.monotonic() < deadline, "the job never ended"
        obs = box.call("job_output", {"job": job, "wait": 5})
        assert not obs.startswith("ERROR"), obs
        state, out, err = sections(obs)
        outs.append(out)
        errs.append(err)
        reads += 1
        if state.startswith("exit="):
            return state, "".join(outs), "".join(errs), reads


def start(box: Toolbox, command: str, **args: object) -> tuple[int, str]:
    """Start ``command`` as a background job: (its id, the start observation)."""
    obs = box.call("run", {"command": command, "background": True, **args})
    return started_id(obs), obs


def wait_for_file(path: object, seconds: float = GUARD) -> None:
    from pathlib import Path

    target = Path(str(path))
    deadline = time.monotonic() + seconds
    while not (target.exists() and target.stat().st_size):
        assert time.monotonic() < deadline, f"{target.name} never appeared"
        time.sleep(0.02)
