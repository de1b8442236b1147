"""What a toolbox holds is let go of when it closes: processes, threads, descriptors,
scratch folders; the undo copies only when discarded."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest

from yggdrasil.loki.tools import filesystem_toolbox


def _children(marker: str) -> list[int]:
    """This process's live children whose command line holds ``marker``."""
    me, found = str(os.getpid()), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[1] == me and fields[0] not in "ZX" and marker.encode() in cmdline:
            found.append(int(pid))
    return found


def _inotify_fds() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone already
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
    return count


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The system temp dir, made private to this test so its folders can be counted."""
    folder = tmp_path / "systemtmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_close_lets_go_of_the_worker_the_proxy_the_watch_and_scratch(
        root: Path, scratch: Path) -> None:
    (root / "t.csv").write_text("a\n1\n")
    (root / "notes.txt").write_text("hi\n")
    watches = _inotify_fds()
    # without checkpoints: with them the undo copies live in the checkpoint store, not here
    box = filesystem_toolbox(root, network=["example.invalid"], allow_private_hosts=True,
                             checkpoints=False)
    assert box.call("read_table", {"path": "t.csv"}).startswith("t.csv")
    assert _children("_worker_main")  # the table worker runs
    assert box.call("run", {"command": "echo hi"}).startswith("exit=0")
    box.call("edit_file", {"path": "notes.txt", "old": "hi", "new": "ho"})
    made = {p.name.split("-")[1] for p in scratch.iterdir()}
    assert {"undo", "pycache"} <= made and _inotify_fds() > watches
    box.close()
    assert not _children("_worker_main")
    assert [p.name for p in scratch.iterdir()] == [n for n in os.listdir(scratch)
                                                   if n.startswith("loki-undo-")]
    assert _inotify_fds() == watches
    assert str(box.revert()) == "restored notes.txt"  # the undo copies outlive close()
    box.discard_undo()
    assert not list(scratch.iterdir())


def test_a_closed_toolbox_starts_what_it_needs_again(root: Path, scratch: Path) -> None:
    (root / "t.csv").write_text("a\n1\n")
    box = filesystem_toolbox(root)
    box.close()
    assert box.call("read_table", {"path": "t.csv"}).startswith("t.csv")
    assert box.call("run", {"command": "python3 -c 'import json; print(1)'"}).startswith(
        "exit=0\nstdout:\n1")
    box.close()
    assert not _children("_worker_main")
