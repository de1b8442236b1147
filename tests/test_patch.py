"""apply_patch on real files: both formats, all or nothing, confirm, undo, attacks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cli_run import SRC
from yggdrasil.loki.tools import Toolbox, ToolResult, filesystem_toolbox

APP = "def main():\n    x = 1\n    y = 2\n    return x + y\n\n\ndef other():\n    return 0\n"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                          capture_output=True, text=True, check=True)
    return done.stdout


def patch(box: Toolbox, text: str, **more: object) -> str:
    return box.call("apply_patch", {"patch": text, **more})


def patched(box: Toolbox, text: str, **more: object) -> ToolResult:
    return box.invoke("apply_patch", {"patch": text, **more})


def ops(done: ToolResult) -> list[tuple[str, str, str | None]]:
    """What the patch did to each file: (M/A/D/R, path, new path)."""
    assert done.ok, done.text
    return [(f.op, f.path, f.new_path) for f in done.data.files]


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_codex_patch_adds_deletes_updates_and_moves(root: Path, box: Toolbox) -> None:
    (root / "app.py").write_text(APP)
    (root / "old.txt").write_text("one\ntwo\n")
    (root / "gone.txt").write_text("bye\n")
    done = patched(box, "*** Begin Patch\n"
                        "*** Update File: app.py\n@@ def main():\n     x = 1\n-    y = 2\n+    y = 3\n"
                        "*** Add File: docs/new.md\n+# New\n+\n+text\n"
                        "*** Delete File: gone.txt\n"
                        "*** Update File: old.txt\n*** Move to: moved/new.txt\n@@\n one\n-two\n+TWO\n"
                        "*** End Patch\n")
    out = done.text  # DESIGN.md's shape: one line per file, then the diffs
    assert out.splitlines()[:4] == ["M app.py", "A docs/new.md", "D gone.txt",
                                    "R old.txt -> moved/new.txt"]
    assert "-    y = 2\n+    y = 3" in out and "--- old.txt\n+++ moved/new.txt" in out
    assert ops(done) == [("M", "app.py", None), ("A", "docs/new.md", None),
                         ("D", "gone.txt", None), ("R", "old.txt", "moved/new.txt")]
    app, added, gone, moved = done.data.files
    assert app.diff.hunks[0].lines[2:4] == ["-    y = 2", "+    y = 3"]
    assert (added.diff, gone.diff) == (None, None)  # no whole-file diffs outside a dry run
    assert (moved.diff.old_path, moved.diff.new_path) == ("old.txt", "moved/new.txt")
    assert (done.data.dry_run, done.data.changes_nothing, done.data.warnings) == (False, False, [])
    assert set(done.changed) == {"app.py", "docs/new.md", "gone.txt", "old.txt", "moved/new.txt"}
    assert (root / "app.py").read_text() == APP.replace("y = 2", "y = 3")
    assert (root / "docs/new.md").read_text() == "# New\n\ntext\n"
    assert (root / "moved/new.txt").read_text() == "one\nTWO\n"
    assert not (root / "gone.txt").exists() and not (root / "old.txt").exists()
    assert box.changes == {"app.py": "modified", "docs/new.md": "created", "gone.txt": "deleted",
                           "old.txt": "deleted", "moved/new.txt": "created"}
    report = box.revert()
    assert sorted(report.restored) == ["app.py", "gone.txt", "old.txt"]
    assert sorted(report.removed) == ["docs/", "docs/new.md", "moved/", "moved/new.txt"]
    assert snapshot(root) == {"app.py": APP.encode(), "gone.txt": b"bye\n", "old.txt": b"one\ntwo\n"}


def test_git_diff_with_renames_adds_and_deletes_applies_to_a_clean_tree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "app.py").write_text(APP)
    (repo / "keep.txt").write_text("".join(f"line {i}\n" for i in range(40)))
    (repo / "gone.txt").write_text("bye\n")
    (repo / "empty.txt").write_text("")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    git(repo, "mv", "app.py", "main.py")
    (repo / "main.py").write_text(APP.replace("return 0", "return 42"))
    (repo / "keep.txt").write_text("".join(f"line {i}\n" for i in range(40)).replace(
        "line 3\n", "line three\n").replace("line 30\n", "").replace("line 39\n", "line 39"))
    (repo / "gone.txt").unlink()
    (repo / "empty.txt").unlink()
    (repo / "sub").mkdir()
    (repo / "sub" / "new file.py").write_text("print('hi')\n")
    (repo / "blank.txt").write_text("")
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "-M")
    want = snapshot(repo)
    git(repo, "reset", "-q", "--hard", "HEAD")
    git(repo, "clean", "-qfd")
    box = filesystem_toolbox(repo)
    done = ops(patched(box, diff))
    assert {k: v for k, v in snapshot(repo).items() if not k.startswith(".git/")} == {
        k: v for k, v in want.items() if not k.startswith(".git/")}
    assert ("R", "app.py", "main.py") in done and ("A", "sub/new file.py", None) in done
    assert ("D", "gone.txt", None) in done


def test_diff_u_of_two_folders_and_of_two_files(tmp_path: Path) -> None:
    before, after, root = tmp_path / "before", tmp_path / "after", tmp_path / "root"
    for folder in (before, after, root):
        (folder / "pkg").mkdir(parents=True)
    for folder in (before, root):
        (folder / "pkg" / "a.py").write_text(APP)
    (after / "pkg" / "a.py").write_text(APP.replace("x = 1", "x = 10"))
    diff = subprocess.run(["diff", "-ru", "before", "after"], cwd=tmp_path,
                          capture_output=True, text=True).stdout
    box = filesystem_toolbox(root)
    assert ops(patched(box, diff)) == [("M", "pkg/a.py", None)]  # 'before/pkg/a.py' is pkg/a.py
    assert (root / "pkg" / "a.py").read_text() == APP.replace("x = 1", "x = 10")
    (tmp_path / "new.py").write_text(APP.replace("x = 1", "x = 10").replace("return 0", "return 1"))
    diff = subprocess.run(["diff", "-u", "pkg/a.py", str(tmp_path / "new.py")], cwd=root,
                          capture_output=True, text=True).stdout
    assert ops(patched(box, diff)) == [("M", "pkg/a.py", None)]
    assert (root / "pkg" / "a.py").read_text() == APP.replace("x = 1", "x = 10").replace(
        "return 0", "return 1")


def test_dry_run_changes_nothing_and_shows_the_diff(root: Path, box: Toolbox) -> None:
    (root / "app.py").write_text(APP)
    done = patched(box, "*** Begin Patch\n*** Update File: app.py\n-    return 0\n+    return 9\n"
                        "*** Add File: n.txt\n+hello\n*** End Patch", dry_run=True)
    out = done.text
    assert out.splitlines()[:3] == ["dry run: nothing was changed; the patch would do this:",
                                    "M app.py", "A n.txt"]
    assert "+    return 9" in out and "+hello" in out
    assert done.data.dry_run and ops(done) == [("M", "app.py", None), ("A", "n.txt", None)]
    assert "+    return 9" in done.data.files[0].diff.hunks[0].lines
    assert done.data.files[1].diff.hunks[0].lines == ["+hello"]  # a dry run shows new files whole
    assert snapshot(root) == {"app.py": APP.encode()} and box.changed == [] and done.changed == ()


def fifty_files(root: Path) -> dict[str, bytes]:
    for i in range(50):
        (root / f"m{i:02}.py").write_text(f"def f{i}():\n    return {i}\n\n\nX = {i}\n")
    return snapshot(root)


def fifty_file_patch(last_hunk_ok: bool = True) -> str:
    parts = ["*** Begin Patch"]
    for i in range(50):
        value = i if last_hunk_ok or i < 49 else 999  # 999 is nowhere in m49.py
        parts += [f"*** Update File: m{i:02}.py", f"@@ def f{i}():", f"-    return {value}",
                  f"+    return {value} + 1", "@@", f"-X = {i}", f"+X = {i * 2}"]
    return "\n".join([*parts, "*** End Patch"])


def test_a_50_file_patch_lands_whole(root: Path, box: Toolbox) -> None:
    fifty_files(root)
    done = patched(box, fifty_file_patch())
    assert ops(done) == [("M", f"m{i:02}.py", None) for i in range(50)]
    assert [f.diff is not None for f in done.data.files[:9]] == [True] * 8 + [False]
    assert done.data.diffs_cut == 42  # the first 8 files' diffs fill the cap
    assert done.text.splitlines()[:50] == [f"M m{i:02}.py" for i in range(50)]
    assert done.text.splitlines()[-1] == ("[... diffs of 42 more files not shown; read_file them "
                                          "to see the result]")
    assert all((root / f"m{i:02}.py").read_text() == f"def f{i}():\n    return {i} + 1\n\n\nX = {i * 2}\n"
               for i in range(50))
    assert len(box.changed) == 50
    box.revert()
    assert all(f"return {i}\n" in (root / f"m{i:02}.py").read_text() for i in range(50))


def test_a_patch_failing_at_its_last_hunk_leaves_all_50_untouched(root: Path, box: Toolbox) -> None:
    before = fifty_files(root)
    done = patched(box, fifty_file_patch(last_hunk_ok=False))
    out = done.text
    assert done.is_error and out.startswith(
        "ERROR: apply_patch changed nothing: m49.py, hunk 1 of 2 (patch line 346): its lines "
        "were not found.")
    assert "2\t    return 49" in out  # what the file holds near the spot
    assert snapshot(root) == before and box.changed == []


@pytest.mark.parametrize(("text", "says"), [
    ("*** Begin Patch\n*** Update File: ../outside/secret.txt\n-TOP SECRET\n+x\n*** End Patch",
     "escapes the agent root"),
    ("*** Begin Patch\n*** Add File: /etc/loki-test\n+x\n*** End Patch", "escapes the agent root"),
    ("*** Begin Patch\n*** Update File: a.txt\n*** Move to: ../outside/a.txt\n*** End Patch",
     "escapes the agent root"),
    ("*** Begin Patch\n*** Update File: missing.txt\n-a\n+b\n*** End Patch",
     "missing.txt does not exist (patch line 2); to create it use '*** Add File: missing.txt'"),
    ("*** Begin Patch\n*** Add File: a.txt\n+b\n*** End Patch", "a.txt already exists"),
    ("*** Begin Patch\n*** Update File: a.txt\n-nowhere\n+b\n*** End Patch",
     "a.txt, hunk 1 of 1 (patch line 3): its lines were not found"),
    ("*** Begin Patch\n*** Update File: a.txt\nbad line\n*** End Patch",
     "line 3 ('bad line'): a hunk line starts with ' ' (context)"),
    ("*** Begin Patch\n*** Frobnicate File: a.txt\n*** End Patch", "expected '*** Add File: <path>'"),
    ("just some text", "the patch is neither Codex's format"),
    ("diff --git a/x.bin b/x.bin\nBinary files a/x.bin and b/x.bin differ\n",
     "binary patches are not supported"),
    ("*** Begin Patch\n*** Update File: a.txt\n*** Move to: link\n*** End Patch",
     "path 'link' escapes the agent root"),
    ("*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n*** Add File: b.txt\n+x\n",
     "b.txt already exists"),
    ("*** Begin Patch\n*** Add File: sub/\n+x\n*** End Patch", "names a folder"),
    ("*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** Add File: a\x00b\n+x\n*** End Patch",
     "contains a NUL byte"),
])
def test_bad_patches_change_nothing(root: Path, box: Toolbox, text: str, says: str) -> None:
    (root / "a.txt").write_text("a\n")
    (root / "link").symlink_to(root.parent / "outside" / "secret.txt")
    before = snapshot(root)
    done = patched(box, text)
    assert done.is_error and says in done.data.message, done.text
    assert snapshot(root) == before and box.changed == []
    assert (root.parent / "outside" / "secret.txt").read_text() == "TOP SECRET\n"
    assert not Path("/etc/loki-test").exists()


def test_a_symlink_inside_the_root_to_outside_is_not_patched(root: Path, box: Toolbox) -> None:
    (root / "link.txt").symlink_to(root.parent / "outside" / "secret.txt")
    done = patched(box, "*** Begin Patch\n*** Update File: link.txt\n-TOP SECRET\n+pwned\n")
    assert done.data.category == "path" and "escapes the agent root" in done.data.message
    assert (root.parent / "outside" / "secret.txt").read_text() == "TOP SECRET\n"


@pytest.fixture
def not_temp(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("systemtmp")))


def test_confirm_is_asked_once_per_existing_file_and_a_no_changes_nothing(
        root: Path, not_temp: None) -> None:
    asked: list[str] = []
    diffs: list[str] = []

    def answer(action: str) -> bool:
        asked.append(action)
        diffs.append(getattr(action, "diff", ""))
        return not action.startswith("delete")

    for name in ("a.txt", "b.txt", "c.txt"):
        (root / name).write_text(f"{name}\n")
    before = snapshot(root)
    box = filesystem_toolbox(root, confirm=answer)
    text = ("*** Begin Patch\n*** Update File: a.txt\n-a.txt\n+A\n*** Add File: new.txt\n+n\n"
            "*** Update File: b.txt\n*** Move to: bb.txt\n*** Delete File: c.txt\n"
            "*** Update File: a.txt\n-A\n+AA\n*** End Patch")
    refused = patched(box, text)
    assert refused.text == "REFUSED: user declined to delete c.txt"
    assert refused.refused and (refused.data.verb, refused.data.path) == ("delete", "c.txt")
    assert asked == ["edit a.txt", "move b.txt to bb.txt", "delete c.txt"]
    assert diffs[0] == "--- a.txt\n+++ a.txt\n@@ -1,1 +1,1 @@\n-a.txt\n+AA"
    assert snapshot(root) == before and box.changed == []


def test_loose_hunks_and_scopes(root: Path, box: Toolbox) -> None:
    src = "class A:\n\tdef f(self):\n\t\treturn 1\n\nclass B:\n\tdef f(self):\n\t\treturn 1\n"
    (root / "t.py").write_text(src)
    out = patch(box, "*** Begin Patch\n*** Update File: t.py\n"
                     " def f(self):\n-    return 1\n+    return 2\n*** End Patch")
    assert "its lines appear 2x when indentation is ignored (at lines 2-3, 6-7)" in out
    done = patched(box, "*** Begin Patch\n*** Update File: t.py\n@@ class B:\n"
                        " def f(self):\n-    return 1\n+    return 2\n*** End Patch")
    assert done.text.splitlines()[0] == "M t.py (hunk 1 matched ignoring indentation)"
    (file,) = done.data.files
    assert [(h.hunk, h.ignored) for h in file.loose] == [(1, "indentation")]
    assert (root / "t.py").read_text() == src[:-2] + "2\n"


def test_unified_line_numbers_pick_among_equal_places(root: Path, box: Toolbox) -> None:
    (root / "r.txt").write_text("x\ny\nx\ny\n")
    done = patched(box, "--- a/r.txt\n+++ b/r.txt\n@@ -3,2 +3,2 @@\n x\n-y\n+Y\n")
    assert ops(done) == [("M", "r.txt", None)] and (root / "r.txt").read_text() == "x\ny\nx\nY\n"
    assert done.data.files[0].diff.hunks[0].old_start == 2


def test_wrapped_crlf_and_no_newline_patches(root: Path, box: Toolbox) -> None:
    (root / "w.txt").write_bytes(b"a\r\nb\r\n")
    fenced = "```diff\r\n--- a/w.txt\r\n+++ b/w.txt\r\n@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n+c\r\n```\r\n"
    assert ops(patched(box, fenced)) == [("M", "w.txt", None)]
    assert (root / "w.txt").read_bytes() == b"a\r\nc\r\n"
    (root / "n.txt").write_text("one\ntwo")
    heredoc = ("apply_patch <<'EOF'\n--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n one\n-two\n"
               "\\ No newline at end of file\n+three\nEOF\n")
    assert ops(patched(box, heredoc)) == [("M", "n.txt", None)]
    assert (root / "n.txt").read_text() == "one\nthree\n"


def test_utf16_and_latin1_files_keep_their_encoding(root: Path, box: Toolbox) -> None:
    (root / "u.txt").write_bytes("\ufeffh\u00e9\nz\n".encode("utf-16-le"))
    (root / "l.txt").write_bytes("caf\u00e9\n".encode("latin-1"))
    done = patched(box, "*** Begin Patch\n*** Update File: u.txt\n-z\n+\u00fc\n"
                        "*** Update File: l.txt\n-caf\u00e9\n+th\u00e9\n*** End Patch")
    assert ops(done) == [("M", "u.txt", None), ("M", "l.txt", None)]
    assert (root / "u.txt").read_bytes() == "\ufeffh\u00e9\n\u00fc\n".encode("utf-16-le")
    assert (root / "l.txt").read_bytes() == "th\u00e9\n".encode("latin-1")


def test_patching_twice_says_it_is_already_applied(root: Path, box: Toolbox) -> None:
    (root / "app.py").write_text(APP)
    text = "--- a/app.py\n+++ b/app.py\n@@ -7,2 +7,2 @@\n def other():\n-    return 0\n+    return 1\n"
    assert ops(patched(box, text)) == [("M", "app.py", None)]
    again = patched(box, text)
    assert again.is_error and "the patch looks already applied there" in again.text


def test_hostile_sizes_are_bounded(root: Path, box: Toolbox) -> None:
    (root / "a.txt").write_text("a\n")
    huge_counts = "--- a/a.txt\n+++ b/a.txt\n@@ -1,999999999 +1,999999999 @@\n-a\n+b\n"
    assert ops(patched(box, huge_counts)) == [("M", "a.txt", None)]
    many = "*** Begin Patch\n" + "".join(f"*** Add File: d/f{i}.txt\n+{i}\n" for i in range(3000))
    done = patched(box, many)
    assert ops(done) == [("A", f"d/f{i}.txt", None) for i in range(3000)]  # the data has all
    out = done.text
    assert out.splitlines()[0] == "A d/f0.txt" and len(out) < 100_000
    assert out.splitlines()[-1] == ("[... 2700 more files not shown; the diffs below cover the "
                                    "first ones]")
    assert len(list((root / "d").iterdir())) == 3000


def test_a_process_killed_mid_patch_leaves_every_file_whole(root: Path) -> None:
    """50 files of 2 MB each; the child applying the patch is SIGKILLed while it writes
    (staging or renaming): every file holds its old bytes or its new ones, never a part."""
    lines = "".join(f"row {j} {'.' * 60}\n" for j in range(30_000))
    for i in range(50):
        (root / f"big{i:02}.txt").write_text(f"head {i}\n{lines}")
    old = {i: (root / f"big{i:02}.txt").read_bytes() for i in range(50)}
    text = "*** Begin Patch\n" + "".join(
        f"*** Update File: big{i:02}.txt\n-head {i}\n+HEAD {i}\n" for i in range(50))
    code = ("import sys\nfrom yggdrasil.loki.tools import filesystem_toolbox\n"
            f"filesystem_toolbox({str(root)!r}).call('apply_patch', {{'patch': sys.stdin.read()}})\n")
    scratch = root.parent / "child-tmp"
    scratch.mkdir()
    for delay in (0.4, 0.9, 1.4, None):  # None: kill as soon as the first file is renamed
        first = (root / "big00.txt").stat().st_ino
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(SRC), "TMPDIR": str(scratch)})
        assert proc.stdin is not None
        proc.stdin.write(text.encode())
        proc.stdin.close()
        if delay is None:
            while proc.poll() is None and (root / "big00.txt").stat().st_ino == first:
                pass
            proc.kill()
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for i in range(50):
            data = (root / f"big{i:02}.txt").read_bytes()
            assert data in (old[i], old[i].replace(b"head", b"HEAD", 1)), i
        for i in range(50):  # back to the start for the next delay
            (root / f"big{i:02}.txt").write_bytes(old[i])
        for stray in root.glob(".*.loki-*.tmp"):
            stray.unlink()  # a kill can leave a staged temp file; never a half-written target
    shutil.rmtree(scratch)


def test_a_new_file_below_a_file_is_refused_before_anything_changes(root: Path, box: Toolbox) -> None:
    (root / "a.txt").write_text("a\n")
    done = patched(box, "*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n"
                        "*** Add File: a.txt/inner.txt\n+x\n*** End Patch")
    assert done.text == ("ERROR: apply_patch changed nothing: a.txt is a file, not a folder; "
                         "a.txt/inner.txt cannot be created below it")
    assert done.data.category == "path"  # the PathError's category survives the wrapping
    assert (root / "a.txt").read_text() == "a\n" and box.changed == []


def test_what_a_patch_may_read_and_rework_is_bounded(root: Path, box: Toolbox,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from yggdrasil.loki.files.edits import _apply

    monkeypatch.setattr(_apply, "MAX_PATCH_BYTES", 1000)  # the real one is 256 MB
    body = "".join(f"line {j}\n" for j in range(100))  # 790 bytes
    for i in range(3):
        (root / f"f{i}.txt").write_text(body)
    text = "*** Begin Patch\n" + "".join(
        f"*** Update File: f{i}.txt\n-line 5\n+LINE 5\n" for i in range(3))
    assert "the patch touches more than 1000 bytes of files; apply it in parts" in patch(box, text)
    monkeypatch.setattr(_apply, "MAX_PATCH_WORK", 2000)
    same = "*** Begin Patch\n" + "*** Update File: f0.txt\n-line 5\n+line 5\n" * 10
    assert "updates the same large files over and over" in patch(box, same)
    assert all((root / f"f{i}.txt").read_text() == body for i in range(3))


def test_codex_end_of_file_anchors_a_hunk_at_the_end(root: Path, box: Toolbox) -> None:
    text = "def a():\n    return 0\n\n\ndef b():\n    return 0\n"
    (root / "m.py").write_text(text)
    hunk = "*** Begin Patch\n*** Update File: m.py\n@@\n-    return 0\n+    return 1\n"
    assert ops(patched(box, hunk + "*** End of File\n*** End Patch\n")) == [("M", "m.py", None)]
    assert (root / "m.py").read_text() == text[: text.rfind("0")] + "1\n"  # the last one only
    again = patched(box, "*** Begin Patch\n*** Update File: m.py\n@@\n-    return 1\n"
                         "+    return 2\n*** End of File\n*** End Patch\n")
    assert again.data.files[0].diff.hunks[0].lines[-2:] == ["-    return 1", "+    return 2"]
    assert (root / "m.py").read_text().endswith("return 2\n") and text.count("return 0") == 2
    misplaced = ("*** Begin Patch\n*** Update File: m.py\n@@\n-def a():\n+def c():\n"
                 "*** End of File\n*** End Patch\n")
    # As in Codex, the marker is a preference: lines found only elsewhere still match there.
    assert ops(patched(box, misplaced)) == [("M", "m.py", None)]
    assert (root / "m.py").read_text().startswith("def c():\n    return 0\n")


@pytest.mark.parametrize("text", [
    # openai/codex's scenarios 017, 018 and 020: padded file header, Begin and End lines
    "*** Begin Patch\n  *** Update File: foo.txt\n@@\n-old\n+new\n*** End Patch\n",
    " *** Begin Patch\n*** Update File: foo.txt\n@@\n-old\n+new\n*** End Patch \n",
    "*** Begin Patch \n*** Update File: foo.txt\n@@\n-old\n+new\n *** End Patch\n",
    "\t*** Begin Patch\n\t*** Update File: foo.txt \n  @@  \n-old\n+new\n  *** End of File \n"
    "  *** End Patch\t\n",
    "*** Begin Patch\n*** Update File: foo.txt\n  @@ -1,2 +1,2 @@ \n-old\n+new\n end\n",
])
def test_whitespace_around_marker_lines_is_forgiven(root: Path, box: Toolbox, text: str) -> None:
    (root / "foo.txt").write_text("old\nend\n")
    assert ops(patched(box, text)) == [("M", "foo.txt", None)]
    assert (root / "foo.txt").read_text() == "new\nend\n"


def test_a_content_line_that_reads_as_a_marker_stays_content(root: Path, box: Toolbox) -> None:
    (root / "notes.txt").write_text("top\n *** End Patch\n*** End of File\nend\n")
    done = patched(box, "*** Begin Patch\n*** Update File: notes.txt\n@@\n top\n"
                        "+*** End Patch\n+  *** Update File: x.txt\n"  # added lines, not markers
                        "  *** End Patch\n"  # a context line: more of the hunk follows
                        "-*** End of File\n+ *** End of File\n end\n*** End Patch\n")
    assert ops(done) == [("M", "notes.txt", None)]
    assert (root / "notes.txt").read_text() == (
        "top\n*** End Patch\n  *** Update File: x.txt\n *** End Patch\n *** End of File\nend\n")
    assert not (root / "x.txt").exists()
    (root / "n.txt").write_text("a\n")
    out = patch(box, "*** Begin Patch\n*** Add File: made.txt\n+*** End Patch\n+ *** End Patch\n"
                     "*** End Patch\n")
    assert (root / "made.txt").read_text() == "*** End Patch\n *** End Patch\n", out


def test_add_onto_an_existing_file_and_move_onto_one_stay_refused(root: Path, box: Toolbox) -> None:
    (root / "a.txt").write_text("a\n")
    (root / "b.txt").write_text("b\n")
    out = patched(box, "  *** Begin Patch\n  *** Add File: a.txt\n+x\n *** End Patch ")
    assert out.is_error and "a.txt already exists" in out.text, out.text
    out = patched(box, "*** Begin Patch\n *** Update File: a.txt\n *** Move to: b.txt\n"
                       "*** End Patch")
    assert out.is_error and "b.txt" in out.text, out.text
    assert (root / "a.txt").read_text() == "a\n" and (root / "b.txt").read_text() == "b\n"


MODULE = ('"""A module.\n\nclass NotAClass:\n    """\n\n\nclass A:\n    def m(self):\n'
          '        return 1\n\n    def n(self):\n        return 2\n\n\ndef f(x):\n    return x\n')


@pytest.mark.parametrize(("old", "new", "says"), [
    ("        return 1", "        return (1", "line 9"),  # inside a method
    ("    return x", "return x", "line 16: expected an indented block after function "
                               "definition on line 15"),  # out of its def
    ("        return 2", "    return 2", "no longer parses"),  # a method's body dedented
    ("    def n(self):", "    def n(self)", "line 11"),  # the definition line itself
])
def test_a_patch_that_breaks_one_definition_is_caught_by_its_piece(
        tmp_path: Path, old: str, new: str, says: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "m.py").write_text(MODULE)
    box = filesystem_toolbox(root)
    done = patched(box, f"*** Begin Patch\n*** Update File: m.py\n@@\n-{old}\n+{new}\n*** End Patch")
    (warning,) = done.data.warnings
    assert warning.startswith("WARNING: m.py no longer parses") and says in warning, warning
    assert done.text.endswith(f"\n{warning}")
    strict = filesystem_toolbox(root, on_syntax_error="reject")
    (root / "m.py").write_text(MODULE)
    out = patched(strict, f"*** Begin Patch\n*** Update File: m.py\n@@\n-{old}\n+{new}\n*** End Patch")
    assert out.is_error and (root / "m.py").read_text() == MODULE, out.text


def test_a_patch_that_keeps_every_definition_whole_passes_the_gate(root: Path, box: Toolbox) -> None:
    (root / "m.py").write_text(MODULE)
    done = patched(box, "*** Begin Patch\n*** Update File: m.py\n@@\n-        return 1\n"
                        "+        return 10  # changed\n@@\n-    return x\n+    return -x\n*** End Patch")
    assert ops(done) == [("M", "m.py", None)] and done.data.warnings == [], done.text
    (root / "b.py").write_text("def f(:\n    pass\n\n\ndef g():\n    return 1\n")
    done = patched(box, "*** Begin Patch\n*** Update File: b.py\n@@\n-    return 1\n+    return 2\n"
                        "*** End Patch")
    assert done.data.warnings == [], done.text  # broken before, elsewhere: not broken by it


def test_comment_only_changes_skip_the_parse_but_a_continued_line_does_not(
        root: Path, box: Toolbox) -> None:
    (root / "c.py").write_text("x = 1 + \\\n    2\ny = 3\n")
    done = patched(box, "*** Begin Patch\n*** Update File: c.py\n@@\n-y = 3\n+y = 3  # three\n"
                        "+# a note\n*** End Patch")
    assert ops(done) == [("M", "c.py", None)] and done.data.warnings == [], done.text
    done = patched(box, "*** Begin Patch\n*** Update File: c.py\n@@\n x = 1 + \\\n+# breaks it\n"
                        "     2\n*** End Patch")
    assert [w.startswith("WARNING: c.py no longer parses") for w in done.data.warnings] == [True]


def test_the_gate_reads_each_file_as_the_whole_patch_leaves_it(root: Path, box: Toolbox) -> None:
    """The plan hands the gate the lines it split: a file updated by two sections of one
    patch, and one moved and changed, are checked on their final text against their
    original one (no file ending in a newline, one that does not)."""
    (root / "m.py").write_text(MODULE)
    (root / "n.py").write_text("def f(x):\n    return x")  # no final newline
    done = patched(box, "*** Begin Patch\n*** Update File: m.py\n@@\n-        return 1\n"
                        "+        return 10\n*** Update File: m.py\n@@\n-    return x\n"
                        "+    return (x\n*** Update File: n.py\n*** Move to: o.py\n@@\n"
                        "-    return x\n+    return [x\n*** End Patch")
    assert ops(done) == [("M", "m.py", None), ("R", "n.py", "o.py")]
    warned = done.data.warnings
    assert [w.startswith(("WARNING: m.py no longer parses: line 16",
                          "WARNING: o.py no longer parses: line 2")) for w in warned] == [True] * 2
    assert (root / "m.py").read_text().count("return 10") == 1
    done = patched(box, "*** Begin Patch\n*** Update File: m.py\n@@\n-    return (x\n"
                        "+    return x\n*** Update File: m.py\n@@\n-        return 10\n"
                        "+        return 11  # a comment\n*** Update File: o.py\n@@\n"
                        "-    return [x\n+    return [x]\n*** End Patch")
    assert ops(done) == [("M", "m.py", None), ("M", "o.py", None)] and done.data.warnings == []
    assert (root / "o.py").read_text() == "def f(x):\n    return [x]"
