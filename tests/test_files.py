"""list_dir, read_file, write_file, edit_file on real files."""

from __future__ import annotations

import codecs
import os
import stat
import tempfile
from pathlib import Path

import pytest

from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def test_list_dir_shapes(root: Path, box: Toolbox) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "a.py").write_text("x = 1\n")
    (root / "README.md").write_text("hi")
    assert box.call("list_dir", {}) == "pkg/\nREADME.md  (2b)"  # DESIGN.md's shape
    assert box.call("list_dir", {"path": "pkg"}) == "pkg/a.py  (6b)"
    listing = box.invoke("list_dir", {}).data
    assert (listing.kind, listing.path, listing.more) == ("listing", ".", 0)
    assert [(e.name, e.path, e.kind, e.size) for e in listing.entries] == [
        ("pkg", "pkg", "folder", None), ("README.md", "README.md", "file", 2)]
    inside = box.invoke("list_dir", {"path": "pkg"}).data
    assert [(e.name, e.path, e.size) for e in inside.entries] == [("a.py", "pkg/a.py", 6)]
    a_file = box.invoke("list_dir", {"path": "README.md"})
    assert a_file.is_error and a_file.data.category == "path"
    assert "is a file; use read_file" in a_file.data.message
    missing = box.invoke("list_dir", {"path": "nope"})
    assert missing.is_error and missing.data.category == "path"
    assert missing.data.message == "nope does not exist"


def test_list_dir_data_names_links_special_files_and_empty_folders(root: Path, box: Toolbox) -> None:
    (root / "empty").mkdir()
    (root / "a.txt").write_text("abc")
    (root / "in_link").symlink_to("a.txt")
    (root / "out_link").symlink_to(root.parent / "outside")
    (root / "key_link").symlink_to(".env")
    (root / ".env").write_text("K=1\n")
    os.mkfifo(root / "pipe")
    entries = {e.name: e for e in box.invoke("list_dir", {}).data.entries}
    assert entries["empty"].kind == "folder" and entries["a.txt"].size == 3
    assert (entries["in_link"].kind, entries["in_link"].target) == ("link", "a.txt")
    assert (entries["out_link"].outside, entries["out_link"].target) == (True, None)
    assert (entries["key_link"].target, entries["key_link"].protected) == (".env", True)
    assert (entries[".env"].kind, entries[".env"].protected, entries[".env"].size) == (
        "file", True, None)
    assert (entries["pipe"].kind, entries["pipe"].size) == ("special", None)
    empty = box.invoke("list_dir", {"path": "empty"})
    assert (empty.data.entries, empty.data.more) == ([], 0)
    assert empty.text == "empty/ is empty"


def test_list_dir_is_capped(root: Path, box: Toolbox) -> None:
    for i in range(1100):
        (root / f"f{i:04}").write_text("")
    listing = box.invoke("list_dir", {})
    assert len(listing.data.entries) == 1000 and listing.data.more == 100
    assert listing.data.entries[-1].name == "f0999"
    out = listing.text.splitlines()  # a capped list says so and how to narrow
    assert len(out) == 1001 and out[-1] == (
        "[... 100 more entries not shown; list a subfolder, or use find]")


def test_read_file_windows(root: Path, box: Toolbox) -> None:
    (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    assert box.call("read_file", {"path": "a.txt", "start": 3, "end": 4}) == (
        "3\tline 3\n4\tline 4\n[showing lines 3-4 of 100; read_file(path='a.txt', start=5) "
        "for more, or grep to find a line]")
    out = box.call("read_file", {"path": "a.txt", "start": 99})
    assert out == "99\tline 99\n100\tline 100\n[lines 99-100; end of file]"
    window = box.invoke("read_file", {"path": "a.txt", "start": 3, "end": 4}).data
    assert (window.kind, window.path, window.content) == ("read", "a.txt", "text")
    assert (window.first, window.last, window.total, window.size) == (3, 4, 100, 792)
    assert (window.lines, window.encoding) == (["line 3", "line 4"], "utf-8")
    tail = box.invoke("read_file", {"path": "a.txt", "start": 99}).data
    assert (tail.first, tail.last, tail.total, tail.lines) == (99, 100, 100, ["line 99", "line 100"])
    past = box.invoke("read_file", {"path": "a.txt", "start": 101})
    assert past.is_error and "past the end" in past.data.message
    zero = box.invoke("read_file", {"path": "a.txt", "start": 0})
    assert zero.is_error and "1-based" in zero.data.message
    backwards = box.invoke("read_file", {"path": "a.txt", "start": 5, "end": 4})
    assert backwards.is_error and backwards.data.category == "argument"


def test_read_file_default_window_is_capped(root: Path, box: Toolbox) -> None:
    (root / "big.txt").write_text("".join(f"{i}\n" for i in range(5000)))
    big = box.invoke("read_file", {"path": "big.txt"})
    assert (big.data.first, big.data.last, big.data.total) == (1, 2000, 5000)
    assert big.data.lines[-1] == "1999"
    assert big.text.splitlines()[-1].startswith("[showing lines 1-2000 of 5000;")
    (root / "wide.txt").write_text("x" * 10_000 + "\nshort\n")
    wide = box.invoke("read_file", {"path": "wide.txt"}).data
    assert wide.lines == ["x" * 2000 + " [... 8000 more chars on this line]", "short"]


def test_read_file_clips_huge_lines_with_exact_counts(root: Path, box: Toolbox) -> None:
    """The CR of line 1 ends the first 1 MB read, its LF starts the next."""
    data = b"a" * ((1 << 20) - 1) + b"\r\n" + "\u00e9".encode() * 300_000 + b"\nend"
    (root / "wide.txt").write_bytes(data)
    out = box.invoke("read_file", {"path": "wide.txt"}).data.lines
    assert out[0] == "a" * 2000 + f" [... {(1 << 20) - 1 - 2000} more chars on this line]"
    assert out[1] == "\u00e9" * 2000 + " [... 298000 more chars on this line]"
    assert out[2:] == ["end"]


def test_read_file_reaches_lines_far_past_64k(root: Path, box: Toolbox) -> None:
    with open(root / "huge.txt", "w") as fh:
        for i in range(1, 300_001):
            fh.write(f"row {i} {'.' * 20}\n")
    read = box.invoke("read_file", {"path": "huge.txt", "start": 250_000, "end": 250_001}).data
    assert read.lines == [f"row {i} {'.' * 20}" for i in (250_000, 250_001)]
    assert (read.first, read.last) == (250_000, 250_001)


def test_read_file_text_variants(root: Path, box: Toolbox) -> None:
    (root / "crlf.txt").write_bytes(b"\xef\xbb\xbfa\r\nb\r\n")
    assert box.call("read_file", {"path": "crlf.txt"}) == "1\ta\n2\tb"
    crlf = box.invoke("read_file", {"path": "crlf.txt"}).data
    assert (crlf.lines, crlf.encoding, crlf.total) == (["a", "b"], "utf-8", 2)
    (root / "u16.txt").write_bytes("h\u00e9\nz\n".encode("utf-16"))
    wide = box.invoke("read_file", {"path": "u16.txt"}).data
    assert (wide.lines, wide.encoding, wide.size) == (["h\u00e9", "z"], "utf-16-le", 12)
    (root / "empty").write_bytes(b"")
    assert box.call("read_file", {"path": "empty"}) == "empty is empty (0 bytes)"
    empty = box.invoke("read_file", {"path": "empty"}).data
    assert (empty.content, empty.size, empty.lines, empty.total) == ("empty", 0, [], 0)
    (root / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    out = box.call("read_file", {"path": "blob.bin"})
    assert out.startswith("ERROR: blob.bin is a binary file (300 bytes)") and "\x00" not in out


def test_read_file_utf16_and_utf32_windows(root: Path, box: Toolbox) -> None:
    (root / "small16.txt").write_bytes("".join(f"l\u00e9 {i}\r\n" for i in range(1, 401)).encode("utf-16"))
    assert box.call("read_file", {"path": "small16.txt", "start": 3, "end": 4}) == (
        "3\tl\u00e9 3\n4\tl\u00e9 4\n[showing lines 3-4 of 400; read_file(path='small16.txt', "
        "start=5) for more, or grep to find a line]")
    (root / "be32.txt").write_bytes(codecs.BOM_UTF32_BE + "a\n\u00df\n".encode("utf-32-be"))
    be32 = box.invoke("read_file", {"path": "be32.txt"}).data
    assert (be32.lines, be32.encoding) == (["a", "\u00df"], "utf-32-be")
    (root / "odd16.txt").write_bytes(codecs.BOM_UTF16_LE + "ab\n".encode("utf-16-le") + b"x")
    assert box.invoke("read_file", {"path": "odd16.txt"}).data.lines == ["ab", "\ufffd"]


def test_read_file_big_utf16_reads_only_the_window(root: Path, box: Toolbox) -> None:
    """Past _COUNT_TAIL_LIMIT the lines after the window are not decoded to be counted."""
    line = "row {:06} " + "." * 40 + "\n"
    (root / "big16.txt").write_bytes("".join(line.format(i) for i in range(1, 100_001)).encode("utf-16"))
    read = box.invoke("read_file", {"path": "big16.txt", "start": 3, "end": 4})
    assert read.data.lines == [f"row {i:06} " + "." * 40 for i in (3, 4)]
    assert (read.data.total, read.data.size) == (None, 10_400_002)  # not counted past the window
    assert read.text.endswith("[showing lines 3-4 of a 9.9 MB file; read_file(path='big16.txt', "
                              "start=5) for more, or grep to find a line]")
    end = box.invoke("read_file", {"path": "big16.txt", "start": 99_999}).data
    assert (end.first, end.last, end.total) == (99_999, 100_000, 100_000)
    assert end.lines[-1].startswith("row 100000 ")


def test_write_creates_parents_and_records(root: Path, box: Toolbox) -> None:
    assert box.call("write_file", {"path": "a/b/c.txt", "content": "hé"}) == "created a/b/c.txt (3 bytes)"
    assert (root / "a/b/c.txt").read_text() == "hé"
    assert box.call("write_file", {"path": "a/b/c.txt", "content": "x"}) == "overwrote a/b/c.txt (1 bytes)"
    made = box.invoke("write_file", {"path": "d.txt", "content": "d"})
    assert (made.data.kind, made.data.path, made.data.created, made.data.bytes) == (
        "write", "d.txt", True, 1)
    assert made.data.warnings == [] and made.changed == ("d.txt",)
    again = box.invoke("write_file", {"path": "d.txt", "content": "dd"}).data
    assert (again.created, again.bytes) == (False, 2)
    box.call("edit_file", {"path": "a/b/c.txt", "old": "x", "new": "y"})
    assert box.changed == ["a/b/c.txt", "d.txt"]
    folder = box.invoke("write_file", {"path": "a", "content": "x"})
    assert folder.is_error and folder.data.category == "path" and "is a folder" in folder.text


def test_write_refuses_a_path_that_names_a_folder(root: Path, box: Toolbox) -> None:
    for path in ("a/", "a/.", "b/c/", ".", ""):
        out = box.call("write_file", {"path": path, "content": "x"})
        assert out == f"ERROR: path {path!r} names a folder; give a file path, e.g. 'notes/todo.txt'"
    (root / "f.txt").write_text("old")
    named = box.invoke("edit_file", {"path": "f.txt/", "old": "old", "new": "x"})
    assert named.data.category == "path" and "names a folder" in named.data.message
    assert list(root.iterdir()) == [root / "f.txt"] and (root / "f.txt").read_text() == "old"
    assert box.changed == []


def test_a_write_below_a_file_fails_and_leaves_nothing_to_revert(root: Path, box: Toolbox) -> None:
    (root / "README.md").write_text("hi\n")
    assert box.call("write_file", {"path": "README.md/x", "content": "x"}) == (
        "ERROR: README.md is a file, not a folder")
    report = box.revert()
    assert report.not_reverted == {} and report.removed == []
    assert (root / "README.md").read_text() == "hi\n"


def test_write_keeps_mode_and_leaves_no_temp_files(root: Path, box: Toolbox) -> None:
    script = root / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o751)
    box.call("write_file", {"path": "run.sh", "content": "echo new\n"})
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    box.call("edit_file", {"path": "run.sh", "old": "new", "new": "newer"})
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert sorted(p.name for p in root.iterdir()) == ["run.sh"]


def test_write_is_atomic_when_killed_mid_write(root: Path) -> None:
    """A child process is SIGKILLed while writing 200 MB over a file: old or new, never part."""
    import signal
    import subprocess
    import sys
    import time

    target = root / "data.txt"
    target.write_bytes(b"old" * 1000)
    code = (
        "from yggdrasil.loki.tools import filesystem_toolbox\n"
        f"filesystem_toolbox({str(root)!r}).call('write_file', "
        "{'path': 'data.txt', 'content': 'n' * 200_000_000})\n"
    )
    scratch = root.parent / "child-tmp"  # the killed child's undo copies stay in pytest's tmp
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(scratch)})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(p.name.endswith(".tmp") for p in root.iterdir()):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert target.read_bytes() in (b"old" * 1000, b"n" * 200_000_000)


def test_edit_replaces_one_unique_occurrence(root: Path, box: Toolbox) -> None:
    (root / "m.py").write_text("a = 1\nb = 1\n")
    assert box.call("edit_file", {"path": "m.py", "old": "a = 1", "new": "a = 2"}) == (
        "edited m.py (1 replacement)\n--- m.py\n+++ m.py\n@@ -1,2 +1,2 @@\n-a = 1\n+a = 2\n b = 1")
    assert (root / "m.py").read_text() == "a = 2\nb = 1\n"
    out = box.call("edit_file", {"path": "m.py", "old": "= ", "new": "=  "})
    assert "appears 2x in m.py (at lines 1, 2)" in out and "replace_all" in out
    assert (root / "m.py").read_text() == "a = 2\nb = 1\n"
    every = box.invoke("edit_file", {"path": "m.py", "old": " = ", "new": "=", "replace_all": True})
    assert every.text == (
        "edited m.py (2 replacements)\n--- m.py\n+++ m.py\n@@ -1,2 +1,2 @@\n-a = 2\n-b = 1\n+a=2\n+b=1")
    assert (every.data.replacements, [e.replacements for e in every.data.edits]) == (2, [2])
    assert every.data.diff.hunks[0].lines == ["-a = 2", "-b = 1", "+a=2", "+b=1"]
    assert (root / "m.py").read_text() == "a=2\nb=1\n"
    missing = box.invoke("edit_file", {"path": "n.py", "old": "a", "new": "b"})
    assert missing.data.category == "path" and "use write_file to create it" in missing.text
    empty = box.invoke("edit_file", {"path": "m.py", "old": "", "new": "b"})
    assert empty.data.category == "argument" and "must not be empty" in empty.text


def test_edit_keeps_crlf_bom_and_encoding(root: Path, box: Toolbox) -> None:
    (root / "w.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    box.call("edit_file", {"path": "w.txt", "old": "one\ntwo", "new": "uno\ndos"})
    assert (root / "w.txt").read_bytes() == b"\xef\xbb\xbfuno\r\ndos\r\nthree\r\n"
    (root / "l1.txt").write_bytes("caf\u00e9 au lait\n".encode("latin-1"))
    box.call("edit_file", {"path": "l1.txt", "old": "lait", "new": "rhum"})
    assert (root / "l1.txt").read_bytes() == "caf\u00e9 au rhum\n".encode("latin-1")
    (root / "u16.txt").write_bytes(b"\xff\xfe" + "a-b\n".encode("utf-16-le"))
    box.call("edit_file", {"path": "u16.txt", "old": "-", "new": "+"})
    assert (root / "u16.txt").read_bytes() == b"\xff\xfe" + "a+b\n".encode("utf-16-le")
    mixed = b"a\r\nb\nc\r\n"
    (root / "mixed.txt").write_bytes(mixed)
    box.call("edit_file", {"path": "mixed.txt", "old": "b", "new": "B"})
    assert (root / "mixed.txt").read_bytes() == b"a\r\nB\nc\r\n"


def test_edit_near_miss_points_at_whitespace(root: Path, box: Toolbox) -> None:
    """Lines equal but for whitespace whose structure differs (here the second line is
    not deeper than the first in old) are no loose match: the error points at them."""
    src = "def f():\n\tif x:\n\t\treturn 1\n"
    (root / "t.py").write_text(src)
    out = box.call("edit_file", {"path": "t.py", "old": "    if x:\n    return 1", "new": "pass"})
    assert out.startswith("ERROR: old was not found in t.py.")
    assert "Lines 2-3 match it except for whitespace" in out and "2\t\tif x:" in out
    assert (root / "t.py").read_text() == src


def test_edit_near_miss_shows_closest_lines(root: Path, box: Toolbox) -> None:
    body = "".join(f"def func_{i}(a, b):\n    return a + b + {i}\n" for i in range(200))
    (root / "many.py").write_text(body)
    out = box.call("edit_file", {"path": "many.py", "old": "def func_42(a, c):\n    return a + b + 42",
                                 "new": "x"})
    assert "The closest match is lines 85-86" in out and "85\tdef func_42(a, b):" in out
    assert "-def func_42(a, c):" in out and "+def func_42(a, b):" in out
    out = box.call("edit_file", {"path": "many.py", "old": "zzz qqq www", "new": "x"})
    assert "Nothing in the file resembles it" in out


def test_edit_near_miss_is_bounded_on_a_large_file(root: Path, box: Toolbox) -> None:
    """20,000 lines and a 200-line old with one typo: the old scan took minutes here."""
    words = ["value", "data", "result", "index", "count", "name", "item", "path"]
    lines = [f"{'    ' * (i % 4)}{words[i % 8]}_{i % 97} = {words[i * 7 % 8]}(self, {i})"
             for i in range(20_000)]
    (root / "big.py").write_text("\n".join(lines) + "\n")
    old = lines[10_000:10_200]
    old[100] = old[100].replace(" = ", " == ", 1)
    out = box.call("edit_file", {"path": "big.py", "old": "\n".join(old), "new": "x"})
    assert "The closest match is lines 10001-10200 (99% similar)" in out
    assert f"-{old[100]}" in out and f"+{lines[10_100]}" in out


def test_edit_near_miss_clips_long_lines(root: Path, box: Toolbox) -> None:
    (root / "wide.txt").write_text("head\n" + "y" * 3000 + "\ntail\n")
    out = box.call("edit_file", {"path": "wide.txt", "old": "head\n" + "y" * 2999 + "z", "new": "x"})
    assert "The closest match is lines 1-2" in out
    assert "[... 1000 more chars on this line]" in out and "y" * 2001 not in out


def test_syntax_warnings_after_write(root: Path, box: Toolbox) -> None:
    out = box.call("write_file", {"path": "bad.py", "content": "def f(:\n  pass\n"})
    assert out == "created bad.py (15 bytes)\nWARNING: bad.py no longer parses: line 1: invalid syntax"
    assert (root / "bad.py").exists()
    bad = box.invoke("write_file", {"path": "bad2.py", "content": "def f(:\n  pass\n"}).data
    assert bad.created and bad.warnings == [
        "WARNING: bad2.py no longer parses: line 1: invalid syntax"]
    assert len(box.invoke("write_file", {"path": "c.json", "content": '{"a": }'}).data.warnings) == 1
    assert len(box.invoke("write_file", {"path": "c.toml", "content": "a = = 1"}).data.warnings) == 1
    assert box.invoke("write_file", {"path": "ok.json", "content": '{"a": 1}'}).data.warnings == []


def test_yaml_that_no_longer_parses_is_flagged(root: Path, box: Toolbox) -> None:
    written = box.invoke("write_file", {"path": "ci.yml", "content": "jobs:\n  test: [1, 2\n"}).data
    assert written.created and written.path == "ci.yml"
    assert [w.startswith("WARNING: ci.yml no longer parses:") for w in written.warnings] == [True]
    (root / "conf.yaml").write_text("name: app\nport: 80\n")
    edited = box.invoke("edit_file", {"path": "conf.yaml", "old": "port: 80",
                                      "new": "port: : 80"}).data
    assert edited.path == "conf.yaml" and edited.replacements == 1
    assert [w.startswith("WARNING: conf.yaml no longer parses:") for w in edited.warnings] == [True]
    assert box.invoke("write_file", {"path": "ok.yaml", "content": "a: [1, 2]\n"}).data.warnings == []


@pytest.fixture
def not_temp(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Make the system temp dir somewhere else, so the test root counts as a real project."""
    elsewhere = tmp_path_factory.mktemp("systemtmp")
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))


def test_confirm_gates_overwrite_and_edit(root: Path, not_temp: None) -> None:
    asked: list[str] = []

    def deny(action: str) -> bool:
        asked.append(action)
        return False

    (root / "keep.txt").write_bytes(b"precious\r\n")
    box = filesystem_toolbox(root, confirm=deny)
    assert box.call("write_file", {"path": "keep.txt", "content": "x"}) == (
        "REFUSED: user declined to overwrite keep.txt")
    refused = box.invoke("edit_file", {"path": "keep.txt", "old": "precious", "new": "x"})
    assert refused.text == "REFUSED: user declined to edit keep.txt"
    assert refused.refused and (refused.data.verb, refused.data.path) == ("edit", "keep.txt")
    assert (root / "keep.txt").read_bytes() == b"precious\r\n"
    assert asked == ["overwrite keep.txt", "edit keep.txt"]
    assert box.changed == []
    assert box.invoke("write_file", {"path": "new.txt", "content": "x"}).data.created
    assert asked == ["overwrite keep.txt", "edit keep.txt"]  # new files are not gated


def test_confirm_yes_proceeds(root: Path, not_temp: None) -> None:
    (root / "keep.txt").write_text("a")
    box = filesystem_toolbox(root, confirm=lambda action: True)
    edited = box.invoke("edit_file", {"path": "keep.txt", "old": "a", "new": "b"})
    assert edited.ok and edited.data.replacements == 1 and edited.changed == ("keep.txt",)


def test_temp_files_are_not_gated(root: Path) -> None:
    # root (pytest's tmp_path) lies under the real system temp dir
    assert Path(tempfile.gettempdir()).resolve() in root.resolve().parents
    (root / "scratch.txt").write_text("a")
    box = filesystem_toolbox(root, confirm=lambda action: pytest.fail(f"asked {action}"))
    written = box.invoke("write_file", {"path": "scratch.txt", "content": "b"})
    assert written.ok and not written.data.created


def test_failed_confirm_callback_is_an_observation(root: Path, not_temp: None) -> None:
    (root / "k.txt").write_text("a")

    def broken(action: str) -> bool:
        raise RuntimeError("no terminal")

    out = filesystem_toolbox(root, confirm=broken).invoke("write_file", {"path": "k.txt", "content": "b"})
    assert out.is_error and (root / "k.txt").read_text() == "a"
    assert os.listdir(root) == ["k.txt"]
