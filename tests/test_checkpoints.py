"""Checkpoints after every step, and rewind: what tools, commands and jobs changed comes
back byte for byte and mode for mode, from real files, commands and git."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs_kit import read_until_exit
from yggdrasil.loki.errors import ToolError
from yggdrasil.loki.results import RewindResult, render_text
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

GIT = shutil.which("git")


def tree(root: Path) -> dict[str, tuple[str, int, bytes | str]]:
    """Every file and link below ``root`` (not .git's insides): kind, mode, bytes or target."""
    found: dict[str, tuple[str, int, bytes | str]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" and not os.path.islink(os.path.join(folder, d))]
        rel_dir = os.path.relpath(folder, root)
        if rel_dir != "." and not os.listdir(folder):
            found[rel_dir + "/"] = ("dir", 0, b"")
        names = files + [d for d in os.listdir(folder) if os.path.islink(os.path.join(folder, d))
                         and d not in files]
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("file", stat.S_IMODE(st.st_mode), Path(path).read_bytes())
            else:
                found[rel] = ("other", stat.S_IMODE(st.st_mode), b"")
    return found


def ok(result: object) -> None:
    assert getattr(result, "ok", True), getattr(result, "text", result)


def git(root: Path, *args: str) -> None:
    subprocess.run([GIT or "git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   cwd=root, check=True, capture_output=True)


@pytest.fixture
def project(root: Path) -> Path:
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "notes.txt").write_text("alpha\nbeta\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "data.bin").write_bytes(bytes(range(256)) * 40)
    (root / "old.txt").write_text("to go\n")
    return root


@pytest.mark.skipif(GIT is None, reason="needs git")
def test_every_step_rewinds_byte_for_byte_and_mode_for_mode(project: Path) -> None:
    root = project
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    box = filesystem_toolbox(root)
    states = {0: tree(root)}
    steps = [
        ("write_file", {"path": "new/made.txt", "content": "made\n"}),
        ("edit_file", {"path": "src/app.py", "old": "return 1", "new": "return 2"}),
        ("apply_patch", {"patch": "*** Begin Patch\n*** Update File: notes.txt\n alpha\n-beta\n"
                                  "+gamma\n*** Delete File: old.txt\n*** End Patch"}),
        ("run", {"command": "sed -i 's/hi/bye/' run.sh && chmod 700 run.sh"}),
        ("run", {"command": "mv notes.txt moved.txt && rm new/made.txt data.bin"}),
        ("run", {"command": "git checkout -q -- src/app.py data.bin old.txt"}),
    ]
    with box:
        for name, args in steps:
            done = box.invoke(name, args)
            ok(done)
            assert done.checkpoint == len(states)
            states[done.checkpoint] = tree(root)
        job = box.invoke("run", {"command": "printf 'from the job\\n' > job.txt && "
                                            "chmod 640 job.txt", "background": True})
        ok(job)
        assert read_until_exit(box, 1)[0] == "exit=0"
        done = box.invoke("write_file", {"path": "last.txt", "content": "last\n"})
        ok(done)
        assert any("job.txt" in c.paths for c in box.checkpoints().checkpoints)
        states[done.checkpoint] = tree(root)  # the job's file is in this state or before
        last = done.checkpoint
        for step in [*sorted(states, reverse=True), last, 3, 0, last]:
            if step not in states:
                continue
            result = box.rewind(step)
            assert isinstance(result, RewindResult)
            assert result.not_restored == [], render_text(result)
            assert tree(root) == states[step], step
    assert (root / "run.sh").stat().st_mode & 0o777 == 0o700


def test_a_dry_run_shows_the_diff_and_changes_nothing(box: Toolbox, root: Path) -> None:
    (root / "a.txt").write_text("one\n")
    ok(box.invoke("run", {"command": "echo two > a.txt"}))
    before = tree(root)
    result = box.rewind(0, dry_run=True)
    assert tree(root) == before
    assert [(r.path, r.action) for r in result.would_restore] == [("a.txt", "write")]
    assert result.restored == [] and result.checkpoint is None
    assert "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-two\n+one\n" in result.diff
    text = render_text(result)
    assert text.startswith("rewind to checkpoint 0 (dry run): would restore 1 path(s)\n"
                           "would be restored a.txt\n--- a/a.txt")


def test_paths_limit_a_rewind_and_a_path_outside_is_refused(box: Toolbox, root: Path) -> None:
    for name in ("a", "b"):
        (root / name).write_text(f"{name}\n")
    ok(box.invoke("run", {"command": "echo x > a; echo y > b"}))
    result = box.rewind(0, paths=["a", "../escape", "never-changed"])
    assert (root / "a").read_text() == "a\n" and (root / "b").read_text() == "y\n"
    why = {n.path: n.why for n in result.not_restored}
    assert "not inside the root" in why["../escape"]
    assert why["never-changed"] == "no step after this one changed it"


def test_a_file_changed_by_someone_else_since_is_never_overwritten(box: Toolbox,
                                                                   root: Path) -> None:
    (root / "a.txt").write_text("mine\n")
    ok(box.invoke("run", {"command": "echo agent > a.txt; echo agent > b.txt"}))
    (root / "a.txt").write_text("the user's edit\n")  # after the last checkpoint
    result = box.rewind(0)
    assert (root / "a.txt").read_text() == "the user's edit\n"
    assert not (root / "b.txt").exists()
    [kept] = result.not_restored
    assert kept.path == "a.txt" and "never overwritten" in kept.why


def test_a_step_that_does_not_exist_is_an_error(box: Toolbox, root: Path) -> None:
    ok(box.invoke("write_file", {"path": "a", "content": "a"}))
    with pytest.raises(ToolError, match="there is no checkpoint 5: this run has 0"):
        box.rewind(5)


def test_undo_edit_and_revert_still_work_from_the_store(box: Toolbox, root: Path) -> None:
    (root / "a.txt").write_text("original\n")
    ok(box.invoke("edit_file", {"path": "a.txt", "old": "original", "new": "changed"}))
    assert box.call("undo_edit", {"path": "a.txt"}) == (
        "restored a.txt to what it held before this run changed it")
    assert (root / "a.txt").read_text() == "original\n"
    box.call("read_file", {"path": "a.txt"})
    ok(box.invoke("write_file", {"path": "a.txt", "content": "again\n"}))
    done = box.revert()
    assert done.restored == ["a.txt"] and (root / "a.txt").read_text() == "original\n"
    assert box.journal is not None and box.journal.private_dirs() == []  # no temp copies
    # the rewind timeline heard the undo and the revert: rewinding is still exact
    assert box.rewind(1).not_restored == []
    assert (root / "a.txt").read_text() == "changed\n"


def test_a_rewind_is_a_step_of_its_own_and_can_be_undone(box: Toolbox, root: Path) -> None:
    ok(box.invoke("write_file", {"path": "a", "content": "one"}))
    ok(box.invoke("write_file", {"path": "a", "content": "two"}))
    first = box.rewind(1)
    assert first.checkpoint == 3 and (root / "a").read_text() == "one"
    box.rewind(2)
    assert (root / "a").read_text() == "two"
    assert [c.tool for c in box.checkpoints().checkpoints] == [
        "write_file", "write_file", "rewind", "rewind"]


def test_the_rewind_tool_is_off_by_default_and_lists_or_rewinds(root: Path) -> None:
    assert "rewind" not in filesystem_toolbox(root)
    box = filesystem_toolbox(root, rewind_tool=True)
    ok(box.invoke("write_file", {"path": "a", "content": "one"}))
    listed = box.invoke("rewind", {})
    assert listed.text.splitlines()[1] == "1  write_file  1 file(s): a"
    done = box.invoke("rewind", {"step": 0})
    assert done.ok and not (root / "a").exists()
    assert done.checkpoint == 2 and done.data is not None  # the listing changed nothing
    assert done.structured()["restored"] == [{"path": "a", "action": "remove"}]  # type: ignore[index]
    bad = box.invoke("rewind", {"step": -1})
    assert bad.is_error


def test_checkpoints_can_be_turned_off(root: Path) -> None:
    box = filesystem_toolbox(root, checkpoints=False)
    done = box.invoke("write_file", {"path": "a", "content": "x"})
    assert done.checkpoint is None and box.checkpointing is None
    with pytest.raises(ToolError, match="keeps no checkpoints"):
        box.checkpoints()


def test_the_store_is_outside_the_root_and_hidden_from_commands(box: Toolbox, root: Path) -> None:
    keeper = box.checkpointing
    assert keeper is not None
    folder = keeper.folder
    assert not folder.is_relative_to(root)
    ok(box.invoke("write_file", {"path": "a", "content": "x"}))
    done = box.invoke("run", {"command": f"ls {folder} && cat {folder}/store.db | head -c 10"})
    if "Landlock" in box.fence or "namespaces" in box.fence:
        assert done.data.exit_code != 0  # type: ignore[union-attr]


def test_a_state_folder_inside_the_root_turns_checkpoints_off(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOKI_STATE_DIR", str(root / "state"))
    box = filesystem_toolbox(root)
    assert box.checkpointing is None
    assert "Checkpoints are off: their folder" in box.status


# -- bad input -----------------------------------------------------------------------------


def test_a_2_gb_file_is_skipped_as_too_big_and_the_rest_rewinds(box: Toolbox, root: Path) -> None:
    big = root / "big.bin"
    with open(big, "wb") as fh:
        fh.truncate(2 << 30)  # sparse: 2 GB without writing them
    (root / "small.txt").write_text("small\n")
    ok(box.invoke("run", {"command": "printf tail >> big.bin; echo changed > small.txt"}))
    result = box.rewind(0)
    assert (root / "small.txt").read_text() == "small\n"
    [skipped] = result.not_restored
    assert skipped.path == "big.bin" and "skipped as too big" in skipped.why
    assert big.stat().st_size == (2 << 30) + 4  # left as it is


@pytest.fixture
def memory_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A root and a state folder in memory (/dev/shm) when it is a tmpfs, else tmp_path's:
    200,000 creations and unlinks of files cost ~0.7 ms each on this machine's busy ext4,
    ~0.02 ms on a tmpfs; the code they go through is the same."""
    shm = Path("/dev/shm")
    base = tmp_path
    if shm.is_dir() and os.access(shm, os.W_OK) and _is_tmpfs(shm):
        base = Path(tempfile.mkdtemp(prefix="loki-ckpt-", dir=shm))
    monkeypatch.setenv("LOKI_STATE_DIR", str(base / "loki-state"))
    (base / "root").mkdir(exist_ok=True)
    try:
        yield base / "root"
    finally:
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)


def _is_tmpfs(path: Path) -> bool:
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    return any(line.split()[1:3] == [str(path), "tmpfs"] for line in mounts)


def test_100_000_files_made_by_one_command_all_go(memory_root: Path) -> None:
    root = memory_root
    (root / "keep.txt").write_text("keep\n")
    before = tree(root)
    make = ("import os\nos.mkdir('many')\nfor i in range(100_000):\n"
            "    open(f'many/f{i}', 'w').write(str(i % 7))\n")
    with filesystem_toolbox(root) as box:
        done = box.invoke("run_python", {"code": make, "timeout": 600})
        ok(done)
        assert len(box.checkpoints().checkpoints[0].paths) == 100_001  # the folder too
        result = box.rewind(0)
        assert result.not_restored == []
    assert tree(root) == before


def test_links_out_of_the_root_are_never_followed(box: Toolbox, root: Path) -> None:
    outside = root.parent / "outside"
    (root / "d").mkdir()
    (root / "d" / "x.txt").write_text("x\n")
    (root / "h.txt").write_text("shared\n")
    os.link(outside / "secret.txt", root / "hard.txt")  # a hard link to a file outside
    os.symlink(outside / "secret.txt", root / "link")  # the user's own link out
    before = tree(root)
    ok(box.invoke("run", {"command": f"rm -r d && ln -s {outside} d && rm link && "
                                     f"echo agent > hard.txt && ln -sf {outside}/secret.txt h.txt"}))
    assert (outside / "secret.txt").read_text() == "agent\n"  # the command wrote through it
    result = box.rewind(0)
    assert result.not_restored == [], render_text(result)
    assert tree(root) == before
    assert os.readlink(root / "link") == str(outside / "secret.txt")
    # the rewind replaced the hard link: it never wrote the file outside
    assert (outside / "secret.txt").read_text() == "agent\n"
    assert (root / "hard.txt").read_text() == "TOP SECRET\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_a_fifo_is_never_opened_and_is_listed(box: Toolbox, root: Path) -> None:
    os.mkfifo(root / "pipe")
    (root / "a.txt").write_text("a\n")
    ok(box.invoke("run", {"command": "rm pipe; mkfifo made; echo b > a.txt"}))
    result = box.rewind(0)
    why = {n.path: n.why for n in result.not_restored}
    assert why == {"pipe": "a FIFO: only files and links are kept"}
    assert not (root / "made").exists() and (root / "a.txt").read_text() == "a\n"


def test_names_with_newlines_come_back(box: Toolbox, root: Path) -> None:
    (root / "two\nlines.txt").write_text("one\n")
    ok(box.invoke("run", {"command": "printf changed > 'two\nlines.txt'; touch 'new\nname'"}))
    result = box.rewind(0)
    assert result.not_restored == []
    assert (root / "two\nlines.txt").read_text() == "one\n"
    assert not (root / "new\nname").exists()
    assert "removed new\\nname" in render_text(result)


def test_a_protected_file_is_never_written(root: Path) -> None:
    (root / "secret.key").write_text("key\n")
    box = filesystem_toolbox(root, sandbox="off", protect=("*.key",))
    ok(box.invoke("run", {"command": "echo stolen > secret.key; echo a > a.txt"}))
    result = box.rewind(0)
    assert (root / "secret.key").read_text() == "stolen\n"
    assert not (root / "a.txt").exists()
    [kept] = result.not_restored
    assert kept.path == "secret.key" and kept.why.startswith("protected")


def test_two_processes_rewinding_one_root_never_mix(box: Toolbox, root: Path) -> None:
    (root / "a.txt").write_text("a\n")
    ok(box.invoke("run", {"command": "echo b > a.txt"}))
    keeper = box.checkpointing
    assert keeper is not None
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from pathlib import Path\n"
         "from yggdrasil.loki.checkpoints import lock_root\n"
         "with lock_root(Path(sys.argv[1]), Path(sys.argv[2])):\n"
         "    print('locked', flush=True); sys.stdin.read()\n",
         str(keeper.folder), str(root)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(ToolError, match=rf"another rewind of .* is running \(pid {holder.pid}\)"):
            box.rewind(0)
        assert (root / "a.txt").read_text() == "b\n"  # nothing was changed
    finally:
        holder.communicate("")
    assert box.rewind(0).not_restored == [] and (root / "a.txt").read_text() == "a\n"


UNREADABLE = r"""
import json, sys
from yggdrasil.loki.tools import filesystem_toolbox
box = filesystem_toolbox(sys.argv[1])
done = box.invoke("run", {"command": "chmod 644 locked.txt && echo new > locked.txt"})
result = box.rewind(0)
print(json.dumps({"ok": done.ok, "not": [[n.path, n.why] for n in result.not_restored]}))
box.close()
"""


def test_a_file_without_read_permission_is_listed(root: Path, tmp_path: Path) -> None:
    """Root reads every file: the child runs without the capabilities that let it."""
    locked = root / "locked.txt"
    locked.write_text("secret\n")
    locked.chmod(0)
    argv = [sys.executable, "-c", UNREADABLE, str(root)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv to drop root's right to read any file")
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *argv]
    env = {**os.environ, "LOKI_STATE_DIR": str(tmp_path / "state"),
           "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["ok"]
    assert out["not"] == [["locked.txt", "unreadable (no read permission)"]]
    assert locked.read_text() == "new\n"


FULL_DISK = r"""
import json, sys
from yggdrasil.loki.tools import filesystem_toolbox
box = filesystem_toolbox(sys.argv[1])
first = box.invoke("write_file", {"path": "a.txt", "content": "small\n"})
big = box.invoke("run", {"command": "head -c 3000000 /dev/urandom > big.bin"})
after = box.invoke("write_file", {"path": "c.txt", "content": "after\n"})
listed = box.checkpoints()
result = box.rewind(first.checkpoint)
print(json.dumps({"first": first.checkpoint, "big_ok": big.ok, "big": big.text,
                  "after": [after.ok, after.checkpoint], "note": listed.note,
                  "steps": [c.n for c in listed.checkpoints],
                  "restored": [r.path for r in result.restored]}))
box.close()
"""


def test_a_full_disk_stops_checkpointing_and_the_step_still_completes(tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare to mount a small filesystem")
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    state.mkdir()
    (root / "keep.txt").write_text("keep\n")
    script = (f"mount -t tmpfs -o size=1m tmpfs {state} && "
              f'exec {sys.executable} -c "$1" {root}')
    env = {**os.environ, "LOKI_STATE_DIR": str(state),
           "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", FULL_DISK],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {done.stderr}")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["big_ok"] and "checkpointing stopped at step 2" in out["big"]
    assert out["after"] == [True, None]
    assert out["steps"] == [1] and "checkpointing stopped" in out["note"]
    assert out["restored"] == []  # step 1 is whole: the rewind to it had nothing to do


def test_each_step_of_act_names_its_checkpoint(root: Path) -> None:
    from yggdrasil.loki import Loki
    from yggdrasil.loki.engines.scripted import ScriptedEngine

    (root / "a.txt").write_text("one\n")
    script = [{"thought": "look", "tool": "read_file", "args": {"path": "a.txt"}},
              {"thought": "change", "tool": "run", "args": {"command": "echo two > a.txt"}},
              {"thought": "add", "tool": "write_file", "args": {"path": "b", "content": "b"}},
              {"thought": "ok", "done": True, "answer": "done"}]
    with filesystem_toolbox(root) as box:
        result = Loki(ScriptedEngine(script)).act("t", toolbox=box)
        assert [s.checkpoint for s in result.steps] == [None, 1, 2]  # a read keeps none
        assert box.checkpointing is not None and result.checkpoints == box.checkpointing.run
        box.rewind(result.steps[1].checkpoint or 0)
        assert (root / "a.txt").read_text() == "two\n" and not (root / "b").exists()


def test_blobs_are_compressed_off_the_step_and_a_damaged_one_is_never_restored(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOKI_STATE_DIR", str(tmp_path / "state"))  # a store of its own
    box = filesystem_toolbox(root)
    (root / "a.txt").write_text("x = 1\n" * 2000)
    (root / "b.txt").write_text("b\n")
    ok(box.invoke("run", {"command": "echo changed > a.txt; echo changed > b.txt"}))
    keeper = box.checkpointing
    assert keeper is not None
    keeper.store.settle()
    key = keeper.timeline.start_state(keeper.run, "a.txt").hash
    with keeper.store.lock:
        raw = keeper.store.db.execute("SELECT count(*) FROM blobs WHERE z=0").fetchone()[0]
        size, kept = keeper.store.db.execute(
            "SELECT size, length(data) FROM blobs WHERE hash=?", (key,)).fetchone()
    assert raw == 0 and size == 12_000 and kept < 200  # compressed, soon after the step
    with keeper.store.transaction() as db:  # a blob damaged on disk (a torn write)
        db.execute("UPDATE blobs SET data=? WHERE hash=?", (b"not zlib", key))
    result = box.rewind(0)
    why = {n.path: n.why for n in result.not_restored}
    assert "damaged" in why["a.txt"] and (root / "a.txt").read_text() == "changed\n"
    assert (root / "b.txt").read_text() == "b\n"  # the rest still comes back


def test_old_runs_are_pruned_and_their_blobs_go(root: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from yggdrasil.loki.checkpoints import CheckpointLimits, prune

    monkeypatch.setenv("LOKI_STATE_DIR", str(tmp_path / "state"))  # a store of its own
    (root / "a.txt").write_text("a\n")
    old = filesystem_toolbox(root)
    ok(old.invoke("run", {"command": "echo unique-to-the-old-run > a.txt"}))
    old.close()
    box = filesystem_toolbox(root)
    ok(box.invoke("write_file", {"path": "b.txt", "content": "b\n"}))
    keeper, gone = box.checkpointing, old.checkpointing
    assert keeper is not None and gone is not None
    keeper.store.settle()
    with keeper.store.transaction() as db:  # the old run began long ago
        db.execute("UPDATE runs SET started=started-86400*30 WHERE id=?", (gone.run,))
        db.execute("UPDATE blobs SET used=used-86400*30")
    dropped = prune(keeper.timeline, CheckpointLimits(max_age=14 * 86400), keep={keeper.run},
                    force=True)
    assert gone.run in dropped and keeper.timeline.run(gone.run) is None
    assert keeper.timeline.run(keeper.run) is not None
    live = keeper.timeline.hashes([keeper.run])
    with keeper.store.lock:
        left = {r[0] for r in keeper.store.db.execute("SELECT hash FROM blobs")}
    assert left == live  # the old run's own blobs went, the live run's stayed
    assert box.rewind(0).not_restored == [] and not (root / "b.txt").exists()


def test_the_store_is_pruned_to_its_size(root: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from yggdrasil.loki.checkpoints import CheckpointLimits, prune

    monkeypatch.setenv("LOKI_STATE_DIR", str(tmp_path / "state"))  # a store of its own
    runs = []
    for n in range(3):
        box = filesystem_toolbox(root)
        ok(box.invoke("write_file", {"path": f"f{n}.bin", "content": os.urandom(200_000).hex()}))
        assert box.checkpointing is not None
        box.checkpointing.store.settle()
        runs.append(box.checkpointing)
        box.close()
    keeper = runs[-1]
    with keeper.store.transaction() as db:
        db.execute("UPDATE blobs SET used=used-86400")
    dropped = prune(keeper.timeline, CheckpointLimits(max_bytes=1 << 20), keep={keeper.run},
                    force=True)
    assert dropped and dropped[0] == runs[0].run  # the oldest first
    keeper.store.settle()
    assert keeper.store.bytes_used() <= 1 << 20 or len(dropped) == 2


def test_names_that_are_not_utf8_come_back(box: Toolbox, root: Path) -> None:
    name = os.fsdecode(b"caf\xe9.txt")  # Latin-1 bytes: a surrogate escape in Python
    (root / name).write_text("one\n")
    ok(box.invoke("run", {"command": "printf two > caf*.txt; touch $(printf 'n\\377w')"}))
    listed = box.checkpoints().checkpoints
    assert sorted(listed[0].paths) == sorted([name, os.fsdecode(b"n\xffw")])
    result = box.rewind(0)
    assert result.not_restored == [] and (root / name).read_text() == "one\n"
    assert not (root / os.fsdecode(b"n\xffw")).exists()
