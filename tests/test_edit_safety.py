"""What the edit tools promise about the user's files: stale views, syntax, encodings,
setuid bits, huge files, and undo."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import SRC
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def test_a_file_changed_since_it_was_read_is_not_edited(root: Path, box: Toolbox) -> None:
    target = root / "cli.py"
    target.write_text("verbose = False\n")
    box.call("read_file", {"path": "cli.py"})
    target.write_text("verbose = False\ncolor = True\n")  # the user saves in an editor
    out = box.call("edit_file", {"path": "cli.py", "old": "False", "new": "True"})
    assert out == ("ERROR: cli.py changed since you last read it (it is now 29 bytes; it was "
                   "16); read it again")
    assert target.read_text() == "verbose = False\ncolor = True\n"
    for tool, args in (("write_file", {"content": "x"}),
                       ("apply_patch", {"patch": "*** Begin Patch\n*** Delete File: cli.py\n"})):
        done = box.invoke(tool, {"path": "cli.py", **args} if tool == "write_file" else args)
        assert done.is_error and "cli.py changed since you last read it" in done.text, tool
    box.call("read_file", {"path": "cli.py"})  # reading again clears the guard
    edited = box.invoke("edit_file", {"path": "cli.py", "old": "False", "new": "True"})
    assert edited.ok and edited.data.replacements == 1


def test_the_guard_sees_same_size_rewrites_and_replacements(root: Path, box: Toolbox) -> None:
    target = root / "a.txt"
    target.write_text("one\n")
    box.call("read_file", {"path": "a.txt"})
    st = target.stat()
    target.write_text("two\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, mtime put back
    assert "changed since you last read it" in box.call(
        "edit_file", {"path": "a.txt", "old": "two", "new": "2"})
    box.call("read_file", {"path": "a.txt"})
    (root / "b.txt").write_text("six\n")
    os.replace(root / "b.txt", target)
    assert "another file was put in its place" in box.call(
        "edit_file", {"path": "a.txt", "old": "six", "new": "6"})


def test_the_toolbox_own_writes_and_never_read_files_are_not_stale(root: Path, box: Toolbox) -> None:
    (root / "never.txt").write_text("a\n")
    assert box.invoke("edit_file", {"path": "never.txt", "old": "a", "new": "b"}).ok
    assert box.invoke("edit_file", {"path": "never.txt", "old": "b", "new": "c"}).ok
    assert (root / "never.txt").read_text() == "c\n"
    box.call("write_file", {"path": "w.txt", "content": "1"})
    assert box.invoke("write_file", {"path": "w.txt", "content": "2"}).data.created is False
    box.call("read_file", {"path": "w.txt"})
    (root / "w.txt").unlink()  # gone since read: writing it again creates it
    assert box.invoke("write_file", {"path": "w.txt", "content": "3"}).data.created is True


def test_a_command_that_rewrites_a_read_file_makes_the_view_stale(root: Path, box: Toolbox) -> None:
    (root / "f.py").write_text("x=1\n")
    box.call("read_file", {"path": "f.py"})
    box.call("run", {"command": "printf 'x = 1\\n' > f.py"})  # a formatter
    assert "f.py changed since you last read it" in box.call(
        "edit_file", {"path": "f.py", "old": "x = 1", "new": "x = 2"})


def test_syntax_gate_reject_leaves_the_file_untouched(root: Path) -> None:
    box = filesystem_toolbox(root, on_syntax_error="reject")
    (root / "ok.py").write_text("def f():\n    return 1\n")
    out = box.call("edit_file", {"path": "ok.py", "old": "return 1", "new": "return (1"})
    assert out.startswith("ERROR: ok.py would no longer parse (line 2: ")
    assert "nothing was changed" in out and (root / "ok.py").read_text() == "def f():\n    return 1\n"
    out = box.call("write_file", {"path": "new.json", "content": '{"a": }'})
    assert out.startswith("ERROR: new.json would no longer parse (line 1: ")
    assert not (root / "new.json").exists()
    for name, bad in (("c.toml", "a = = 1"), ("c.yaml", "a: [1, 2\n")):
        (root / name).write_text("a = 1\n" if name.endswith("toml") else "a: 1\n")
        assert "would no longer parse" in box.call("write_file", {"path": name, "content": bad})
    assert box.changed == []


def test_syntax_gate_reject_lets_a_broken_file_be_repaired_step_by_step(root: Path) -> None:
    box = filesystem_toolbox(root, on_syntax_error="reject")
    (root / "b.py").write_text("def f(:\n    return 1\n")
    out = box.invoke("edit_file", {"path": "b.py", "old": "return 1", "new": "return 2"})
    assert out.ok and out.data.replacements == 1
    (warning,) = out.data.warnings
    assert warning.startswith("WARNING: b.py does not parse") and "nor did it before this change" in warning
    fixed = box.invoke("edit_file", {"path": "b.py", "old": "f(:", "new": "f():"})
    assert fixed.ok and fixed.data.warnings == []


@pytest.mark.parametrize(("name", "good", "bad", "said"), [
    ("a.js", "function f() { return 1; }\n", "function f() { return 1;\n", "missing '}'"),
    ("a.ts", "const x: number = 1;\n", "const x: number = ;\n", "line 1: "),
    ("m.go", "package m\n\nfunc F() int { return 1 }\n", "package m\n\nfunc F() int { return }}\n",
     "line 3: "),
    ("a.rs", "fn main() { let x = 1; }\n", "fn main() { let x = ; }\n", "line 1: syntax error"),
    ("a.sh", "if true; then echo hi; fi\n", "if true; then echo hi\n", "missing 'fi'"),
    ("A.java", "class A { int f() { return 1; } }\n", "class A { int f() { return 1; }\n", "line 1: "),
])
def test_syntax_gate_covers_the_code_navigation_languages(
        root: Path, name: str, good: str, bad: str, said: str) -> None:
    pytest.importorskip("tree_sitter_language_pack")
    box = filesystem_toolbox(root, on_syntax_error="reject")
    good_one = box.invoke("write_file", {"path": name, "content": good}).data
    assert good_one.created and good_one.warnings == []
    out = box.call("write_file", {"path": name, "content": bad})
    assert out.startswith(f"ERROR: {name} would no longer parse (") and said in out, out
    assert "grammar)" in out and (root / name).read_text() == good
    # a grammar approximates its language: a new file it cannot read gets a warning only
    new = box.invoke("write_file", {"path": f"new_{name}", "content": bad}).data
    assert new.created and [w.startswith(f"WARNING: new_{name} no longer parses")
                            for w in new.warnings] == [True], new


def test_the_gate_never_refuses_a_new_c_file_a_grammar_misreads(root: Path) -> None:
    pytest.importorskip("tree_sitter_language_pack")
    box = filesystem_toolbox(root, on_syntax_error="reject")
    xmacros = ("#define LIST(X) X(a) X(b)\n#define DECL(n) int n;\nLIST(DECL)\n"
               "int main(void) { return a + b; }\n")
    out = box.invoke("write_file", {"path": "x.c", "content": xmacros})
    assert out.ok and (out.data.path, out.data.created) == ("x.c", True), out.text
    assert (root / "x.c").read_text() == xmacros


def test_syntax_gate_knows_yaml_streams_tags_and_json_with_comments(root: Path) -> None:
    box = filesystem_toolbox(root, on_syntax_error="reject")
    valid = {
        "k8s.yaml": "kind: A\n---\nkind: B\n",
        "cfn.yaml": "Value: !Ref Bucket\nArn: !GetAtt [Role, Arn]\n",
        "tsconfig.json": '{\n  // strict\n  "strict": true, /* a\n b */ "url": "http://x",\n}\n',
        ".vscode/settings.json": '{"a": "quote \\" // not a comment", // one\n}\n',
        "b.jsonc": "[1, 2, // two\n]\n",
    }
    for name, text in valid.items():
        out = box.invoke("write_file", {"path": name, "content": text})
        assert out.ok and out.data.created and out.data.warnings == [], out.text
    out = box.call("write_file", {"path": "package.json", "content": '{\n  // no\n}\n'})
    assert out.startswith("ERROR: package.json would no longer parse (line 2: ")  # strict JSON
    out = box.call("write_file", {"path": "c.yaml", "content": "a: 1\nb: c: d\n"})
    assert "(line 2, column 5: mapping values are not allowed here)" in out
    out = box.call("write_file", {"path": "tsconfig.json", "content": '{\n  "a": 1\n  "b": 2\n}'})
    assert out.startswith("ERROR: tsconfig.json would no longer parse (line 3: ")


def test_syntax_gate_value_is_checked(root: Path) -> None:
    with pytest.raises(ValueError, match="on_syntax_error must be 'warn' or 'reject'"):
        filesystem_toolbox(root, on_syntax_error="ignore")  # type: ignore[arg-type]


def test_a_stray_byte_in_a_utf8_file_is_kept_and_new_text_is_utf8(root: Path, box: Toolbox) -> None:
    """Before: the file fell back to latin-1, so 'café' was never found and an added 'é'
    was written as the single byte 0xE9 in a UTF-8 file."""
    data = "# caf\u00e9\n".encode() + b"stray = '\xff'\n" + "name = 'caf\u00e9'\n".encode()
    (root / "m.py").write_bytes(data)
    out = box.invoke("edit_file", {"path": "m.py", "old": "name = 'caf\u00e9'",
                                   "new": "name = 'th\u00e9'"})
    assert [(e.replacements, e.match) for e in out.data.edits] == [(1, "exact")]
    assert (root / "m.py").read_bytes() == data.replace("caf\u00e9'".encode(), "th\u00e9'".encode())
    assert "+name = 'th\u00e9'" in out.data.diff.hunks[0].lines
    out = box.call("edit_file", {"path": "m.py", "old": "# caf", "new": "# d\u00e9j\u00e0 caf"})
    assert (root / "m.py").read_bytes().startswith("# d\u00e9j\u00e0 caf\u00e9\n".encode() + b"stray = '\xff'")


def test_a_latin1_file_gets_latin1_bytes(root: Path, box: Toolbox) -> None:
    (root / "l1.txt").write_bytes("caf\u00e9 au lait\n".encode("latin-1"))
    box.call("edit_file", {"path": "l1.txt", "old": "lait", "new": "th\u00e9"})
    assert (root / "l1.txt").read_bytes() == "caf\u00e9 au th\u00e9\n".encode("latin-1")
    out = box.call("edit_file", {"path": "l1.txt", "old": "th", "new": "\u20ac"})
    assert "cannot hold" in out and (root / "l1.txt").read_bytes().endswith(b"th\xe9\n")


def test_utf16_with_bom_and_crlf_with_a_loose_match(root: Path, box: Toolbox) -> None:
    text = "def f():\r\n\tif x:\r\n\t\treturn '\u00e9'\r\n"
    (root / "w.py").write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    out = box.invoke("edit_file", {"path": "w.py", "old": "    if x:\n        return '\u00e9'",
                                   "new": "    if x:\n        return '\u00e8'"})
    assert [(e.match, e.ignored) for e in out.data.edits] == [("loose", ["indentation"])]
    assert (root / "w.py").read_bytes() == b"\xff\xfe" + text.replace("\u00e9", "\u00e8").encode("utf-16-le")


def test_binary_files_are_not_edited(root: Path, box: Toolbox) -> None:
    (root / "b.bin").write_bytes(b"abc\0def")
    out = box.call("edit_file", {"path": "b.bin", "old": "abc", "new": "x"})
    assert out == "ERROR: b.bin is a binary file; the edit tools change text files only"


@pytest.mark.parametrize("bits", [stat.S_ISUID, stat.S_ISGID, stat.S_ISUID | stat.S_ISGID])
def test_overwrites_and_edits_clear_setuid_and_setgid(root: Path, box: Toolbox, bits: int) -> None:
    """Before: write_file kept the setuid bit of the program it rewrote."""
    for name in ("w.sh", "e.sh", "p.sh"):
        (root / name).write_text("echo old\n")
        (root / name).chmod(0o755 | bits)
    box.call("write_file", {"path": "w.sh", "content": "echo new\n"})
    box.call("edit_file", {"path": "e.sh", "old": "old", "new": "new"})
    box.call("apply_patch", {"patch": "*** Begin Patch\n*** Update File: p.sh\n-echo old\n+echo new\n"})
    for name in ("w.sh", "e.sh", "p.sh"):
        assert (root / name).read_text() == "echo new\n"
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o755, name


def test_a_1gib_file_is_refused_with_its_limit_in_bounded_memory(root: Path) -> None:
    """Before: the whole file was read and decoded (over 1.5 GB). A sparse file costs no disk;
    the edit runs in a child whose peak memory is measured."""
    big = root / "huge.log"
    with open(big, "wb") as fh:
        fh.write(b"needle\n")
        fh.truncate(1 << 30)
    code = (
        "import sys\n"
        "from yggdrasil.loki.tools import filesystem_toolbox\n"
        f"box = filesystem_toolbox({str(root)!r})\n"
        "print(box.call('edit_file', {'path': 'huge.log', 'old': 'needle', 'new': 'pin'}))\n"
        "print(box.call('apply_patch', {'patch': '*** Begin Patch\\n*** Update File: huge.log\\n"
        "-needle\\n+pin\\n'}))\n"
        # VmHWM: this process's own peak (ru_maxrss starts from the parent's at fork)
        "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print(peak.split()[1], file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=120)
    edit, patch = done.stdout.splitlines()
    assert edit == ("ERROR: huge.log is larger than 64.0 MB, the most the edit tools change in "
                    "one go (an edit holds the file in memory several times); change it with "
                    "run (sed, or a script that streams it) or split it")
    assert patch.startswith("ERROR: apply_patch changed nothing: huge.log is larger than 64.0 MB")
    assert int(done.stderr.strip()) < 200_000  # KiB: the file was never read
    assert big.stat().st_size == 1 << 30


def test_undo_edit_puts_one_file_back(root: Path, box: Toolbox) -> None:
    (root / "a.py").write_text("a = 1\n")
    (root / "b.py").write_text("b = 1\n")
    box.call("edit_file", {"path": "a.py", "old": "1", "new": "2"})
    box.call("edit_file", {"path": "a.py", "old": "2", "new": "3"})
    box.call("edit_file", {"path": "b.py", "old": "1", "new": "2"})
    box.call("write_file", {"path": "new/c.py", "content": "c\n"})
    assert box.call("undo_edit", {"path": "a.py"}) == "restored a.py to what it held before this run changed it"
    assert (root / "a.py").read_text() == "a = 1\n" and (root / "b.py").read_text() == "b = 2\n"
    assert box.changed == ["b.py", "new/c.py"]
    removed = box.invoke("undo_edit", {"path": "./new/c.py"})
    assert removed.text == "removed new/c.py (this run created it)"
    assert (removed.data.kind, removed.data.path, removed.data.outcome) == ("undo", "new/c.py", "removed")
    assert not (root / "new").exists()  # the folder made for it went too
    out = box.call("undo_edit", {"path": "a.py"})
    assert out == "ERROR: a.py was not changed in this run; nothing to undo (files changed so far: b.py)"
    escape = box.invoke("undo_edit", {"path": "../outside/secret.txt"})
    assert escape.data.category == "path" and "escapes the agent root" in escape.text
    assert box.invoke("edit_file", {"path": "b.py", "old": "2", "new": "3"}).ok


def test_undo_edit_data_says_what_became_of_the_file(root: Path, box: Toolbox) -> None:
    (root / "a.py").write_text("a = 1\n")
    box.call("edit_file", {"path": "a.py", "old": "1", "new": "2"})
    restored = box.invoke("undo_edit", {"path": "a.py"})
    assert (restored.data.path, restored.data.outcome) == ("a.py", "restored")
    assert (root / "a.py").read_text() == "a = 1\n"
    box.call("write_file", {"path": "t.txt", "content": "t"})
    (root / "t.txt").unlink()  # created and removed again: nothing to put back
    already = box.invoke("undo_edit", {"path": "t.txt"})
    assert (already.data.outcome, already.ok) == ("already", True)
    assert already.text == "t.txt is already as it was before this run (created and removed again)"


def test_revert_paths_reverts_only_those(root: Path, box: Toolbox) -> None:
    for name in ("x.txt", "y.txt"):
        (root / name).write_text("old\n")
        box.call("write_file", {"path": name, "content": "new\n"})
    report = box.revert(["y.txt", str(root / "x.txt")])
    assert sorted(report.restored) == ["x.txt", "y.txt"] and box.changed == []
    # revert rewrote x.txt: what the model last saw of it is stale until it reads it again
    assert "changed since you last read it" in box.call("write_file", {"path": "x.txt", "content": "!"})
    box.call("read_file", {"path": "x.txt"})
    box.call("write_file", {"path": "x.txt", "content": "again\n"})
    box.call("write_file", {"path": "z.txt", "content": "z\n"})
    report = box.revert(["z.txt"])
    assert report.removed == ["z.txt"] and box.changed == ["x.txt"]
    assert (root / "x.txt").read_text() == "again\n"
    assert str(box.revert()) == "restored x.txt"
