"""Outputs that lose nothing: a cut output is kept whole, named by an id that read_file
and grep accept, and its cut keeps the lines that look like errors. Real commands, real
files, a real loop with the scripted engine."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from yggdrasil.loki import Loki
from yggdrasil.loki.engines.scripted import ScriptedEngine
from yggdrasil.loki.outputs import ESTIMATE, Spill, SpillLimits, Tokens
from yggdrasil.loki.settings import OutputsSettings, Settings
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

LONG = ("import sys\n"
        "for i in range(20000): print('line', i)\n"
        "print('Traceback (most recent call last):')\n"
        "print('  File \"app.py\", line 3, in <module>')\n"
        "print('ValueError: the one that matters')\n"
        "for i in range(20000): print('more', i)\n")


def toolbox(root: Path, **outputs: object) -> Toolbox:
    return filesystem_toolbox(root, settings=Settings(outputs=OutputsSettings(**outputs)))


def test_a_cut_stdout_is_kept_whole_and_its_error_lines_are_shown(root: Path) -> None:
    with toolbox(root) as box:
        done = box.invoke("run_python", {"code": LONG})
        out = done.data.stdout
        assert out.cut > 0 and out.kept.startswith("output://")
        assert [(e.line, e.text) for e in out.errors] == [
            (20001, "Traceback (most recent call last):"),
            (20002, '  File "app.py", line 3, in <module>'),
            (20003, "ValueError: the one that matters")]
        assert (f"of output cut from the middle; the whole stdout is kept as {out.kept}: "
                f"read_file(path='{out.kept}', start=N)") in done.text
        assert "20003\tValueError: the one that matters" in done.text
        window = box.invoke("read_file", {"path": out.kept, "start": 20002, "end": 20004})
        matches = box.invoke("grep", {"pattern": "ValueError", "path": out.kept})
        last = box.invoke("read_file", {"path": out.kept, "start": 40003})
    assert window.text.splitlines()[:3] == [
        '20002\t  File "app.py", line 3, in <module>',
        "20003\tValueError: the one that matters", "20004\tmore 0"]
    assert [(m.path, m.line) for m in matches.data.matches] == [(out.kept, 20003)]
    assert last.text.splitlines()[0] == "40003\tmore 19999"


def test_an_uncut_output_reads_exactly_as_before(root: Path) -> None:
    with toolbox(root) as box:
        done = box.invoke("run", {"command": "printf 'hi\\n'; printf 'oops\\n' >&2"})
        small = box.invoke("run_python", {"code": "print('x' * 30000)"})
    assert done.text.startswith("exit=0\nstdout:\nhi\n\nstderr:\noops\n")
    assert done.data.stdout.kept == "" and done.data.stdout.errors == []
    assert small.data.stdout.cut == 0 and small.data.stdout.text() == "x" * 30000 + "\n"
    assert small.text == f"exit=0\nstdout:\n{'x' * 30000}\n\nstderr:\n"


def test_ids_of_another_session_or_with_dots_are_refused(root: Path) -> None:
    with toolbox(root) as one, toolbox(root) as other:
        kept = one.invoke("run_python", {"code": LONG}).data.stdout.kept
        theirs = other.invoke("read_file", {"path": kept})
        dots = one.invoke("read_file", {"path": "output://../../etc/passwd"})
        grep = one.invoke("grep", {"pattern": "root", "path": kept.rsplit("/", 1)[0] + "/../1"})
        missing = one.invoke("read_file", {"path": kept.rsplit("/", 1)[0] + "/99"})
    assert theirs.is_error and "is not an output of this session" in theirs.text
    assert dots.is_error and "is not an output id" in dots.text
    assert grep.is_error and "is not an output id" in grep.text
    assert missing.is_error and "is not kept" in missing.text


@pytest.fixture
def cache_outside_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """XDG_CACHE_HOME outside /tmp, as ~/.cache is (the suite's own lies under /tmp): a
    command's /tmp is private and would hide a spill folder there whether or not the fence
    hides it."""
    cache = Path(tempfile.mkdtemp(prefix="loki-spill-", dir="/var/tmp"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    yield cache
    shutil.rmtree(cache, ignore_errors=True)


def test_the_spill_folder_is_outside_the_root_and_hidden_from_commands(
        root: Path, cache_outside_tmp: Path) -> None:
    with toolbox(root) as box:
        kept = box.invoke("run_python", {"code": LONG}).data.stdout.kept
        assert box.outputs.spill is not None
        path = box.outputs.spill.path_of(kept)
        assert not path.is_relative_to(root)
        assert path.is_relative_to(cache_outside_tmp)  # not under /tmp
        assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
        if box.fence.startswith(("UNFENCED", "refused")):
            pytest.skip(f"commands are not fenced here ({box.fence})")
        peek = box.invoke("run", {"command": f"cat {path} | head -3"})
    assert "line 0" not in peek.data.stdout.text()


def test_a_200_mb_output_keeps_its_first_part_in_bounded_memory(root: Path) -> None:
    with toolbox(root, spill_bytes=4 << 20) as box:
        done = box.invoke("run", {"command": "head -c 209715200 /dev/zero | tr '\\0' 'a' "
                                             "| fold -w 100; echo FAILED at the end"})
    out = done.data.stdout
    assert out.bytes > 209715200  # every byte counted
    assert out.dropped == out.bytes - (4 << 20)
    assert "the whole stdout is kept (its first 4.0 MB only)" in done.text
    assert out.tail.endswith("FAILED at the end\n")
    assert len(done.text) < 60_000


def test_a_job_read_that_was_cut_keeps_what_came_between_reads(root: Path) -> None:
    with toolbox(root) as box:
        started = box.invoke("run_python", {"code": LONG, "background": True})
        job = started.data.job
        report = started.data.report if started.data.report.stdout.kept else None
        for _ in range(200):  # each read waits up to 5 s for the job's output or end
            seen = box.invoke("job_output", {"job": job, "wait": 5})
            if seen.data.stdout.kept:
                report = seen.data
            if not seen.data.state.running:
                break
        assert report is not None, "no read of the job was cut"
        whole = box.outputs.spill.path_of(report.stdout.kept).read_text()
    assert report.stdout.bytes == len(whole.encode())
    assert whole.startswith("line 0\n") or whole.startswith("line ")


def test_an_over_long_answer_of_any_tool_is_cut_in_tokens_and_kept(root: Path) -> None:
    def shout() -> str:
        """A custom tool with a huge answer."""
        body = [f"row {i}" for i in range(60000)]
        body[30000] = "ERROR: row 30000 broke"
        return "\n".join(body)

    with toolbox(root, observation_tokens=2000) as box:
        box.tool(shout)
        done = box.invoke("shout", {})
        kept = done.text.split("kept as ")[1].split(":")[0] + ":" + \
            done.text.split("kept as ")[1].split(":")[1]
        whole = box.invoke("read_file", {"path": kept, "start": 30001, "end": 30001})
    assert box.outputs.tokens.count(done.text) <= 2000
    assert "30001\tERROR: row 30000 broke" in done.text
    assert whole.text.startswith("30001\tERROR: row 30000 broke")


def test_a_step_of_the_loop_is_cut_in_tokens_and_kept(root: Path) -> None:
    script = [{"tool": "run_python", "args": {"code": LONG}},
              {"done": True, "answer": "ok"}]
    settings = Settings(outputs=OutputsSettings(step_tokens=1000))
    result = Loki(ScriptedEngine(script), settings=settings).act("x", root=root)
    observation = result.steps[0].observation
    assert Tokens().count(observation) <= 1000
    assert "output://" in observation and "ValueError: the one that matters" in observation


def test_old_and_oversized_spills_expire(tmp_path: Path) -> None:
    old = tmp_path / "0badc0de"
    old.mkdir()
    (old / "1").write_bytes(b"x" * 10)
    past = time.time() - 10 * 86400
    os.utime(old / "1", (past, past))
    spill = Spill(tmp_path, SpillLimits(max_bytes=1 << 20, max_total=3000, max_age=86400))
    assert spill.prepare() and not old.exists()
    first, second = spill.keep("a" * 2000), spill.keep("b" * 2000)
    assert first is not None and second is not None
    with pytest.raises(ValueError, match="is not kept"):
        spill.path_of(first)  # the oldest went to make room
    assert spill.path_of(second).read_text() == "b" * 2000


def test_a_sweep_reads_the_shared_folder_at_most_once_a_minute(tmp_path: Path) -> None:
    """Each toolbox swept every session folder at its start and after every kept output:
    with tens of thousands of folders left by earlier sessions, each start and each cut
    output paid ~0.3 s. A sweep now runs when the last one (any toolbox's: the .swept
    file) is a minute old, or when this session has kept a sixteenth of max_total since."""
    limits = SpillLimits(max_bytes=1 << 20, max_total=16_000, max_age=86400)
    past = time.time() - 10 * 86400

    def expired(name: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "1").write_bytes(b"x")
        os.utime(folder / "1", (past, past))
        return folder

    first = expired("0badc0de")
    assert Spill(tmp_path, limits).prepare() and not first.exists()  # never swept: now
    second = expired("0badc0df")
    spill = Spill(tmp_path, limits)
    assert spill.prepare() and second.exists()  # swept a moment ago by another session
    assert spill.keep("a" * 100) is not None and second.exists()  # a small output: not due
    assert spill.keep("b" * 1000) is not None and not second.exists()  # 1/16 kept: due
    third = expired("0badc0e0")
    marker = tmp_path / ".swept"
    os.utime(marker, (time.time() - 61, time.time() - 61))
    assert Spill(tmp_path, limits).prepare() and not third.exists()  # a minute on


def test_a_session_that_kept_nothing_leaves_no_folder(root: Path) -> None:
    box = filesystem_toolbox(root)
    spill = box.outputs.spill
    assert spill is not None and spill.folder.is_dir()  # made at the start (the fence)
    box.close()
    assert not spill.folder.exists()
    assert spill.keep("kept after close") is not None  # made again when needed
    kept = filesystem_toolbox(root)
    assert kept.outputs.spill is not None
    output_id = kept.outputs.spill.keep("x")
    kept.close()
    assert output_id is not None and kept.outputs.spill.path_of(output_id).read_text() == "x"


def test_tokens_are_counted_by_tiktoken_or_said_to_be_an_estimate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # no table there
    guess = Tokens()
    assert guess.counter == ESTIMATE and guess.count("abcdefgh") == 2
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    real = Tokens()
    if real.counter == ESTIMATE:
        if os.environ.get("CI"):
            pytest.fail("tiktoken's o200k_base table is missing in CI: .ci/run installs it")
        pytest.skip("tiktoken's o200k_base table is not installed here (.ci/run installs it)")
    assert real.counter == "o200k_base (tiktoken)"
    assert real.count("hello world") == 2
