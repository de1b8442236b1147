"""Background jobs with real processes: start, read, answer, stop, list; a model's sequence."""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from jobs_kit import GUARD, read_until_exit, sections, start, started_id, wait_for_file
from procs import NS_PID, settles_dead
from yggdrasil.loki.settings import OutputsSettings, Settings
from yggdrasil.loki.shell import JobLimits, _jobs
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def inside(thread: threading.Thread, function: str, timeout: float = GUARD) -> None:
    """Return once ``thread`` is running ``function`` (a frame of its stack has that
    name): the event a test waits on instead of a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        frame = sys._current_frames().get(thread.ident or -1)
        while frame is not None and frame.f_code.co_name != function:
            frame = frame.f_back
        if frame is not None:
            return
        assert thread.is_alive() and time.monotonic() < deadline, f"never in {function}"
        time.sleep(0.005)


@pytest.fixture
def box(root: Path):  # type: ignore[no-untyped-def]
    with filesystem_toolbox(root) as toolbox:
        yield toolbox


def test_a_model_starts_a_server_reads_its_port_fetches_a_page_and_stops_it(
        root: Path, box: Toolbox) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    (root / "index.html").write_text("<p>served by the job</p>\n")
    job, obs = start(box, f"echo $$ {NS_PID} > server.pid; "
                          "exec python -m http.server 0 --bind 127.0.0.1")
    assert obs.startswith(f"started job {job}: echo $$")
    seen = obs
    while not (port := re.search(r"port (\d+)", seen)):
        seen = box.call("job_output", {"job": job, "wait": 10})
        assert seen.startswith(f"job {job} running"), seen
    page = box.call("run", {"command": f"curl -s http://127.0.0.1:{port.group(1)}/index.html"})
    assert page.startswith("exit=0\nstdout:\n<p>served by the job</p>")
    assert f"Background jobs running: job {job} `echo" in box.status
    stopped = box.call("job_stop", {"job": job})
    state, _, err = sections(stopped)
    assert state.startswith("exit=") and "stopped by job_stop: it exited on SIGINT" in state
    assert '"GET /index.html HTTP/1.1" 200' in err
    assert settles_dead(root / "server.pid")
    assert "Background jobs running" not in box.status
    assert "server.pid" in box.changed


def test_the_start_shows_the_first_second_and_reads_continue_after_it(box: Toolbox) -> None:
    job, obs = start(box, "echo early; sleep 2; echo late")
    state, out, _ = sections(obs)
    assert state == f"job {job} running" and out == "early\n"
    final, out, _, _ = read_until_exit(box, job)
    assert final == "exit=0" and out == "late\n"


def test_incremental_output_is_exact_across_many_reads(root: Path) -> None:
    # 20,000 numbered lines on both streams, in bursts, read while they come
    code = ("import sys, time\n"
            "for i in range(20000):\n"
            "    print(f'out {i}')\n"
            "    print(f'err {i}', file=sys.stderr)\n"
            "    if i % 50 == 0: time.sleep(0.01)\n")
    # no read falls behind the buffer, and none is cut however late it comes on a busy machine
    whole = Settings(outputs=OutputsSettings(observation_tokens=1_000_000,
                                             stream_tokens=1_000_000))
    with filesystem_toolbox(root, settings=whole, job_buffer=1 << 20) as box:
        obs = box.call("run_python", {"code": code, "background": True})
        job = started_id(obs)
        _, first_out, first_err = sections(obs)
        state, out, err, reads = read_until_exit(box, job)
    assert state == "exit=0" and reads >= 3
    assert first_out + out == "".join(f"out {i}\n" for i in range(20000))
    assert first_err + err == "".join(f"err {i}\n" for i in range(20000))


def test_a_character_split_across_two_reads_is_shown_whole(box: Toolbox) -> None:
    job, obs = start(box, r"printf 'caf\303'; sleep 1.5; printf '\251!\n'")
    assert sections(obs)[1] == "caf"
    _, out, _, _ = read_until_exit(box, job)
    assert out == "é!\n"


def _peak_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/self/status")


def test_a_job_printing_a_gigabyte_keeps_the_agent_memory_flat(box: Toolbox) -> None:
    # the tokenizer's table (tiktoken's o200k_base, loaded once per process when a cut is
    # first counted in tokens) is a fixed cost, not the job's output: loaded before the mark
    box.outputs.tokens.count("warm " * 20_000)
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS mark (VmHWM)
    base = _peak_rss_kb()
    job, obs = start(box, "head -c 1073741824 /dev/zero | tr '\\0' a; echo END >&2")
    state, out, err, _ = read_until_exit(box, job)
    out, err = sections(obs)[1] + out, sections(obs)[2] + err
    grew_mb = (_peak_rss_kb() - base) / 1024
    assert state == "exit=0" and err == "END\n"
    assert "of output cut from the middle (more came between two reads than job_buffer" in out
    assert len(out) < 1_000_000
    assert "output 1.0 GB" in box.call("jobs", {})
    assert grew_mb < 64, f"peak RSS grew by {grew_mb:.0f} MB while a job printed 1 GB"


def test_a_middle_cut_keeps_the_buffer_size_and_says_so(root: Path) -> None:
    with filesystem_toolbox(root, job_buffer=4096) as box:
        job, _ = start(box, "while [ ! -e go ]; do sleep 0.01; done; seq 1 100000; echo last")
        (root / "go").touch()  # after the start's first look: it reads none of it
        deadline = time.monotonic() + GUARD
        while not re.search(rf"job {job}  exit=0 ", box.call("jobs", {})):  # no read meanwhile
            assert time.monotonic() < deadline, box.call("jobs", {})
            time.sleep(0.02)
        state, out, _ = sections(box.call("job_output", {"job": job, "wait": 5}))
    assert state == "exit=0"
    assert out.startswith("1\n2\n3\n") and out.endswith("99999\n100000\nlast\n")
    assert "of output cut from the middle" in out
    assert len(out.encode()) < 4096 + 400  # the buffer, and the note with the kept id


def test_job_input_answers_the_prompts_of_a_python_script(root: Path, box: Toolbox) -> None:
    code = ("name = input('name? ')\n"
            "print('hello', name)\n"
            "age = int(input('age? '))\n"
            "print('next year', age + 1)\n")
    obs = box.call("run_python", {"code": code, "background": True})
    job = started_id(obs)
    assert sections(obs)[1] == "name? "
    answer = box.call("job_input", {"job": job, "text": "Ada"})
    assert answer.startswith(f"job {job}: sent 4 bytes to its stdin\n")
    assert "hello Ada\nage? " in sections(answer)[1]
    answer = box.call("job_input", {"job": job, "text": "41\n"})
    state, out, _ = sections(answer)
    if state.endswith("running"):  # it may exit a moment after it answered
        state, more, _, _ = read_until_exit(box, job)
        out += more
    assert state == "exit=0" and out == "next year 42\n"
    ended = box.call("job_input", {"job": job, "text": "more"})
    assert ended.startswith(f"ERROR: job {job} has ended (exit=0); it reads no more input")


def test_job_input_drives_python_interactive_and_eof_ends_it(box: Toolbox) -> None:
    job, _ = start(box, "python -i -q")
    box.call("job_input", {"job": job, "text": "x = 6 * 7"})
    out = sections(box.call("job_input", {"job": job, "text": "print(x)"}))[1]
    assert out == "42\n"
    out = sections(box.call("job_input", {"job": job, "text": "def f(n):\n    return n * 2\n\n"}))
    assert "Error" not in out[2]
    assert sections(box.call("job_input", {"job": job, "text": "f(21)"}))[1] == "42\n"
    closed = box.call("job_input", {"job": job, "text": "", "eof": True})
    assert closed.startswith(f"job {job}: closed its stdin\n")
    state, _, _, _ = read_until_exit(box, job)
    assert state == "exit=0"


def test_an_empty_line_is_enter_and_a_closed_stdin_is_refused(box: Toolbox) -> None:
    job, _ = start(box, "read a; echo got=[$a]; cat")
    assert sections(box.call("job_input", {"job": job, "text": ""}))[1] == "got=[]\n"
    out = sections(box.call("job_input", {"job": job, "text": "tail", "eof": True}))[1]
    state, more, _, _ = read_until_exit(box, job)
    assert state == "exit=0" and out + more == "tail\n"
    refused = box.call("job_input", {"job": job, "text": "again"})
    assert refused.startswith(f"ERROR: job {job} has ended")


def test_jobs_lists_state_age_size_and_command(box: Toolbox) -> None:
    assert box.call("jobs", {}) == "no jobs; run(command, background=true) starts one"
    first, _ = start(box, "echo done")
    second, _ = start(box, "echo still; sleep 300")
    listed = box.call("jobs", {})
    assert listed.startswith("1 of at most 8 jobs running\n")
    assert re.search(rf"job {first}  exit=0  \d+s  output 5 bytes  echo done", listed)
    assert re.search(rf"job {second}  running  \d+s  output 6 bytes  echo still; sleep 300", listed)
    assert f"job {second} `echo still; sleep 300`" in box.status


def test_a_job_changes_files_between_calls_and_revert_covers_it(root: Path, box: Toolbox) -> None:
    (root / "old.txt").write_text("old\n")
    # It starts changing files once its start returned (the gate: outside /tmp, which is the
    # command's own), and no tool call comes until its last step: none can see made3 come.
    gate = Path(tempfile.mkdtemp(prefix="loki-gate-", dir="/var/tmp"))
    try:
        job, _ = start(box, f"while [ ! -e {gate}/go ]; do sleep 0.01; done; "
                            "for i in 1 2 3; do echo $i > made$i.txt; sleep 0.3; done; "
                            "echo gone > made2.txt; rm made3.txt")
        (gate / "go").touch()
        deadline = time.monotonic() + GUARD
        while (root / "made3.txt").exists() or not (root / "made2.txt").exists() \
                or (root / "made2.txt").read_text() != "gone\n":
            assert time.monotonic() < deadline, sorted(p.name for p in root.iterdir())
            time.sleep(0.02)
    finally:
        shutil.rmtree(gate, ignore_errors=True)
    box.call("write_file", {"path": "mine.txt", "content": "by the tool\n"})
    read_until_exit(box, job)
    obs = box.call("job_output", {"job": job})
    assert obs.split("changed:\n", 1)[1].splitlines() == ["created made1.txt",
                                                          "created made2.txt"]
    assert set(box.changed) == {"made1.txt", "made2.txt", "mine.txt"}  # made3: come and gone
    report = box.revert()
    assert not report.not_reverted, report
    assert sorted(p.name for p in root.iterdir()) == ["old.txt"]


def test_a_file_a_job_modified_is_reported_and_not_restorable(root: Path, box: Toolbox) -> None:
    (root / "keep.txt").write_text("kept\n")
    job, _ = start(box, "sleep 0.3; echo more >> keep.txt")
    read_until_exit(box, job)
    assert box.changes == {"keep.txt": "modified"}
    assert "keep.txt" in box.revert().not_reverted  # no copy: a command changed it


def test_what_a_job_changes_after_the_last_call_is_settled_when_it_ends(
        root: Path, box: Toolbox) -> None:
    start(box, "sleep 1.5; echo late > late.txt")
    deadline = time.monotonic() + 30
    while "late.txt" not in box.changed:  # no tool call in between: the job's end settles it
        assert time.monotonic() < deadline, box.changed
        time.sleep(0.05)
    assert box.changes["late.txt"] == "created"


def test_the_call_that_shows_a_jobs_exit_shows_what_it_changed(
        root: Path, box: Toolbox, monkeypatch: pytest.MonkeyPatch) -> None:
    # The job's end settles in its watcher thread while job_output returns on the same end:
    # twenty rounds, so that a race between the two cannot pass by luck. Each job ends when
    # told to, after its start returned (which waits 0.05 s here, not its usual second).
    monkeypatch.setattr(_jobs, "FIRST_LOOK", 0.05)
    for n in range(20):
        job, _ = start(box, f"while [ ! -e go-{n} ]; do sleep 0.01; done; "
                            f"echo {n} > made-by-job-{n}.txt; echo wrote")
        (root / f"go-{n}").touch()
        while True:
            obs = box.call("job_output", {"job": job, "wait": 2})
            if sections(obs)[0].startswith("exit="):
                break
        # (go-N, made while the job ran, is in its changes too)
        assert f"created made-by-job-{n}.txt\n" in obs.partition("\nchanged:\n")[2], (n, obs)
        assert f"made-by-job-{n}.txt" in box.changed, (n, box.changed)


def test_a_running_jobs_changes_are_in_the_next_calls_observation(root: Path, box: Toolbox) -> None:
    job, _ = start(box, "echo go > started; while true; do date > clock.txt; sleep 0.1; done")
    wait_for_file(root / "started")
    observed = box.run("job_output", {"job": job, "wait": 0.5})
    # the job changed it, not the read: in the run's changes and the job's section
    assert "created clock.txt" in observed.text and "clock.txt" in box.changed
    assert observed.changed == ()
    written = box.run("write_file", {"path": "note.txt", "content": "x"})
    assert written.changed == ("note.txt",)  # the job's writes meanwhile are not the tool's
    box.call("job_stop", {"job": job})


def test_a_ninth_job_is_refused_with_what_is_allowed(root: Path) -> None:
    assert JobLimits().max_jobs == 8
    with filesystem_toolbox(root, max_jobs=2) as box:
        start(box, "sleep 300")
        start(box, "sleep 301")
        refused = box.call("run", {"command": "echo third", "background": True})
        assert refused.startswith("ERROR: 2 jobs are running, the most this toolbox allows "
                                  "(max_jobs=2); stop one with job_stop(job=N) first. Running: "
                                  "1 `sleep 300`, 2 `sleep 301`")
        box.call("job_stop", {"job": 1})
        assert box.call("run", {"command": "echo third", "background": True}).startswith(
            "started job 3: echo third")
    with filesystem_toolbox(root, max_jobs=0) as box:
        assert box.call("run", {"command": "true", "background": True}).startswith(
            "ERROR: background jobs are off in this toolbox (max_jobs=0)")


def test_a_job_past_its_lifetime_is_stopped_with_a_note(root: Path) -> None:
    with filesystem_toolbox(root, job_lifetime=1) as box:
        job, _ = start(box, f"echo $$ {NS_PID} > life.pid; sleep 300")
        state, _, _, _ = read_until_exit(box, job)
    assert state.startswith("exit=") and "stopped by its lifetime of 1s (job_lifetime)" in state
    assert settles_dead(root / "life.pid")


def test_bad_job_arguments_are_clear_errors(box: Toolbox) -> None:
    assert box.call("job_output", {"job": 1}) == (
        "ERROR: no job 1: no background job was started yet; run(command, background=true) "
        "starts one")
    start(box, "true")
    assert box.call("job_stop", {"job": 7}).startswith(
        "ERROR: no job 7; the jobs of this toolbox are 1 (")
    for wait in (-1, 1e9):
        out = box.call("job_output", {"job": 1, "wait": wait})
        assert out.startswith(f"ERROR: argument 'wait' must be between 0 and 60, got {wait!r}")
    assert box.call("job_output", {"job": 0}).startswith("ERROR: argument 'job' must be")
    assert box.call("job_output", {"job": "one"}).startswith("ERROR: argument 'job'")
    too_long = box.call("job_input", {"job": 1, "text": "x" * 1_000_001})
    assert too_long.startswith("ERROR: argument 'text'") and "1000000" in too_long


def test_read_only_toolboxes_have_no_job_tools(root: Path) -> None:
    names = set(filesystem_toolbox(root, read_only=True).tools)
    assert not names & {"job_output", "job_input", "job_stop", "jobs", "run"}


def test_bad_limits_are_refused_when_the_toolbox_is_built(root: Path) -> None:
    for bad, match in (({"max_jobs": -1}, "max_jobs"), ({"job_lifetime": 0}, "job_lifetime"),
                       ({"job_buffer": 10}, "job_buffer")):
        with pytest.raises(ValueError, match=match):
            filesystem_toolbox(root, **bad)  # type: ignore[arg-type]


def test_a_job_output_wait_is_cut_short_by_cancel(box: Toolbox) -> None:
    job, _ = start(box, "sleep 300")
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    began = time.monotonic()
    obs = box.call("job_output", {"job": job, "wait": 60}, cancel=stop)
    assert obs.startswith(f"job {job} running") and time.monotonic() - began < 30


def test_reading_a_job_never_waits_behind_a_command_nor_holds_one_up(
        root: Path, box: Toolbox) -> None:
    """job_output and jobs change nothing: they answer while a foreground command runs
    (here one that waits for the test), and a job_output waiting for output does not hold
    up a write (it ends while the reader still waits)."""
    job = started_id(box.call("run", {"command": "echo ready; sleep 60", "background": True}))
    command = threading.Thread(target=box.call, args=(
        "run", {"command": "echo x > waiting; while [ ! -e go ]; do sleep 0.05; done"}))
    command.start()
    wait_for_file(root / "waiting")  # the foreground command holds the mutating lock now
    assert box.call("jobs", {}).startswith("1 of at most 8 jobs running")
    assert box.call("job_output", {"job": job}).startswith(f"job {job} running")
    assert command.is_alive()  # both answered while it ran
    (root / "go").touch()
    command.join()
    reader = threading.Thread(target=box.call, args=("job_output", {"job": job, "wait": 30}))
    reader.start()
    inside(reader, "wait_quietly")  # the reader waits for output now
    assert box.invoke("write_file", {"path": "w.txt", "content": "x"}).data.created
    assert reader.is_alive()  # the write did not wait the reader's 30 s out
    box.call("job_stop", {"job": job})
    reader.join()
