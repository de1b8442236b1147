"""Protected files through every file tool: refused, skipped and counted, marked; and off.

Each default pattern gets a file holding a secret; every tool is asked for it and must
answer with the protected ERROR (or skip it and say so), and the secret never appears in
any observation. Commands are tested in test_protect_commands.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from yggdrasil.loki.files import Root
from yggdrasil.loki.results import SearchSkips, render_text
from yggdrasil.loki.search import Search, find_rg, protection, rg_overrides
from yggdrasil.loki.tools import DEFAULT_PROTECTED, Toolbox, ToolResult, filesystem_toolbox

SECRET = "s3cret-7f2a"
# One path per default glob (several at depth), and the exceptions that stay readable.
PROTECTED = [".env", ".env.local", "app/.env.production", "certs/server.pem", "tls.key",
             "store.p12", "store.pfx", "id_rsa", "keys/id_rsa.pub", "id_ed25519", "id_ecdsa",
             ".netrc", ".npmrc", ".pypirc", ".git-credentials", "vault.kdbx",
             "credentials.json", "cfg/service-account-prod.json", "secrets.yaml",
             ".aws/credentials", ".ssh/config"]
EXCEPTIONS = [".env.example", ".env.sample", ".env.template"]
ENGINES = ["python", *(["rg"] if find_rg() else [])]


def secret_text(rel: str) -> str:
    if rel.endswith(".json"):
        return f'[{{"key": "{SECRET}"}}]\n'
    if rel.endswith(".yaml"):
        return f"key: {SECRET}\n"
    return f"name,value\nkey,{SECRET}\n"


@pytest.fixture
def tree(root: Path) -> Path:
    for rel in [*PROTECTED, *EXCEPTIONS, "src/app.py", "data.csv"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(secret_text(rel) if rel in PROTECTED else f"ok {rel}\n")
    (root / "data.csv").write_text("name,value\na,1\n")
    return root


def assert_protected(done: ToolResult, rel: str) -> None:
    out = done.text
    assert done.is_error and done.data.category == "protected", out
    assert done.data.rule, out  # the protected glob that matched
    assert " is protected: it may hold secrets" in out, out
    assert "protect=" in out and "--no-protect" in out  # names the option that changes it
    assert SECRET not in out


@pytest.mark.parametrize("rel", PROTECTED)
def test_every_file_tool_refuses_each_default_pattern(tree: Path, rel: str) -> None:
    box = filesystem_toolbox(tree, allow_web=True, allow_private_hosts=True)
    before = (tree / rel).read_bytes()
    calls = [
        ("read_file", {"path": rel}),
        ("read_file", {"path": f"./{rel}"}),
        ("read_file", {"path": str(tree / rel)}),
        ("read_file", {"path": f"src/../{rel}"}),
        ("write_file", {"path": rel, "content": "replaced"}),
        ("edit_file", {"path": rel, "old": SECRET, "new": "x"}),
        ("read_table", {"path": rel}),
        ("query_table", {"sql": f"SELECT * FROM '{rel}'"}),
        ("grep", {"pattern": "key", "path": rel}),
        ("find", {"pattern": "*", "path": rel}),
        # the save target is checked before anything is downloaded (port 9 answers nothing)
        ("web_table", {"url": "http://127.0.0.1:9/t.csv", "save": rel}),
        ("web_image", {"url": "http://127.0.0.1:9/i.png", "save": rel}),
    ]
    for name, args in calls:
        done = box.invoke(name, args)
        assert_protected(done, rel)
        assert done.data.rule in DEFAULT_PROTECTED, (name, done.data.rule)
    folder = rel.split("/")[0] if rel.startswith((".aws/", ".ssh/")) else None
    if folder:  # the contents of a protected folder cannot be listed
        assert_protected(box.invoke("list_dir", {"path": folder}), folder)
        assert_protected(box.invoke("write_file", {"path": f"{folder}/new", "content": "x"}), folder)
    assert (tree / rel).read_bytes() == before and box.changed == []


def test_exceptions_and_other_files_stay_readable(tree: Path) -> None:
    box = filesystem_toolbox(tree)
    for rel in EXCEPTIONS:
        assert box.invoke("read_file", {"path": rel}).data.lines == [f"ok {rel}"]
    assert "shape=(1, 2)" in box.call("read_table", {"path": "data.csv"})


def test_list_dir_marks_protected_entries_without_their_size(tree: Path) -> None:
    box = filesystem_toolbox(tree)
    listing = box.call("list_dir", {"path": "."}).splitlines()
    assert ".aws/  [protected]" in listing and ".env  [protected]" in listing
    entries = {e.path: e for e in box.invoke("list_dir", {"path": "."}).data.entries}
    assert [(entries[p].kind, entries[p].protected, entries[p].size) for p in (
        ".aws", ".ssh", ".env", "tls.key", ".env.example", "data.csv")] == [
        ("folder", True, None), ("folder", True, None), ("file", True, None),
        ("file", True, None), ("file", False, 16), ("file", False, 15)]
    assert box.call("list_dir", {"path": "certs"}) == "certs/server.pem  [protected]"
    os.symlink(".env", tree / "innocent.txt")
    assert "innocent.txt@ -> .env  [protected]" in box.call("list_dir", {"path": "."})
    link = next(e for e in box.invoke("list_dir", {"path": "."}).data.entries
                if e.name == "innocent.txt")
    assert (link.kind, link.target, link.protected) == ("link", ".env", True)
    assert_protected(box.invoke("read_file", {"path": "innocent.txt"}), ".env")


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_and_find_skip_and_count_them(tree: Path, engine: str) -> None:
    search = Search(Root.at(tree, protection(DEFAULT_PROTECTED)), backend=engine)  # type: ignore[arg-type]
    out = search.grep("key", include_ignored=True)
    assert not any(SECRET in m.text for m in out.matches)
    # 21 protected paths, two of them inside .aws/ and .ssh/, which count once each
    assert out.skipped == SearchSkips(protected=21), out
    assert render_text(out).endswith("[skipped: 21 protected]")
    names = search.find("*", include_ignored=True)
    assert names.paths[:3] == [".env.example", ".env.sample", ".env.template"]
    assert "credentials.json" not in names.paths and names.skipped == SearchSkips(protected=21)
    # Without include_ignored the hidden ones count as protected too: protection comes first.
    assert search.grep(SECRET).skipped == SearchSkips(hidden=3, protected=21)


def test_both_engines_agree_on_protected_trees(tree: Path) -> None:
    if len(ENGINES) < 2:
        pytest.skip("ripgrep 14 is not installed: nothing to compare")
    (tree / ".gitignore").write_text("!.env\n*.log\n!secrets.*\n")  # whitelists change nothing
    (tree / "sub" / ".env.example").parent.mkdir()
    (tree / "sub" / ".env.example").write_text(f"ok {SECRET}\n")
    (tree / "sub" / ".env.examplex").write_text(f"no {SECRET}\n")
    (tree / "run.log").write_text(f"{SECRET}\n")
    root = Root.at(tree, protection(DEFAULT_PROTECTED))
    for ignored in (False, True):
        got = [Search(root, backend=b).grep(SECRET, include_ignored=ignored) for b in ENGINES]  # type: ignore[arg-type]
        assert got[0] == got[1]
        found = [Search(root, backend=b).find("*", include_ignored=ignored) for b in ENGINES]  # type: ignore[arg-type]
        assert found[0] == found[1]
    paths = [(m.path, m.text) for m in got[0].matches]
    assert ("sub/.env.example", f"ok {SECRET}") in paths
    assert not any("examplex" in path for path, _ in paths)


def test_exceptions_ripgrep_cannot_express_fall_back_to_python(tree: Path) -> None:
    globs = ("conf/*", "!keep.yml")
    assert rg_overrides(protection(globs)) is None
    (tree / "conf").mkdir()
    (tree / "conf" / "keep.yml").write_text(f"ok {SECRET}\n")
    (tree / "conf" / "db.yml").write_text(f"no {SECRET}\n")
    box = filesystem_toolbox(tree, protect=globs)
    out = box.call("grep", {"pattern": SECRET, "path": "conf"})
    assert out == f"conf/keep.yml:1: ok {SECRET}\n[skipped: 1 protected]"


def test_protect_off_restores_access(tree: Path) -> None:
    box = filesystem_toolbox(tree, protect=())
    assert box.invoke("read_file", {"path": ".env"}).data.lines == ["name,value", f"key,{SECRET}"]
    (entry,) = box.invoke("list_dir", {"path": ".aws"}).data.entries
    assert (entry.path, entry.size, entry.protected) == (".aws/credentials", 27, False)
    assert SECRET in box.call("grep", {"pattern": SECRET, "include_ignored": True})
    assert "Protected files" not in box.status


def test_a_list_replaces_and_a_sum_adds(tree: Path) -> None:
    (tree / "local.sqlite").write_text(SECRET)
    replaced = filesystem_toolbox(tree, protect=["*.sqlite"])
    assert replaced.invoke("read_file", {"path": ".env"}).data.lines[1] == f"key,{SECRET}"
    assert_protected(replaced.invoke("read_file", {"path": "local.sqlite"}), "local.sqlite")
    added = filesystem_toolbox(tree, protect=(*DEFAULT_PROTECTED, "*.sqlite"))
    assert_protected(added.invoke("read_file", {"path": ".env"}), ".env")
    sqlite = added.invoke("read_file", {"path": "local.sqlite"})
    assert_protected(sqlite, "local.sqlite")
    assert sqlite.data.rule == "*.sqlite"
    assert "*.sqlite" in added.status


def test_a_protected_folder_name_protects_everything_below(root: Path) -> None:
    (root / "deploy" / "secrets.d").mkdir(parents=True)
    (root / "deploy" / "secrets.d" / "db.txt").write_text(SECRET)
    box = filesystem_toolbox(root, protect=["secrets.d/"])
    for path in ("deploy/secrets.d/db.txt", "deploy/secrets.d", "deploy/secrets.d/new.txt"):
        out = box.invoke("read_file" if "." in path[-4:] else "list_dir", {"path": path})
        assert_protected(out, path)
        assert out.data.rule == "secrets.d/", out.text
    # ... and a link that leads there, from outside it, is refused as well
    os.symlink("deploy/secrets.d", root / "shortcut")
    assert_protected(box.invoke("read_file", {"path": "shortcut/db.txt"}), "shortcut/db.txt")


def test_bad_protect_globs_are_refused_when_the_toolbox_is_made(root: Path) -> None:
    with pytest.raises(ValueError, match="one line"):
        filesystem_toolbox(root, protect=["a\nb"])
    with pytest.raises(ValueError, match="not a valid glob"):
        filesystem_toolbox(root, protect=["[z-a]"])
    box = filesystem_toolbox(root, protect=".env")  # one string is one glob, not letters
    (root / "e").write_text("fine")
    assert box.invoke("read_file", {"path": "e"}).data.lines == ["fine"]


def test_tools_of_a_read_only_toolbox_refuse_too(tree: Path) -> None:
    box: Toolbox = filesystem_toolbox(tree, read_only=True)
    assert_protected(box.invoke("read_file", {"path": ".env"}), ".env")
    assert "Protected files (they may hold secrets" in box.status


@pytest.mark.parametrize("patch", [
    "*** Begin Patch\n*** Update File: .env\n@@\n-name,value\n+name,x\n*** End Patch",
    "*** Begin Patch\n*** Delete File: certs/server.pem\n*** End Patch",
    "*** Begin Patch\n*** Add File: .ssh/authorized_keys\n+ssh-ed25519 AAAA attacker\n*** End Patch",
    "*** Begin Patch\n*** Update File: data.csv\n*** Move to: secrets.csv\n@@\n-a,1\n+a,2\n"
    "*** End Patch",
    "*** Begin Patch\n*** Update File: tls.key\n*** Move to: stolen.txt\n@@\n-name,value\n"
    "+name,value\n*** End Patch",
    "--- a/.env.local\n+++ b/.env.local\n@@ -1,2 +1,2 @@\n-name,value\n+name,v\n key,x\n",
])
def test_apply_patch_refuses_protected_paths(tree: Path, patch: str) -> None:
    box = filesystem_toolbox(tree)
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    for dry_run in (True, False):
        assert_protected(box.invoke("apply_patch", {"patch": patch, "dry_run": dry_run}), patch)
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before


def test_undo_edit_refuses_protected_paths(tree: Path) -> None:
    box = filesystem_toolbox(tree)
    box.call("run", {"command": "echo made > .env.new"})
    for path in (".env", ".env.new", ".aws/credentials"):
        assert_protected(box.invoke("undo_edit", {"path": path}), path)
    assert (tree / ".env").read_text() == secret_text(".env")


def test_edit_file_with_edits_refuses_too(tree: Path) -> None:
    box = filesystem_toolbox(tree)
    out = box.invoke("edit_file", {"path": "credentials.json",
                                   "edits": [{"old": SECRET, "new": "x"}]})
    assert_protected(out, "credentials.json")


def test_code_navigation_refuses_and_skips_them(root: Path) -> None:
    pytest.importorskip("tree_sitter_language_pack")
    (root / "secrets.py").write_text(f"def leak_{SECRET.replace('-', '_')}():\n    return 1\n")
    (root / "app.py").write_text("def main():\n    return 2\n")
    box = filesystem_toolbox(root)
    assert_protected(box.invoke("outline", {"path": "secrets.py"}), "secrets.py")
    assert_protected(box.invoke("read_file", {"path": "secrets.py", "symbol": "leak"}), "secrets.py")
    for name, args in (("outline", {"path": "."}), ("repo_map", {}),
                       ("find_symbol", {"name": "leak", "include_ignored": True})):
        out = box.call(name, args)
        assert "leak" not in out.replace("'leak'", "") and out.endswith("[skipped: 1 protected]"), out


@pytest.mark.parametrize("globs", [DEFAULT_PROTECTED, ("*.pem", "id_*", "!id_ok*", ".aws/"),
                                   ("*secret*", "!*.md"), ("!*.example",)])
def test_the_quick_name_check_protects_what_the_globs_protect(globs: tuple[str, ...]) -> None:
    """Names no protecting line can match are answered without RE2; every name gets the
    answer the compiled globs give (checked against them, line by line, on the default
    paths, their exceptions and names made to sit at the edges of each line's text)."""
    rules = protection(globs).rules
    names = {p.rsplit("/", 1)[-1] for p in [*PROTECTED, *EXCEPTIONS]}
    for glob in globs:
        text = glob.lstrip("!").strip("/").replace("**/", "").replace("*", "")
        names |= {text, f"x{text}", f"{text}x", f".{text}", text[1:], text[:-1], f"a/{text}"}
    names |= {"f123", "README.md", "app.py", "secret.md", "id_ok1", "x.pem.txt", ""}
    for name in sorted(names):
        for is_dir in (False, True):
            quick = rules.decisive(name, is_dir)
            full = rules.lines.decisive(name, is_dir)
            assert bool(quick and quick[1]) == bool(full and full[1]), (globs, name, is_dir)
