"""Every filesystem tool stays inside the root, by any route."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from yggdrasil.loki.errors import PathError
from yggdrasil.loki.files import Files, Root
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

ESCAPES = [
    "../outside/secret.txt",
    "sub/../../outside/secret.txt",
    "link_out/secret.txt",
    "deep/a/b/hop/secret.txt",
    "file_link",
    "../root-secrets/key.txt",
]


@pytest.fixture
def trap(root: Path) -> Path:
    outside = root.parent / "outside"
    (root / "sub").mkdir()
    (root / "link_out").symlink_to(outside)
    (root / "deep" / "a" / "b").mkdir(parents=True)
    (root / "deep" / "a" / "b" / "hop").symlink_to("../../../../outside")
    (root / "file_link").symlink_to(outside / "secret.txt")
    (root / "inside.txt").write_text("inside\n")
    (root / "ok_link").symlink_to("inside.txt")
    return root


@pytest.mark.parametrize("path", ESCAPES)
def test_reads_refuse_escapes(trap: Path, box: Toolbox, path: str) -> None:
    for tool, args in [("read_file", {"path": path}), ("list_dir", {"path": path}),
                       ("read_table", {"path": path}), ("grep", {"pattern": "SECRET", "path": path}),
                       ("find", {"pattern": "*", "path": path})]:
        done = box.invoke(tool, args)
        assert "SECRET" not in done.text, (tool, path, done.text)
        assert done.is_error and done.data.category == "path", (tool, path, done.text)


@pytest.mark.parametrize("path", ESCAPES)
def test_writes_refuse_escapes(trap: Path, box: Toolbox, path: str) -> None:
    before = (trap.parent / "outside" / "secret.txt").read_bytes()
    out = box.invoke("write_file", {"path": path, "content": "pwned"})
    assert out.data.category == "path" and "escapes the agent root" in out.text
    out = box.invoke("edit_file", {"path": path, "old": "TOP", "new": "pwned"})
    assert out.is_error and out.data.category == "path"
    assert (trap.parent / "outside" / "secret.txt").read_bytes() == before
    assert box.changed == []


def test_absolute_path_outside_is_refused(trap: Path, box: Toolbox) -> None:
    secret = trap.parent / "outside" / "secret.txt"
    assert "escapes the agent root" in box.call("read_file", {"path": str(secret)})
    assert "escapes the agent root" in box.call("read_file", {"path": "/etc/passwd"})


def test_paths_inside_work_absolute_relative_and_by_link(trap: Path, box: Toolbox) -> None:
    assert box.call("read_file", {"path": str(trap / "inside.txt")}) == "1\tinside"
    for path in ("sub/../inside.txt", "ok_link"):
        read = box.invoke("read_file", {"path": path}).data
        assert (read.path, read.lines) == ("inside.txt", ["inside"]), path


def test_search_never_follows_links_out(trap: Path, box: Toolbox) -> None:
    out = box.call("grep", {"pattern": "TOP S"})
    assert "TOP SECRET" not in out and "secret.txt" not in out
    found = box.call("find", {"pattern": "*secret*"})
    assert "secret.txt" not in found
    listing = box.invoke("list_dir", {"path": "."})
    assert "link_out@ -> (outside the root, not followed)" in listing.text.splitlines()
    links = {e.name: (e.kind, e.target, e.outside) for e in listing.data.entries
             if e.kind == "link"}
    assert links == {"link_out": ("link", None, True), "file_link": ("link", None, True),
                     "ok_link": ("link", "inside.txt", False)}


def test_root_given_through_a_symlink(trap: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(trap)
    box = filesystem_toolbox(alias)
    assert box.invoke("read_file", {"path": "inside.txt"}).data.lines == ["inside"]
    escape = box.invoke("read_file", {"path": "../outside/secret.txt"})
    assert escape.data.category == "path" and "escapes" in escape.text


def test_special_files_are_refused_not_hung(root: Path, box: Toolbox) -> None:
    os.mkfifo(root / "pipe")
    out = box.call("read_file", {"path": "pipe"})
    assert out == "ERROR: pipe is a FIFO; only regular files can be read"
    assert "a character device" in filesystem_toolbox("/dev").call("read_file", {"path": "zero"})


def test_symlink_swapped_in_after_the_check_is_refused(root: Path) -> None:
    """The race itself: resolve first, then swap a folder for a link out, then open."""
    where = Root.at(root)
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("inside")
    real = where.resolve("d/f.txt")
    (root / "d").rename(root / "d.old")
    (root / "d").symlink_to(root.parent / "outside")
    (root.parent / "outside" / "f.txt").write_text("TOP SECRET")
    with pytest.raises(PathError, match="symlink appeared"):
        where.read_bytes(real)
    with pytest.raises(PathError, match="symlink appeared"):
        where.write_atomic(real, b"pwned")
    assert (root.parent / "outside" / "f.txt").read_text() == "TOP SECRET"


def test_a_file_inside_a_path_is_named_not_called_a_symlink(root: Path, box: Toolbox) -> None:
    (root / "README.md").write_text("hi\n")
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("x")
    os.mkfifo(root / "pipe")
    assert box.call("read_file", {"path": "README.md/x"}) == "ERROR: README.md is a file, not a folder"
    assert box.call("write_file", {"path": "d/f.txt/y/z", "content": "x"}) == (
        "ERROR: d/f.txt is a file, not a folder")
    assert box.call("read_file", {"path": "pipe/x"}) == "ERROR: pipe is a FIFO, not a folder"
    assert box.call("list_dir", {"path": "README.md/x"}) == "ERROR: README.md/x does not exist"
    assert Root.at(root).stat(root / "README.md" / "x") is None
    assert sorted(p.name for p in root.iterdir()) == ["README.md", "d", "pipe"]
    assert (root / "d" / "f.txt").read_text() == "x"


def test_list_dir_never_lists_a_link_swapped_in_after_the_check(root: Path) -> None:
    """The folder becomes a link out between list_dir's stat and its listing."""
    (root / "d").mkdir()
    (root.parent / "outside" / "f.txt").write_text("TOP SECRET")

    class SwapAfterStat(Root):
        def stat(self, real: Path) -> os.stat_result | None:
            st = super().stat(real)
            (root / "d").rename(root / "d.old")
            (root / "d").symlink_to(root.parent / "outside")
            return st

    with pytest.raises(PathError, match=r"d changed while it was being opened \(a symlink appeared\)"):
        Files(SwapAfterStat.at(root)).list_dir("d")


def test_root_remove_never_follows_a_link(root: Path) -> None:
    where, outside = Root.at(root), root.parent / "outside"
    (root / "f.txt").write_text("x")
    (root / "d").mkdir()
    (root / "d" / "in.txt").write_text("x")
    (root / "e").mkdir()
    (root / "link").symlink_to(outside / "secret.txt")
    (root / "dlink").symlink_to(outside)
    assert where.remove(root / "link") and not (root / "link").is_symlink()
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert not where.remove(root / "dlink", folder=True)  # a link is no folder
    assert not where.remove(root / "d", folder=True)  # not empty
    assert where.remove(root / "e", folder=True) and not (root / "e").exists()
    assert not where.remove(root / "gone.txt")
    assert not where.remove(root / "f.txt" / "x")  # nothing can be below a file
    assert not where.remove(root / "f.txt", folder=True)
    with pytest.raises(PathError, match="Is a directory"):
        where.remove(root / "d")
    (root / "d").rename(root / "d.old")
    (root / "d").symlink_to(outside)  # swapped in after the caller resolved d/secret.txt
    with pytest.raises(PathError, match="symlink appeared"):
        where.remove(root / "d" / "secret.txt")
    assert (outside / "secret.txt").exists() and (root / "dlink").is_symlink()


def test_racing_swapper_never_leaks(root: Path) -> None:
    """A thread flips a folder between real and a link out while we read in a loop."""
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("inside")
    (root.parent / "outside" / "f.txt").write_text("TOP SECRET")
    box = filesystem_toolbox(root)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(root / "d", root / "d_real")
            os.symlink(root.parent / "outside", root / "d")
            os.unlink(root / "d")
            os.rename(root / "d_real", root / "d")

    thread = threading.Thread(target=swap)
    thread.start()
    try:
        for _ in range(2000):
            assert "SECRET" not in box.call("read_file", {"path": "d/f.txt"})
    finally:
        stop.set()
        thread.join()


def test_prefix_sibling_is_not_inside(root: Path) -> None:
    where = Root.at(root)
    with pytest.raises(PathError):
        where.resolve(str(root.parent / "root-secrets" / "key.txt"))
    assert not where.is_temporary(Path("/tmpfoo/x"))


def test_a_link_swapped_during_resolve_is_a_clean_error(root: Path) -> None:
    """realpath can meet a link that became a file between its lstat and readlink: the
    tool must say so, not fail with a bare OSError."""
    (root / "target.txt").write_text("inside\n")
    box = filesystem_toolbox(root)
    stop = threading.Event()

    def swap() -> None:
        tmp = root / ".swap.tmp"
        while not stop.is_set():
            tmp.write_text("plain\n")
            os.replace(tmp, root / "swap.txt")
            tmp.symlink_to("target.txt")
            os.replace(tmp, root / "swap.txt")

    thread = threading.Thread(target=swap)
    thread.start()
    try:
        seen = {box.call("read_file", {"path": "swap.txt"}) for _ in range(20_000)}
    finally:
        stop.set()
        thread.join()
    assert not [s for s in seen if "failed:" in s], seen  # no bare exception
    for observation in seen - {"1\tinside", "1\tplain"}:
        assert observation.startswith(("ERROR: path 'swap.txt' ", "ERROR: swap.txt ")), seen


def test_stat_of_a_recorded_path_stays_in_the_root(root: Path) -> None:
    """Root.stat_rel (a rewind's lstat of the paths its checkpoints recorded) reads them
    as PurePosixPath would ('d/' is d, '.' the root), follows no link on the way, and
    refuses a '..' part instead of opening the folder above."""
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("x\n")
    os.symlink(root.parent, root / "up")
    at = Root.at(root)
    st = at.stat_rel("d/f.txt")
    assert st is not None and st.st_size == 2
    assert at.stat_rel("d/") == at.stat(root / "d") and at.stat_rel(".") is not None
    with pytest.raises(PathError, match="symlink"):  # a link on the way is not followed
        at.stat_rel("up/" + root.name)
    with pytest.raises(PathError, match="leaves the root"):
        at.stat_rel("d/../../etc/passwd")
