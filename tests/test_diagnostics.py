"""Diagnostics after every edit: ruff for Python, language servers for any language.

Everything here is real: the ruff binary, basedpyright and typescript-language-server
where installed (CI installs them: .ci/run), and a misbehaving LSP server of our own
(tests/lsp_server.py) for crashes, hangs, floods and garbage.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from yggdrasil.loki.diagnostics import Ruff, introduced
from yggdrasil.loki.results import Diagnostic
from yggdrasil.loki.settings import DiagnosticsSettings, Settings, load_settings
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def _fake_where_a_server_sees_it() -> str:
    """tests/lsp_server.py, or a copy in /var/tmp when this checkout is under the temp
    folder (CI clones there): a fenced server's /tmp is private."""
    here = Path(__file__).with_name("lsp_server.py")
    if not here.resolve().is_relative_to(Path(tempfile.gettempdir()).resolve()):
        return str(here)
    folder = Path(tempfile.mkdtemp(prefix="loki-lsp-", dir="/var/tmp"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    folder.chmod(0o755)
    return str(shutil.copy(here, folder / here.name))


FAKE = _fake_where_a_server_sees_it()


def toolbox(root: Path, **diagnostics: Any) -> Toolbox:
    return filesystem_toolbox(root, settings=Settings(
        diagnostics=DiagnosticsSettings(**diagnostics)))


def fake_server(mode: str, **more: Any) -> dict[str, Any]:
    return {"servers": {"fake": {"command": [sys.executable, FAKE, mode],
                                 "languages": {".fake": "fake"}}}, **more}


def found(result: Any) -> list[Diagnostic]:
    return list(result.data.diagnostics)


# -- ruff ----------------------------------------------------------------------------------


def test_an_edit_says_the_undefined_name_it_introduced_and_not_the_old_ones(root: Path) -> None:
    (root / "a.py").write_text("import os\n\nprint(old_name)\n\ndef f(x):\n    return x\n")
    with toolbox(root) as box:
        done = box.invoke("edit_file", {"path": "a.py", "old": "    return x\n",
                                        "new": "    return x + new_name\n"})
    assert done.ok
    assert [(d.path, d.line, d.code, d.symbol, d.source, d.severity) for d in found(done)] == [
        ("a.py", 6, "F821", "new_name", "ruff", "error")]
    assert done.data.diagnosis.preexisting == 2  # old_name and the unused os
    lines = done.text.splitlines()
    assert "diagnostics: this change introduced 1 (1 error)" in lines
    assert "a.py:6:16: error F821 Undefined name `new_name` (ruff)" in lines
    assert any(line.startswith("[2 diagnostics these files already had") for line in lines)
    assert "old_name" not in done.text
    assert (root / "a.py").read_text().endswith("x + new_name\n")  # it landed


def test_a_finding_that_moved_is_not_new(root: Path) -> None:
    (root / "a.py").write_text("def f():\n    return missing\n")
    with toolbox(root) as box:
        done = box.invoke("edit_file", {"path": "a.py", "old": "def f():\n",
                                        "new": "import json\n\n\nprint(json.dumps(1))\n\n\n"
                                               "def f():\n"})
    assert found(done) == []
    assert done.data.diagnosis.preexisting == 1


def test_a_patch_of_many_files_is_checked_by_one_ruff_over_copies(root: Path) -> None:
    # 5 files: 10 texts (before and after), past the 4 that go to ruff on stdin; the
    # copies keep each file's name (__init__.py), each finding goes back to its file
    names = ["pkg/__init__.py", *(f"pkg/m{i}.py" for i in range(4))]
    (root / "pkg").mkdir()
    for name in names:
        (root / name).write_text("import os\n\nprint(old)\nx = 1\n")
    patch = "".join(f"--- a/{name}\n+++ b/{name}\n@@ -4 +4 @@\n-x = 1\n+x = new_{i}\n"
                    for i, name in enumerate(names))
    with toolbox(root) as box:
        box.diagnostician.ruff._seen.clear()  # nothing answered from memory
        done = box.invoke("apply_patch", {"patch": patch})
    assert done.ok, done.text
    assert sorted((d.path, d.line, d.code, d.symbol) for d in found(done)) == sorted(
        (name, 4, "F821", f"new_{i}") for i, name in enumerate(names))
    assert done.data.diagnosis.preexisting == 10  # old and os, in each of the 5


def test_a_second_alike_finding_is_new_and_the_one_in_the_changed_lines(root: Path) -> None:
    (root / "a.py").write_text("print(x)\n\n\n\nprint(1)\n")
    with toolbox(root) as box:
        done = box.invoke("edit_file", {"path": "a.py", "old": "print(1)", "new": "print(x)"})
    assert [(d.line, d.symbol) for d in found(done)] == [(5, "x")]


def test_an_edit_without_new_diagnostics_reads_as_before(root: Path) -> None:
    source = "import os\n\nprint(os.sep, old)\n"
    (root / "with").mkdir()
    (root / "without").mkdir()
    for folder in ("with", "without"):
        (root / folder / "a.py").write_text(source)
    args = {"old": "os.sep", "new": "os.getcwd()"}
    with toolbox(root) as box, toolbox(root, enabled=False) as plain:
        checked = box.invoke("edit_file", {"path": "with/a.py", **args})
        unchecked = plain.invoke("edit_file", {"path": "without/a.py", **args})
        written = box.invoke("write_file", {"path": "with/b.py", "content": "x = 1\n"})
        bare = plain.invoke("write_file", {"path": "without/b.py", "content": "x = 1\n"})
    assert checked.text == unchecked.text.replace("without/", "with/")
    assert written.text == bare.text.replace("without/", "with/")
    assert checked.data.diagnostics == [] and unchecked.data.diagnosis is None


def test_errors_come_first_and_the_caps_hold(root: Path) -> None:
    names = "\n".join(f"print(name_{i})" for i in range(8))
    with toolbox(root, per_file=3, per_call=5) as box:
        done = box.invoke("apply_patch", {"patch": (
            "*** Begin Patch\n*** Add File: a.py\n+import os\n"
            + "".join(f"+{line}\n" for line in names.splitlines())
            + "*** Add File: b.py\n"
            + "".join(f"+{line}\n" for line in names.splitlines())
            + "*** Add File: c.py\n+print(c_name)\n*** End Patch")})
    shown = found(done)
    assert [d.path for d in shown] == ["a.py"] * 3 + ["b.py"] * 2
    assert all(d.severity == "error" for d in shown)  # the unused import waits its turn
    assert done.data.diagnosis.not_shown == 9 + 8 + 1 - 5
    assert "this change introduced 18 (5 errors; 13 more not shown)" in done.text


def test_a_notebook_is_checked_cell_by_cell(root: Path) -> None:
    notebook = {"cells": [
        {"cell_type": "code", "source": ["import json\n"], "metadata": {}, "outputs": [],
         "execution_count": None},
        {"cell_type": "code", "source": ["print(json.dumps(1))\n", "print(nope)\n"],
         "metadata": {}, "outputs": [], "execution_count": None}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    with toolbox(root) as box:
        done = box.invoke("write_file", {"path": "n.ipynb", "content": json.dumps(notebook)})
    assert [(d.cell, d.line, d.code) for d in found(done)] == [(2, 2, "F821")]
    assert "n.ipynb:cell 2:2:7: error F821" in done.text


def test_diagnostics_lists_every_one_of_the_files(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "a.py").write_text("import os\nprint(a)\n")
    (root / "pkg" / "b.py").write_text("print(b)\n")
    (root / "pkg" / "notes.txt").write_text("print(c)\n")
    with toolbox(root) as box:
        report = box.invoke("diagnostics", {"paths": ["pkg"]})
        one = box.invoke("diagnostics", {"paths": ["pkg/b.py"]})
        clean = box.invoke("diagnostics", {"paths": ["pkg/notes.txt"]})
        outside = box.invoke("diagnostics", {"paths": ["../outside"]})
    assert report.data.files == ["pkg/a.py", "pkg/b.py"]
    assert [(d.path, d.code) for d in report.data.diagnostics] == [
        ("pkg/a.py", "F821"), ("pkg/b.py", "F821"), ("pkg/a.py", "F401")]
    assert report.text.splitlines()[0] == "3 diagnostics in 2 files (2 errors, 1 warning)"
    assert one.text.splitlines()[1] == "pkg/b.py:1:7: error F821 Undefined name `b` (ruff)"
    assert clean.data.files == [] and "no file to check" in clean.text
    assert outside.is_error and "escapes" in outside.text


def test_a_ruff_that_fails_never_stops_the_edit(root: Path, tmp_path: Path) -> None:
    broken = tmp_path / "ruff"
    broken.write_text("#!/bin/sh\necho 'ruff: something broke' >&2\nexit 2\n")
    broken.chmod(0o755)
    (root / "a.py").write_text("x = 1\n")
    with toolbox(root) as box:
        assert box.diagnostician is not None
        box.diagnostician.ruff = Ruff(str(broken))
        done = box.invoke("edit_file", {"path": "a.py", "old": "1", "new": "y"})
    assert done.ok and (root / "a.py").read_text() == "x = y\n"
    assert found(done) == []
    assert done.data.diagnosis.problems == [
        "ruff could not check the files: ruff failed (exit 2): ruff: something broke"]
    assert "[diagnostics: ruff could not check the files" in done.text


def test_the_syntax_gate_keeps_its_behaviour(root: Path) -> None:
    (root / "a.py").write_text("x = 1\n")
    with filesystem_toolbox(root, on_syntax_error="reject") as box:
        refused = box.invoke("edit_file", {"path": "a.py", "old": "x = 1", "new": "x = ("})
    assert refused.is_error and (root / "a.py").read_text() == "x = 1\n"
    with toolbox(root) as box:
        warned = box.invoke("edit_file", {"path": "a.py", "old": "x = 1", "new": "x = ("})
    assert warned.ok and warned.text.splitlines()[-1].startswith("WARNING: a.py no longer parses")
    assert found(warned) == []  # syntax is the gate's to say, once


def test_compare_matches_by_message_and_symbol() -> None:
    def d(line: int, symbol: str, code: str = "F821") -> Diagnostic:
        return Diagnostic(path="a.py", line=line, column=1, severity="error", code=code,
                          message=f"Undefined name `{symbol}`", source="ruff", symbol=symbol)

    new, kept = introduced([d(1, "a"), d(5, "b")], [d(9, "a"), d(12, "b"), d(3, "c")])
    assert [x.symbol for x in new] == ["c"] and kept == 2
    new, kept = introduced([d(1, "a")], [d(1, "a"), d(7, "a"), d(20, "a")], [(7, 7)])
    assert [x.line for x in new] == [7, 20] and kept == 1
    new, _ = introduced([d(1, "a"), d(2, "a")], [d(1, "a"), d(7, "a"), d(20, "a")], [(7, 7)])
    assert [x.line for x in new] == [7]


# -- language servers: misbehaving ones (our own, tests/lsp_server.py) -------------------------


def test_a_server_finding_comes_with_the_edit(root: Path) -> None:
    (root / "a.fake").write_text("fine\nBAD old\n")
    with toolbox(root, **fake_server("ok", wait=30)) as box:
        done = box.invoke("edit_file", {"path": "a.fake", "old": "fine", "new": "BAD new"})
    assert [(d.line, d.code, d.source, d.severity) for d in found(done)] == [
        (1, "bad-word", "fake", "warning")]
    assert done.data.diagnosis.preexisting == 1


def test_a_server_that_crashes_is_restarted_with_backoff(root: Path) -> None:
    (root / "a.fake").write_text("fine\n")
    with toolbox(root, **fake_server("crash", wait=30)) as box:
        first = box.invoke("edit_file", {"path": "a.fake", "old": "fine", "new": "BAD"})
        second = box.invoke("edit_file", {"path": "a.fake", "old": "BAD", "new": "BAD2"})
    assert first.ok and (root / "a.fake").read_text() == "BAD2\n"
    (problem,) = first.data.diagnosis.problems
    assert problem.startswith("fake stopped: it exited (code 3)")
    assert "starts again in 1 s at the earliest (the edit landed)" in problem
    assert second.data.diagnosis.problems[0].startswith(("fake is restarting", "fake stopped"))


def test_a_server_that_hangs_is_stopped_and_the_edit_says_pending_then_why(root: Path) -> None:
    (root / "a.fake").write_text("fine\n")
    with toolbox(root, **fake_server("hang", wait=0.2, hang=1.0)) as box:
        done = box.invoke("edit_file", {"path": "a.fake", "old": "fine", "new": "BAD"})
        assert done.ok and done.data.diagnosis.pending == ["fake: a.fake"]
        assert "[diagnostics pending: fake: a.fake still checking" in done.text
        late = _next_late(box)
    assert late.late[0].diagnosis.problems[0].startswith(
        "fake stopped: it did not answer initialize within 2s")
    assert "could not be had" in late.text


def test_a_server_that_floods_or_sends_garbage_is_stopped(root: Path) -> None:
    for mode, why in (("flood", "it flooded its output"),
                      ("garbage", "it sent a message that is not JSON")):
        (root / f"{mode}.fake").write_text("fine\n")
        with toolbox(root, **fake_server(mode, wait=30, hang=20)) as box:
            done = box.invoke("edit_file", {"path": f"{mode}.fake", "old": "fine",
                                            "new": "BAD"})
        assert done.ok, mode
        assert why in done.data.diagnosis.problems[0], (mode, done.data.diagnosis)


def test_a_server_that_dies_later_says_so_and_another_check_restarts_it(root: Path) -> None:
    (root / "a.fake").write_text("fine\n")
    with toolbox(root, **fake_server("crash-later", wait=30)) as box:
        done = box.invoke("edit_file", {"path": "a.fake", "old": "fine", "new": "BAD"})
    assert done.ok and "it exited (code 4)" in done.data.diagnosis.problems[0]


def _next_late(box: Toolbox, seconds: float = 120.0) -> Any:
    """The next observation once a pending check finished (any call shows its findings)."""
    assert box.diagnostician is not None
    assert box.diagnostician.wait_late(seconds), "no late diagnostics within the deadline"
    seen = box.invoke("list_dir", {})
    assert seen.late
    return seen


# -- who may name a server -------------------------------------------------------------------


def test_a_project_file_cannot_name_a_server(root: Path, tmp_path: Path) -> None:
    evil = root / "evil.sh"
    evil.write_text("#!/bin/sh\ntouch /tmp/pwned\n")
    evil.chmod(0o755)
    (root / "loki.toml").write_text(
        '[diagnostics.servers.python]\ncommand = ["./evil.sh"]\n'
        '[diagnostics]\ndefault_servers = true\nwait = 60\n')
    settings = load_settings(root, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert settings.diagnostics.servers == {}  # ignored, said in a warning
    assert any("diagnostics.servers" in w for w in settings.warnings)
    assert settings.diagnostics.wait == 60  # how long to wait is no danger: taken as it is
    (root / "loki.toml").write_text('[diagnostics]\nhang = 600\nwarm = 1\n')
    settings = load_settings(root, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert (settings.diagnostics.hang, settings.diagnostics.warm) == (30.0, 1)  # only lower


def test_a_server_program_inside_the_root_is_never_started(root: Path) -> None:
    evil = root / "evil"
    evil.write_text("#!/bin/sh\ntouch ran\n")
    evil.chmod(0o755)
    (root / "a.fake").write_text("x\n")
    with toolbox(root, servers={"fake": {"command": [str(evil)],
                                         "languages": {".fake": "fake"}}}) as box:
        assert "Not started: fake (" in box.status
        done = box.invoke("edit_file", {"path": "a.fake", "old": "x", "new": "y"})
    assert done.ok and not (root / "ran").exists()


# -- real language servers ------------------------------------------------------------------


def _need(program: str) -> None:
    if shutil.which(program) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{program} is missing in CI: .ci/run installs it")
        pytest.skip(f"{program} is not installed here (.ci/run installs it for CI)")


@pytest.mark.language_servers
def test_basedpyright_reports_the_type_error_an_edit_introduced(root: Path) -> None:
    _need("basedpyright-langserver")
    (root / "a.py").write_text("def f(x: int) -> int:\n    return x\n\n\nf('old')\n")
    with toolbox(root, wait=120) as box:
        done = box.invoke("edit_file", {"path": "a.py", "old": "f('old')\n",
                                        "new": "f('old')\nf(1, 2)\n"})
    assert [(d.line, d.source) for d in found(done)] == [(6, "basedpyright")]
    assert "f(1, 2)" not in found(done)[0].message and found(done)[0].severity == "error"
    assert done.data.diagnosis.preexisting == 1  # f('old'), there before


@pytest.mark.language_servers
def test_a_slow_server_says_pending_and_its_findings_come_later(root: Path) -> None:
    _need("basedpyright-langserver")
    (root / "a.py").write_text("def f(x: int) -> int:\n    return x\n")
    with toolbox(root, wait=0) as box:
        done = box.invoke("edit_file", {"path": "a.py", "old": "return x\n",
                                        "new": "return x\n\n\nf('s')\n"})
        assert done.data.diagnosis.pending == ["python: a.py"]
        late = _next_late(box)
    (item,) = late.late
    assert [(d.line, d.source) for d in item.diagnostics] == [(5, "basedpyright")]
    assert "[late] diagnostics: this change introduced 1 (1 error)" in late.text


@pytest.mark.language_servers
def test_typescript_language_server_reports_arity_and_type_errors(root: Path) -> None:
    _need("typescript-language-server")
    (root / "a.ts").write_text("export function g(a: number): number { return a }\n"
                               "const old: string = 1;\n")
    with toolbox(root, wait=120) as box:
        done = box.invoke("edit_file", {"path": "a.ts", "old": "const old",
                                        "new": "g(1, 2);\nconst s: string = g(1);\nconst old"})
    assert sorted((d.line, d.code) for d in found(done)) == [(2, "TS2554"), (3, "TS2322")]
    assert done.data.diagnosis.preexisting == 1


@pytest.mark.language_servers
def test_a_server_cannot_write_the_root(root: Path) -> None:
    """The fence of a server: it reads the root, writes only its scratch folder (the
    script is in the root: the fence hides the host's /tmp, where tmp_path is)."""
    script = root / "writer.py"
    script.write_text(
        "import runpy, sys\nfrom pathlib import Path\n"
        "try:\n    Path('wrote.txt').write_text('x')\nexcept OSError:\n    pass\n"
        f"sys.argv = [{FAKE!r}, 'ok']\nrunpy.run_path({FAKE!r}, run_name='__main__')\n")
    (root / "a.fake").write_text("BAD\n")
    settings = {"servers": {"fake": {"command": [sys.executable, str(script), "ok"],
                                     "languages": {".fake": "fake"}}}, "wait": 30}
    with toolbox(root, **settings) as box:
        report = box.invoke("diagnostics", {"paths": ["a.fake"]})
    assert [d.code for d in report.data.diagnostics] == ["bad-word"]
    if box.fence.startswith("UNFENCED"):
        pytest.skip(f"commands are not fenced here ({box.fence})")
    assert not (root / "wrote.txt").exists()
