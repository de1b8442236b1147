"""What a run changed (write/edit tools and commands) and undoing it, on real files."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path

import pytest

from yggdrasil.loki.sandbox import isolation_status
from yggdrasil.loki.shell import diff, feed_for, snapshot
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def _tree(root: Path) -> dict[str, tuple[str, int]]:
    """Every file and folder below root: content hash (or 'dir') and permission bits."""
    seen: dict[str, tuple[str, int]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(folder, name)
            st = p.lstat()
            kind = "dir" if stat.S_ISDIR(st.st_mode) else hashlib.sha256(p.read_bytes()).hexdigest()
            seen[p.relative_to(root).as_posix()] = (kind, stat.S_IMODE(st.st_mode))
    return seen


def test_commands_report_created_modified_deleted(root: Path, box: Toolbox) -> None:
    (root / "keep.txt").write_text("keep")
    (root / "edit.txt").write_text("old")
    (root / "gone.txt").write_text("bye")
    out = box.call("run", {"command": "mkdir sub && echo new > sub/new.txt; "
                                      "echo more >> edit.txt; rm gone.txt"})
    assert out.endswith("stderr:\nchanged:\ncreated sub/new.txt\nmodified edit.txt\n"
                        "deleted gone.txt\n")
    assert box.changed == ["sub/new.txt", "edit.txt", "gone.txt"]
    assert box.changes == {"sub/new.txt": "created", "edit.txt": "modified", "gone.txt": "deleted"}


def test_run_python_changes_are_recorded_too(root: Path, box: Toolbox) -> None:
    out = box.call("run_python", {"code": "open('made.py', 'w').write('x = 1')\nprint('hi')"})
    assert out == "exit=0\nstdout:\nhi\n\nstderr:\nchanged:\ncreated made.py\n"
    assert box.changed == ["made.py"]


def test_statuses_over_a_whole_run_keep_first_touch_order(root: Path, box: Toolbox) -> None:
    (root / "a.txt").write_text("a")
    box.call("write_file", {"path": "b.txt", "content": "b"})
    box.call("run", {"command": "echo A > a.txt; rm b.txt; touch c.txt"})
    box.call("edit_file", {"path": "a.txt", "old": "A", "new": "AA"})
    box.call("run", {"command": "rm c.txt; touch b.txt"})
    # one command's changes arrive as created, modified, deleted (each in path order)
    assert box.changed == ["b.txt", "c.txt", "a.txt"]
    assert box.changes == {"b.txt": "created", "a.txt": "modified", "c.txt": "transient"}


def test_chmod_and_rename_over_count_as_modified(root: Path, box: Toolbox) -> None:
    (root / "x.sh").write_text("echo x")
    (root / "y.txt").write_text("same size")
    out = box.call("run", {"command": "chmod +x x.sh; printf 'same size' > t && mv t y.txt"})
    assert out.endswith("changed:\nmodified x.sh\nmodified y.txt\n")


def test_tool_folders_are_not_walked_but_dotfiles_are(root: Path, box: Toolbox) -> None:
    (root / "venv-custom").mkdir()
    (root / "venv-custom" / "pyvenv.cfg").write_text("home = /usr\n")
    cmd = ("mkdir -p .git node_modules/p __pycache__ .venv && touch .git/index "
           "node_modules/p/i.js __pycache__/m.pyc .venv/x venv-custom/lib.py .env")
    out = box.call("run", {"command": cmd})
    # __pycache__ is walked: bytecode a command writes there runs on the next import.
    assert out.endswith("changed:\ncreated .env\ncreated __pycache__/m.pyc\n")
    assert box.changed == [".env", "__pycache__/m.pyc"]


def test_huge_trees_are_not_tracked(root: Path) -> None:
    for i in range(5):
        (root / f"f{i}").write_text("")
    assert snapshot(root, limit=3).complete is False
    assert snapshot(root, limit=5).complete is True


def test_no_section_when_nothing_changed(box: Toolbox) -> None:
    assert box.call("run", {"command": "echo hi"}) == "exit=0\nstdout:\nhi\n\nstderr:\n"


def test_a_whole_run_reverts_byte_for_byte(root: Path, box: Toolbox) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "mod.py").write_bytes(b"\xef\xbb\xbfx = 1\r\ny = 2\r\n")  # BOM + CRLF
    (root / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "tool.sh").chmod(0o751)
    (root / "data.bin").write_bytes(bytes(range(256)) * 4000)
    (root / "untouched.txt").write_text("same")
    before = _tree(root)

    box.call("edit_file", {"path": "pkg/mod.py", "old": "y = 2", "new": "y = 3"})
    box.call("write_file", {"path": "tool.sh", "content": "rm -rf /\n"})
    box.call("write_file", {"path": "data.bin", "content": "flattened"})
    box.call("write_file", {"path": "new/deep/file.txt", "content": "new"})
    box.call("run", {"command": "chmod 600 tool.sh; rm data.bin; mkdir -p made/by && "
                                "echo x > made/by/run.txt; echo y > pkg/extra.py"})
    assert _tree(root) != before

    report = box.revert()
    assert _tree(root) == before
    assert sorted(report.restored) == ["data.bin", "pkg/mod.py", "tool.sh"]
    assert sorted(report.removed) == ["made/", "made/by/", "made/by/run.txt", "new/",
                                      "new/deep/", "new/deep/file.txt", "pkg/extra.py"]
    assert report.not_reverted == {}
    assert box.changed == [] and box.changes == {}
    assert str(box.revert()) == "nothing to revert"


def test_shell_changes_without_a_copy_are_listed_not_reverted(root: Path, box: Toolbox) -> None:
    (root / "a.txt").write_text("original")
    (root / "b.txt").write_text("original")
    box.call("write_file", {"path": "c.txt", "content": "new"})
    box.call("run", {"command": "echo changed > a.txt; rm b.txt; touch d.txt"})
    report = box.revert()
    assert report.removed == [] and report.restored == []
    assert list(report.not_reverted) == ["c.txt", "d.txt", "a.txt", "b.txt"]
    assert "changed by a command" in report.not_reverted["a.txt"]
    assert "deleted by a command" in report.not_reverted["b.txt"]
    assert "kept because 2 other change(s) cannot be undone" in report.not_reverted["d.txt"]
    assert "not reverted a.txt: changed by a command" in str(report)
    assert box.changed == ["c.txt", "d.txt", "a.txt", "b.txt"]  # what stays changed, stays listed
    assert (root / "d.txt").exists() and (root / "c.txt").read_text() == "new"


def test_a_moved_tree_is_never_deleted_by_revert(root: Path, box: Toolbox) -> None:
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("precious")
    box.call("run", {"command": "mv src lib"})
    report = box.revert()
    assert (root / "lib" / "main.py").read_text() == "precious"
    assert set(report.not_reverted) == {"lib/main.py", "src/main.py"}


def test_created_files_go_when_everything_else_can_be_undone(root: Path, box: Toolbox) -> None:
    (root / "a.txt").write_text("original")
    box.call("edit_file", {"path": "a.txt", "old": "original", "new": "edited"})
    box.call("run", {"command": "echo again > a.txt; mkdir out && touch out/x"})
    report = box.revert()
    assert report.restored == ["a.txt"] and report.removed == ["out/x", "out/"]
    assert sorted(os.listdir(root)) == ["a.txt"] and (root / "a.txt").read_text() == "original"


def test_originals_are_kept_on_disk_not_in_memory(root: Path) -> None:
    """Without checkpoints (with them, the originals go to the checkpoint store: see
    test_checkpoints), in packs of a private temp folder."""
    box = filesystem_toolbox(root, checkpoints=False)
    big = os.urandom(3 << 20)
    (root / "big.bin").write_bytes(big)
    box.call("write_file", {"path": "big.bin", "content": "small"})
    assert box.journal is not None
    [store] = box.journal.private_dirs()
    kept = list(store.iterdir())
    assert len(kept) == 1 and kept[0].read_bytes() == big  # a big original: a file of its own
    assert not kept[0].is_relative_to(root)
    box.revert()
    assert (root / "big.bin").read_bytes() == big
    assert list(store.iterdir()) == []


def test_small_originals_share_a_pack_and_each_comes_back_whole(root: Path) -> None:
    """One file holds the copies of many small originals (a file made per copy is what
    costs most on a busy disk); reverting some leaves the others intact, and the pack
    goes with the last copy in it (without checkpoints, which keep them in their store)."""
    box = filesystem_toolbox(root, checkpoints=False)
    sizes = (5, 0, 4096, 4097, 0, 1500, 3000, 7001, 1, 0, 9999, 12)  # unaligned, empty ones
    olds = {f"f{i}.txt": os.urandom(n) for i, n in enumerate(sizes)}
    for name, data in olds.items():
        (root / name).write_bytes(data)
    text = "*** Begin Patch\n" + "".join(f"*** Add File: new{i}.txt\n+x\n" for i in range(2))
    for name in olds:
        out = box.invoke("write_file", {"path": name, "content": f"new {name}"})
        assert (out.data.path, out.data.created) == (name, False), out.text
    added = box.invoke("apply_patch", {"patch": text + "*** End Patch"}).data
    assert [(f.op, f.path) for f in added.files] == [("A", "new0.txt"), ("A", "new1.txt")]
    assert box.journal is not None
    [store] = box.journal.private_dirs()
    assert len(list(store.iterdir())) == 1
    assert "restored f3.txt" in str(box.revert(["f3.txt", "f7.txt"]))
    assert (root / "f3.txt").read_bytes() == olds["f3.txt"]
    assert (root / "f5.txt").read_text() == "new f5.txt"
    box.call("write_file", {"path": "f3.txt", "content": "again"})  # a copy after a revert
    box.revert()
    assert {name: (root / name).read_bytes() for name in olds} == olds
    assert list(store.iterdir()) == [] and not (root / "new0.txt").exists()


def test_revert_puts_a_file_back_where_a_link_now_stands(root: Path, box: Toolbox) -> None:
    (root / "f.txt").write_text("mine")
    box.call("write_file", {"path": "f.txt", "content": "theirs"})
    box.call("run", {"command": "rm f.txt && ln -s ../outside/secret.txt f.txt"})
    box.revert()
    assert not (root / "f.txt").is_symlink() and (root / "f.txt").read_text() == "mine"
    assert (root.parent / "outside" / "secret.txt").read_text() == "TOP SECRET\n"


def test_undo_of_a_link_the_run_made_removes_the_link_not_its_target(
        root: Path, box: Toolbox) -> None:
    (root / "a.py").write_text("mine\n")
    box.call("run", {"command": "ln -s a.py near && ln -s ../outside/secret.txt far"})
    assert box.call("undo_edit", {"path": "near"}) == "removed near (this run created it)"
    assert box.call("undo_edit", {"path": "far"}) == "removed far (this run created it)"
    assert sorted(os.listdir(root)) == ["a.py"] and (root / "a.py").read_text() == "mine\n"
    assert (root.parent / "outside" / "secret.txt").read_text() == "TOP SECRET\n"


def test_an_edit_through_a_link_is_undone_by_the_links_name(root: Path, box: Toolbox) -> None:
    (root / "a.py").write_text("x = 1\n")
    os.symlink("a.py", root / "alias.py")
    box.call("edit_file", {"path": "alias.py", "old": "x = 1", "new": "x = 2"})
    undone = box.invoke("undo_edit", {"path": "alias.py"}).data
    assert (undone.path, undone.outcome) == ("a.py", "restored")
    assert (root / "a.py").read_text() == "x = 1\n" and (root / "alias.py").is_symlink()


def test_revert_of_named_paths_never_raises_for_one_path(root: Path, box: Toolbox) -> None:
    (root / "a.txt").write_text("original")
    box.call("write_file", {"path": "a.txt", "content": "edited"})
    report = box.revert(["../outside/secret.txt", "a.txt", "/etc/passwd"])
    assert report.restored == ["a.txt"] and (root / "a.txt").read_text() == "original"
    assert set(report.not_reverted) == {"../outside/secret.txt", "/etc/passwd"}
    assert "escapes the agent root" in report.not_reverted["/etc/passwd"]


def test_toolbox_without_journal_reverts_nothing() -> None:
    assert str(Toolbox().revert()) == "nothing to revert"


def test_unsandboxed_runs_track_changes_as_well(root: Path) -> None:
    box = filesystem_toolbox(root, sandbox="off")
    assert box.call("run", {"command": "touch z"}).endswith("changed:\ncreated z\n")


# -- the inotify view must agree with two full snapshots --------------------------------

SCENARIOS = {
    "nested new folders": "mkdir -p n/m && echo x > n/m/f && touch n/g",
    "folder renamed": "mv pkg pkg2",
    "folder moved twice": "mv pkg/sub other && mv other pkg/sub2",
    "folder swap": "mv pkg tmp && mv lib pkg && mv tmp lib",
    "tree removed": "rm -rf pkg",
    "new virtualenv": "mkdir env && touch env/pyvenv.cfg env/x && mkdir env/lib && touch env/lib/y",
    "file becomes folder": "rm a.txt && mkdir a.txt && touch a.txt/inner",
    "folder becomes file": "rm -rf lib && echo now-a-file > lib",
    "metadata only": "chmod 700 a.txt && touch -m -d @0 b.txt",
    "links": "ln -s a.txt link && ln -s pkg dlink && ln a.txt hard",
    "files moved across folders": "mv pkg/x.txt . && mv b.txt pkg/",
    "skipped folders": "mkdir -p node_modules/a .git && touch node_modules/a/b .git/HEAD c.txt",
    "copied then trimmed": "cp -r pkg pkg_copy && rm -r pkg_copy/sub",
    "moved in from TMPDIR": "mkdir $TMPDIR/t && touch $TMPDIR/t/f && mv $TMPDIR/t moved",
    "same size rewrite": "printf 'A' > a.txt.new && mv a.txt.new a.txt",
    "many new files in a new folder": "mkdir many && cd many && for i in $(seq 150); do : > f$i; done",
    "nested and look-alike folders": "mkdir pkg/c2 pkg-b && touch pkg-b/f && mv pkg pkg.old && "
                                     "mkdir pkg && touch pkg/x.txt",
    "skipped folders moved away": "mv .git old-history && mv pkg/node_modules nm",
    "skipped folder replaced": "rm -rf .git && mkdir .git && touch .git/HEAD",
    "virtualenv removed": "rm -rf lib/env",
    "folder holding a skipped one renamed": "mv pkg pkg2",
    "nothing": "true",
}


def _start_tree(root: Path) -> None:
    for rel, text in {"a.txt": "a", "b.txt": "b", "pkg/x.txt": "x", "pkg/sub/y.txt": "y",
                      "lib/z.txt": "z", ".git/HEAD": "ref", "pkg/node_modules/m.js": "m",
                      "lib/env/pyvenv.cfg": "home = /usr"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _section(out: str) -> list[str]:
    return out.split("changed:\n", 1)[1].splitlines() if "changed:\n" in out else []


@pytest.mark.parametrize("command", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_watched_changes_match_full_snapshots(root: Path, command: str) -> None:
    box = filesystem_toolbox(root, git_writable=True)  # scenarios move and replace .git
    _start_tree(root)
    box.call("run", {"command": "true"})  # builds the watched view
    (root / "b.txt").write_text("changed between commands, by someone else")
    (root / "lib" / "new.txt").write_text("also not the command's doing")
    before = snapshot(root)
    out = box.call("run", {"command": command})
    assert out.startswith("exit=0"), out
    expected = diff(before, snapshot(root)).lines()
    assert _section(out) == expected
    # and the view stays right for the next command
    before = snapshot(root)
    out = box.call("run", {"command": "touch a.txt.2 && rm -f b.txt"})
    assert _section(out) == diff(before, snapshot(root)).lines()


def test_changes_are_tracked_without_inotify(root: Path, box: Toolbox,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "no-inotify")
    scanning = filesystem_toolbox(root)
    _start_tree(root)
    out = scanning.call("run", {"command": "mv pkg pkg2 && touch new"})
    assert _section(out) == ["created new", "created pkg2/sub/y.txt", "created pkg2/x.txt",
                             "deleted pkg/sub/y.txt", "deleted pkg/x.txt",
                             "deleted pkg/node_modules/"]


def test_an_overflowing_event_queue_falls_back_to_a_full_scan(root: Path, box: Toolbox) -> None:
    box.call("run", {"command": "true"})
    shell = box.tools["run"].run.__self__  # type: ignore[attr-defined]
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    count = limit // 2 + 10  # each new file queues a create and a close-write event at least
    out = box.call("run_python", {"code": f"for i in range({count}): open(f'f{{i}}', 'w').close()"})
    assert shell.tracker.watch is not None and not shell.tracker.watch.complete  # it overflowed
    assert out.startswith("exit=0") and len(box.changed) == count
    assert set(box.changes.values()) == {"created"}
    out = box.call("run", {"command": "rm f1 && touch g"})  # rebuilt for the next command
    assert _section(out) == ["created g", "deleted f1"] and shell.tracker.watch.complete


@pytest.mark.parametrize("watching", [True, False], ids=["inotify", "snapshots"])
def test_a_moved_history_folder_is_never_deleted_by_revert(
        root: Path, monkeypatch: pytest.MonkeyPatch, watching: bool) -> None:
    if not watching:
        monkeypatch.setattr(sys, "platform", "no-inotify")
    box = filesystem_toolbox(root, git_writable=True)  # or .git could not be moved at all
    for rel in (".git/HEAD", ".git/objects/ab/cdef", "node_modules/p/i.js", ".venv/pyvenv.cfg"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("history")
    (root / "app.py").write_text("x = 1\n")
    box.call("run", {"command": "true"})
    out = box.call("run", {"command": "mv .git old-git-history && mv node_modules nm && "
                                      "rm -rf .venv"})
    assert _section(out)[-3:] == ["deleted .git/", "deleted .venv/", "deleted node_modules/"]
    assert box.changes[".git/"] == "deleted"
    report = box.revert()
    assert (root / "old-git-history" / "objects" / "ab" / "cdef").read_text() == "history"
    assert (root / "nm" / "p" / "i.js").read_text() == "history"
    assert report.removed == [] and "old-git-history/HEAD" in report.not_reverted
    assert "cannot be put back" in report.not_reverted[".git/"]


@pytest.mark.parametrize("watching", [True, False], ids=["inotify", "snapshots"])
def test_an_edit_through_a_hard_link_elsewhere_is_seen(
        root: Path, monkeypatch: pytest.MonkeyPatch, watching: bool) -> None:
    if not watching:
        monkeypatch.setattr(sys, "platform", "no-inotify")
    box = filesystem_toolbox(root, git_writable=True)
    (root / "app.py").write_text("print(1)\n")
    (root / "lib.py").write_text("x = 1\n")
    (root / ".git").mkdir()
    os.link(root / "lib.py", root / ".git" / "lib-link")  # a link in a folder nobody watches
    box.call("run", {"command": "true"})
    out = box.call("run", {"command": "ln app.py $TMPDIR/h && echo EVIL >> $TMPDIR/h"})
    if isolation_status().namespaces:  # the scratch folder is another mount: no link at all
        assert "Invalid cross-device link" in out and _section(out) == []
    else:
        assert _section(out) == ["modified app.py"]
    out = box.call("run", {"command": "echo EVIL >> .git/lib-link"})
    assert _section(out) == ["modified lib.py"]
    out = box.call("run", {"command": "ln lib.py twin && echo more >> .git/lib-link"})
    assert _section(out) == ["created twin", "modified lib.py"]
    out = box.call("run", {"command": "echo again >> twin"})
    assert _section(out) == ["modified lib.py", "modified twin"]


@pytest.mark.skipif(sys.platform != "linux", reason="inotify")
def test_readers_of_one_watch_each_get_what_changed_since_they_last_read(root: Path) -> None:
    """One watch per root, several readers: a reader that read in between and one that
    did not each get what changed since their own last read, net (a file created and
    deleted meanwhile is no change; modified then deleted is a deletion)."""
    (root / "old.txt").write_text("1")
    (root / "keep.txt").write_text("1")
    feed = feed_for(root)
    often, seldom = feed.reader(), feed.reader()
    assert feed_for(root) is feed and feed.builds == 1
    (root / "tmp.txt").write_text("x")
    (root / "old.txt").write_text("22")
    first = feed.read(often)
    assert first is not None and (first.diff.created, first.diff.modified) == (
        ["tmp.txt"], ["old.txt"])
    (root / "tmp.txt").unlink()
    (root / "old.txt").unlink()
    (root / "keep.txt").write_text("333")
    (root / "sub").mkdir()
    (root / "sub" / "new.txt").write_text("n")
    second = feed.read(often)
    assert second is not None and (second.diff.created, second.diff.modified,
                                   second.diff.deleted) == (
        ["sub/new.txt"], ["keep.txt"], ["old.txt", "tmp.txt"])
    net = feed.read(seldom)  # both folds at once, as one
    assert net is not None and (net.diff.created, net.diff.modified, net.diff.deleted,
                                net.diff.created_dirs) == (
        ["sub/new.txt"], ["keep.txt"], ["old.txt"], ["sub"])
    again = feed.read(seldom)
    assert again is not None and not again.diff and feed.builds == 1
    feed.release(often)
    feed.release(seldom)
    assert feed.watch is None  # the last reader out closed it
