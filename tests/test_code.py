"""outline, find_symbol, repo_map and read_file(symbol=) on real files, through every door:
Toolbox.call, the `loki call` command and Loki.act's first message (MCP: test_mcp.py)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import child_env, loki
from fake_servers import FakeModelServer, openai_reply
from yggdrasil.loki import Loki
from yggdrasil.loki.code import Code
from yggdrasil.loki.errors import ToolError
from yggdrasil.loki.files import DEFAULT_PROTECTED, Root
from yggdrasil.loki.results import (
    FileOutline,
    FolderOutline,
    OutlineByGrep,
    RepoMap,
    SymbolsFound,
    render_text,
)
from yggdrasil.loki.search import protection
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

pytest.importorskip("tree_sitter_language_pack")

APP = '''import os

LIMIT = 10


class Greeter:
    """Says hello."""

    def __init__(self, name):
        self.name = name

    @staticmethod
    def greet(who: str) -> str:
        return f"hi {who}"


def main():
    print(Greeter("x").greet("y"))
'''


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)


@pytest.fixture
def app(root: Path) -> Path:
    write(root, {"app.py": APP})
    return root


# -- outline ----------------------------------------------------------------------------


def test_outline_of_a_file(app: Path, box: Toolbox) -> None:
    assert box.call("outline", {"path": "app.py"}).split("\n") == [
        "constant LIMIT = 10  L3-3",
        "class Greeter  L6-14",
        "  method __init__(self, name)  L9-10",
        "  method greet(who: str) -> str  L13-14",
        "function main()  L17-18",
    ]


def test_outline_of_a_folder_shows_each_file_and_what_it_skipped(root: Path, box: Toolbox) -> None:
    write(root, {"pkg/a.py": "def a():\n    pass\n", "pkg/sub/b.go": "package b\nfunc B() {}\n",
                 "pkg/notes.md": "# Notes\n", "pkg/build/gen.py": "def gen(): pass\n",
                 "pkg/.gitignore": "build/\n", "pkg/empty.py": ""})
    assert box.call("outline", {"path": "pkg"}).split("\n") == [
        "pkg/a.py:",
        "  function a()  L1-2",
        "pkg/sub/b.go:",
        "  function B()  L2-2",
        "[no grammar for 1 files (.md 1); grep searches them]",
        "[skipped: 1 ignored, 1 hidden; include_ignored=true searches ignored and hidden files]",
    ]


def test_outline_of_a_file_without_a_grammar_falls_back_to_grep(root: Path, box: Toolbox) -> None:
    write(root, {"page.vue": "<script>\nexport default {}\nfunction helper() {}\n</script>\n",
                 "README.md": "# Title\ntext\n## Usage\n"})
    assert box.call("outline", {"path": "page.vue"}).split("\n") == [
        "[no grammar for .vue files; lines that look like definitions, found by grep:]",
        "page.vue:3: function helper() {}",
    ]
    assert box.call("outline", {"path": "README.md"}).split("\n")[1:] == [
        "README.md:1: # Title", "README.md:3: ## Usage"]


def test_outline_notes_syntax_errors_and_keeps_what_parsed(root: Path, box: Toolbox) -> None:
    write(root, {"broken.py": "def ok():\n    return 1\n\ndef bad(:\n    pass\n\nclass Later:\n"
                              "    def m(self):\n        pass\n"})
    found = box.call("outline", {"path": "broken.py"}).split("\n")
    assert found[0] == "function ok()  L1-2"
    assert "class Later  L7-9" in found and "  method m(self)  L8-9" in found
    assert found[-1].startswith("[broken.py: syntax errors near L4")


def test_outline_errors_say_what_is_allowed(root: Path, box: Toolbox) -> None:
    assert box.call("outline", {"path": "nope.py"}) == (
        "ERROR: nope.py does not exist; give a source file or a folder")
    assert box.call("outline", {"path": "../outside/secret.txt"}).startswith(
        "ERROR: path '../outside/secret.txt' escapes the agent root")
    write(root, {"blob.py": b"def f():\x00\x01 pass\n"})
    assert box.call("outline", {"path": "blob.py"}) == (
        "ERROR: blob.py is a binary file; the code tools read source text")


def test_code_tools_answer_typed_results_their_text_is_rendered_from(
        app: Path, box: Toolbox) -> None:
    """invoke(...).data is the typed result; call(...) is its rendered text."""
    write(app, {"pkg/a.py": "def a():\n    pass\n", "page.vue": "function helper() {}\n",
                "notes.md": "# Notes\n"})
    outline = box.invoke("outline", {"path": "app.py"})
    assert isinstance(outline.data, FileOutline) and outline.text == box.call(
        "outline", {"path": "app.py"})
    assert (outline.data.language, outline.data.found, outline.data.lines) == ("python", 5, 18)
    assert [(d.kind, d.qualified, d.line, d.end) for d in outline.data.definitions] == [
        ("constant", "LIMIT", 3, 3), ("class", "Greeter", 6, 14),
        ("method", "Greeter.__init__", 9, 10), ("method", "Greeter.greet", 13, 14),
        ("function", "main", 17, 18)]
    folder = box.invoke("outline", {"path": "pkg"}).data
    assert isinstance(folder, FolderOutline)
    assert [(f.path, [d.name for d in f.definitions]) for f in folder.files] == [
        ("pkg/a.py", ["a"])]
    vue = box.invoke("outline", {"path": "page.vue"}).data
    assert isinstance(vue, OutlineByGrep) and vue.reason == "no_grammar"
    assert [m.line for m in vue.found.matches] == [1]
    found = box.invoke("find_symbol", {"name": "greet"})
    assert isinstance(found.data, SymbolsFound) and not found.data.ignoring_case
    assert [(d.path, d.line, d.qualified) for d in found.data.definitions] == [
        ("app.py", 13, "Greeter.greet")]
    missing = box.invoke("find_symbol", {"name": "render_page"}).data
    assert isinstance(missing, SymbolsFound) and missing.definitions == []
    assert (missing.word, missing.indexed, missing.scan.no_grammar) == (
        "render_page", 2, [(".md", 1), (".vue", 1)])
    mapped = box.invoke("repo_map", {"budget": 2000})
    assert isinstance(mapped.data, RepoMap) and mapped.data.found
    assert (mapped.data.source_files, mapped.data.path) == (2, ".")
    assert {f.path for f in mapped.data.files} == {"app.py", "pkg/a.py"}
    assert mapped.text.split("\n")[0].startswith(
        f"[repo map of .: {sum(len(f.definitions) for f in mapped.data.files)} of 6 definitions")
    empty = box.invoke("repo_map", {"path": "pkg", "budget": 2000})
    assert isinstance(empty.data, RepoMap) and empty.data.source_files == 1
    write(app, {"docs/x.md": "# x\n"})
    none = box.invoke("repo_map", {"path": "docs"})
    assert isinstance(none.data, RepoMap) and not none.data.found
    assert none.text.startswith("no definitions found under docs")


# -- find_symbol ------------------------------------------------------------------------


def test_find_symbol_by_name_dotted_name_glob_and_kind(app: Path, box: Toolbox) -> None:
    write(app, {"lib/util.py": "def greet():\n    pass\n\nclass Tool:\n    def greet(self):\n"
                               "        pass\n", "tests/test_app.py": "def test_greet():\n"
                               "    pass\n\ndef test_main():\n    pass\n"})
    assert box.call("find_symbol", {"name": "greet"}).split("\n") == [
        "lib/util.py:1: function greet()",  # top level before members, code before tests
        "app.py:13: method Greeter.greet(who: str) -> str",
        "lib/util.py:5: method Tool.greet(self)",
    ]
    assert box.call("find_symbol", {"name": "Greeter.greet"}) == (
        "app.py:13: method Greeter.greet(who: str) -> str")
    assert box.call("find_symbol", {"name": "Tool::greet"}) == "lib/util.py:5: method Tool.greet(self)"
    assert box.call("find_symbol", {"name": "test_*"}).split("\n") == [
        "tests/test_app.py:1: function test_greet()", "tests/test_app.py:4: function test_main()"]
    assert box.call("find_symbol", {"name": "greet", "kind": "methods"}).split("\n") == [
        "app.py:13: method Greeter.greet(who: str) -> str", "lib/util.py:5: method Tool.greet(self)"]
    assert box.call("find_symbol", {"name": "greet", "path": "lib"}).split("\n")[0] == (
        "lib/util.py:1: function greet()")


def test_find_symbol_is_forgiving_about_case_and_kind_names(app: Path, box: Toolbox) -> None:
    assert box.call("find_symbol", {"name": "greeter"}).split("\n") == [
        "[no definition matches 'greeter' with this case; these match ignoring case]",
        "app.py:6: class Greeter",
    ]
    assert box.call("find_symbol", {"name": "main", "kind": "def"}) == "app.py:17: function main()"
    assert box.call("find_symbol", {"name": "main", "kind": "widget"}).startswith(
        "ERROR: argument 'kind' must be one of ['class', 'struct', 'interface'")
    methods = box.call("find_symbol", {"name": "*", "kind": "method"})
    assert [row.split(": ")[1].split()[0] for row in methods.split("\n")] == ["method"] * 2
    assert methods != box.call("find_symbol", {"name": "*"})  # the filter is what narrows
    for slip in ("Methods", " METHOD ", "methods"):  # the schema's enum, forgiven
        assert box.call("find_symbol", {"name": "*", "kind": slip}) == methods
    assert box.call("find_symbol", {"name": "*", "kind": "Classes"}) == "app.py:6: class Greeter"
    # a caller that skips the schema (the run function itself) is forgiven the same way
    run = box.tools["find_symbol"].run
    assert render_text(run(name="*", kind="METHODS")) == methods
    assert render_text(run(name="*", kind=" Fn ")).split("\n") == [
        "app.py:17: function main()", *methods.split("\n")]
    with pytest.raises(ToolError, match="kind 'widget' is not one of: class, struct"):
        run(name="main", kind="widget")
    assert box.call("find_symbol", {"name": " "}).startswith("ERROR: name is empty")


def test_find_symbol_not_found_says_where_grep_sees_the_word(app: Path, box: Toolbox) -> None:
    write(app, {"templates/page.html": "<p>{{ render_page }}</p>\n"})
    assert box.call("find_symbol", {"name": "render_page"}).split("\n") == [
        "[no definition named 'render_page' in 1 source files under .; grep finds "
        "'render_page' here:]",
        "templates/page.html:1: <p>{{ render_page }}</p>",
        "[no grammar for 1 files (.html 1); grep searches them]",
    ]


def test_find_symbol_skips_and_counts_what_grep_skips(root: Path, box: Toolbox) -> None:
    write(root, {".gitignore": "build/\n*.gen.py\n", "build/out.py": "def target(): pass\n",
                 "x.gen.py": "def target(): pass\n", ".hidden/h.py": "def target(): pass\n",
                 "bin.py": b"def target(): pass\x00\n", "src/real.py": "def target(): pass\n"})
    found = box.call("find_symbol", {"name": "target"}).split("\n")
    grep = box.call("grep", {"pattern": "def target"}).split("\n")
    assert found[0] == "src/real.py:1: function target()"
    assert found[-1] == grep[-1] == (
        "[skipped: 2 ignored, 2 hidden, 1 binary; include_ignored=true searches ignored and "
        "hidden files]")
    everything = box.call("find_symbol", {"name": "target", "include_ignored": True})
    assert everything.split("\n")[:4] == [
        ".hidden/h.py:1: function target()", "build/out.py:1: function target()",
        "src/real.py:1: function target()", "x.gen.py:1: function target()"]


def test_find_symbol_caps_its_list_and_says_how_to_narrow(root: Path, box: Toolbox) -> None:
    write(root, {"many.py": "".join(f"def handler_{i}():\n    pass\n" for i in range(620))})
    found = box.call("find_symbol", {"name": "handler_*"}).split("\n")
    assert len(found) == 501 and found[0] == "many.py:1: function handler_0()"
    assert found[-1] == ("[... 120 more definitions not shown; narrow with kind=, a path, or a "
                         "dotted name like Class.method]")


# -- read_file(symbol=) -----------------------------------------------------------------


def test_read_file_symbol_reads_the_definition_with_its_decorators(app: Path, box: Toolbox) -> None:
    assert box.call("read_file", {"path": "app.py", "symbol": "Greeter.greet"}).split("\n") == [
        "12\t    @staticmethod", "13\t    def greet(who: str) -> str:",
        "14\t        return f\"hi {who}\"",
        "[showing lines 12-14 of 18; read_file(path='app.py', start=15) for more, or grep to "
        "find a line]"]
    main = box.invoke("read_file", {"path": "app.py", "symbol": "main", "start": 3}).data
    assert (main.symbol, main.first, main.last, main.total, main.note) == ("main", 17, 18, 18, "")
    assert main.lines == ["def main():", "    print(Greeter(\"x\").greet(\"y\"))"]


def test_read_file_symbol_errors_list_what_the_file_defines(app: Path, box: Toolbox) -> None:
    assert box.call("read_file", {"path": "app.py", "symbol": "Greeter.wave"}) == (
        "ERROR: no definition 'Greeter.wave' in app.py; it defines: LIMIT, Greeter, "
        "Greeter.__init__, Greeter.greet, main")
    write(app, {"notes.txt": "hello\n"})
    assert box.call("read_file", {"path": "notes.txt", "symbol": "hello"}).startswith(
        "ERROR: symbol= cannot find definitions in notes.txt: no grammar reads this kind of "
        "file; use grep")


def test_read_file_symbol_names_other_matches(root: Path, box: Toolbox) -> None:
    write(root, {"props.py": "class A:\n    @property\n    def x(self):\n        return 1\n\n"
                             "    @x.setter\n    def x(self, v):\n        pass\n"})
    found = box.invoke("read_file", {"path": "props.py", "symbol": "A.x"})
    assert (found.data.symbol, found.data.first, found.data.last) == ("A.x", 2, 4)
    assert found.data.lines == ["    @property", "    def x(self):", "        return 1"]
    assert found.data.note == ("['A.x' also matches L7 (method A.x); read_file(path='props.py', "
                               "start=N) reads one of those]")
    assert found.text.split("\n")[-1] == found.data.note  # said after the window


# -- the index follows the files --------------------------------------------------------


def test_the_index_sees_edits_writes_and_commands_and_reparses_only_those(app: Path) -> None:
    write(app, {"other.py": "def stays():\n    pass\n"})
    box = filesystem_toolbox(app, sandbox="off")
    assert box.call("find_symbol", {"name": "main"}) == "app.py:17: function main()"
    # the same per-root index the toolbox uses (one per root and protected list)
    code = Code(Root.at(app, protect=protection(DEFAULT_PROTECTED)))
    box.call("outline", {"path": "."})
    before = dict(code.index.entries)
    box.call("edit_file", {"path": "app.py", "old": "def main():", "new": "def start():"})
    assert box.call("find_symbol", {"name": "start"}) == "app.py:17: function start()"
    box.call("run", {"command": "printf 'def made_by_shell():\\n    pass\\n' > shell.py"})
    assert box.call("find_symbol", {"name": "made_by_shell"}) == "shell.py:1: function made_by_shell()"
    box.call("outline", {"path": "."})
    after = code.index.entries
    assert after["other.py"] is before["other.py"]  # not read again
    assert after["app.py"] is not before["app.py"]
    box.call("write_file", {"path": "other.py", "content": "def renamed():\n    pass\n"})
    assert box.call("outline", {"path": "other.py"}) == "function renamed()  L1-2"


# -- repo_map ---------------------------------------------------------------------------


def test_repo_map_ranks_what_is_used_and_stays_in_budget(root: Path, box: Toolbox) -> None:
    write(root, {"core/models.py": "class Account:\n    def balance(self):\n        return 0\n\n"
                                   "class Unused:\n    pass\n",
                 **{f"views/v{i}.py": f"from core.models import Account\n\ndef view_{i}():\n"
                                      "    return Account().balance()\n" for i in range(6)}})
    found = box.call("repo_map", {"budget": 2000}).split("\n")
    assert found[0] == ("[repo map of .: 9 of 9 definitions in 7 of 7 files, most referenced "
                        "first; outline(path) and find_symbol(name) show more]")
    assert found[1:4] == ["core/models.py:", "  class Account  L1-3", "    method balance(self)  L2-3"]
    small = box.call("repo_map", {"budget": 300})
    assert len(small) <= 300
    assert small.split("\n")[1:4] == ["core/models.py:", "  class Account  L1-3",
                                      "    method balance(self)  L2-3"]
    assert box.call("repo_map", {"budget": 50}).startswith(
        "ERROR: argument 'budget' must be between 200 and 100000, got 50")


def test_a_tree_seen_at_another_path_gets_its_map_without_ranking_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a fleet worker's next copy of a repository: the same sources elsewhere reuse the
    map made from them; a file changed in place, even to the same size and time, does not."""
    made: list[int] = []
    real = Code._map
    monkeypatch.setattr(Code, "_map", lambda self, *a: made.append(1) or real(self, *a))
    files = {"core/models.py": "class Account:\n    def balance(self):\n        return 0\n",
             "views/v.py": "from core.models import Account\n\ndef view():\n"
                           "    return Account().balance()\n"}
    maps = []
    for name in ("one", "two"):
        write(tmp_path / name, files)
        with filesystem_toolbox(tmp_path / name, sandbox="off") as box:
            maps.append(box.call("repo_map", {}))
    assert maps[0] == maps[1] and "class Account" in maps[0] and len(made) == 1
    models = tmp_path / "two" / "core/models.py"
    before = models.stat()
    models.write_text(files["core/models.py"].replace("Account", "Ledgers"))
    os.utime(models, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert models.stat().st_size == before.st_size
    with filesystem_toolbox(tmp_path / "two", sandbox="off") as box:
        again = box.call("repo_map", {})
    assert "class Ledgers" in again and "class Account" not in again and len(made) == 2


def test_loki_act_puts_a_small_map_in_the_first_message(
        app: Path, server: FakeModelServer) -> None:
    server.queue(openai_reply("Done."), openai_reply("Done."))
    agent = Loki("openai", model="gpt-fake", base_url=f"{server.url}/v1", api_key="sk-test")
    agent.act("say hi", root=app)
    agent.act("say hi", root=app, repo_map=0)
    with_map, without = (post["messages"][1]["content"] for post in server.posts())
    assert with_map.split("\n")[:5] == [
        "Task: say hi", "",
        "A map of the repository, its most referenced definitions (outline, find_symbol and "
        "read_file with symbol= show more):",
        "[repo map of .: 5 of 5 definitions in 1 of 1 files, most referenced first; "
        "outline(path) and find_symbol(name) show more]",
        "app.py:"]
    assert without == "Task: say hi"
    with pytest.raises(ValueError, match="repo_map is a size in characters"):
        agent.act("x", root=app, repo_map=-1)


def test_no_map_when_the_root_has_no_code_or_the_toolbox_no_repo_map(
        root: Path, server: FakeModelServer) -> None:
    write(root, {"notes.md": "# notes\n"})
    server.queue(openai_reply("Done."), openai_reply("Done."))
    agent = Loki("openai", model="gpt-fake", base_url=f"{server.url}/v1", api_key="sk-test")
    agent.act("say hi", root=root)
    box = filesystem_toolbox(root)
    del box.tools["repo_map"]
    agent.act("say hi", root=root, toolbox=box)
    assert [post["messages"][1]["content"] for post in server.posts()] == ["Task: say hi"] * 2


# -- the command line and the disk cache ------------------------------------------------


def test_loki_call_outline_and_find_symbol(app: Path, tmp_path: Path) -> None:
    done = loki(tmp_path, "call", "outline", "path=app.py", "--root", str(app))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[1] == "class Greeter  L6-14"
    found = loki(tmp_path, "call", "find_symbol", "name=Greeter.greet", "--root", str(app))
    assert found.stdout == "app.py:13: method Greeter.greet(who: str) -> str\n"
    read = loki(tmp_path, "call", "read_file", "path=app.py", "symbol=main", "--root", str(app))
    assert read.stdout.startswith("17\tdef main():\n")
    mapped = loki(tmp_path, "call", "repo_map", "budget=2000", "--root", str(app))
    assert mapped.returncode == 0, mapped.stderr
    assert "app.py:" in mapped.stdout and "class Greeter" in mapped.stdout
    assert len(mapped.stdout) <= 2001
    bad = loki(tmp_path, "call", "repo_map", "budget=5", "--root", str(app))
    assert bad.returncode != 0 and "budget" in bad.stdout + bad.stderr


def test_the_disk_cache_is_outside_the_root_and_trusted_only_while_files_match(
        app: Path, tmp_path: Path) -> None:
    cache = tmp_path / "user-cache"
    env = {**child_env(tmp_path), "XDG_CACHE_HOME": str(cache), "LOKI_CODE_CACHE": "1"}

    def outline() -> str:
        return subprocess.run([sys.executable, "-m", "yggdrasil.loki", "call", "outline",
                               "path=app.py", "--root", str(app)], capture_output=True,
                              text=True, env=env, timeout=60, check=True).stdout

    first = outline()
    [stored] = (cache / "yggdrasil-loki" / "code").glob("*.json")
    assert not any(p.name.endswith(".json") for p in app.rglob("*"))
    _, _, body = stored.read_bytes().partition(b"\n")
    data = json.loads(body)
    assert data["root"] == str(app.resolve())
    symbols = data["files"]["app.py"][5][5]
    symbols[1][1] = "Cached"  # a change only the cache knows: proves the next run reads it
    body = json.dumps(data).encode()
    key = (Path(env["XDG_CONFIG_HOME"]) / "loki" / "code-cache.key").read_bytes()
    signed = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    stored.write_bytes(signed + b"\n" + body)  # signed with the user's key: believed
    assert "class Cached  L6-14" in outline()
    os.utime(app / "app.py", ns=(1, 1))  # the file changed (mtime): the entry is stale
    assert outline() == first
    stored.write_text("{not json")  # a damaged cache is ignored and rewritten
    assert outline() == first
    assert json.loads(stored.read_bytes().partition(b"\n")[2])["root"] == str(app.resolve())


def test_no_disk_cache_when_the_cache_folder_is_inside_the_root(app: Path, tmp_path: Path) -> None:
    env = {**child_env(tmp_path), "XDG_CACHE_HOME": str(app / ".cache"), "LOKI_CODE_CACHE": "1"}
    subprocess.run([sys.executable, "-m", "yggdrasil.loki", "call", "outline", "path=app.py",
                    "--root", str(app)], capture_output=True, env=env, timeout=60, check=True)
    assert not (app / ".cache").exists()


def test_without_the_grammars_the_tools_fall_back_to_grep(app: Path, tmp_path: Path) -> None:
    script = ("import sys; sys.modules['tree_sitter_language_pack'] = None\n"
              "from yggdrasil.loki.tools import filesystem_toolbox\n"
              f"box = filesystem_toolbox({str(app)!r})\n"
              "print(box.call('outline', {'path': 'app.py'}))\n"
              "print(box.call('find_symbol', {'name': 'Greeter'}))\n"
              "print(box.call('repo_map', {}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=child_env(tmp_path), timeout=60, check=True)
    assert done.stdout.split("\n") == [
        "[tree-sitter grammars are not installed (pip install 'yggdrasil-loki[code]'); lines "
        "that look like definitions, found by grep:]",
        "app.py:6: class Greeter:", "app.py:9:     def __init__(self, name):",
        "app.py:13:     def greet(who: str) -> str:", "app.py:17: def main():",
        "[tree-sitter grammars are not installed (pip install 'yggdrasil-loki[code]'); grep "
        "finds 'Greeter' here:]",
        "app.py:6: class Greeter:", "app.py:18:     print(Greeter(\"x\").greet(\"y\"))",
        "ERROR: repo_map needs the tree-sitter grammars: pip install 'yggdrasil-loki[code]'", ""]


def test_python_outlines_agree_with_ast_on_real_stdlib_code(tmp_path: Path) -> None:
    """The accuracy bench_code.py measures on whole stdlib packages, guarded here on a few
    modules of every shape: every def and class ast finds, at its line, and nothing else."""
    import ast
    import json as json_package
    import shutil
    import sysconfig

    from yggdrasil.loki.code import Code
    from yggdrasil.loki.files import Root

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for rel in ("dataclasses.py", "argparse.py", "typing.py", "asyncio/tasks.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(stdlib / rel, tmp_path / rel)
    shutil.copytree(Path(json_package.__file__).parent, tmp_path / "json")
    code = Code(Root.at(tmp_path))
    agree = total = 0
    for path in sorted(tmp_path.rglob("*.py")):
        tree = ast.parse(path.read_bytes())
        want = {(n.name, n.lineno) for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
        outline = code.index.entry(path.relative_to(tmp_path).as_posix()).outline
        assert outline is not None
        got = {(s.name, s.line) for s in outline.symbols if s.kind in ("function", "method", "class")}
        agree, total = agree + len(want & got), total + len(want | got)
    assert total > 500 and agree / total >= 0.99, (agree, total)


def test_a_fresh_copy_of_a_large_repository_is_not_sent_to_a_pool_again(tmp_path: Path) -> None:
    """A tree large enough for the parse pool: what the pool parsed is kept by the
    process, and a second copy is answered from it (no pool started, no parse again)."""
    from yggdrasil.loki.code._pool import MIN_FILES
    from yggdrasil.loki.code._roots import held_for
    from yggdrasil.loki.files import Root

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the parse pool needs two cores")
    outlines = []
    for name in ("copy1", "copy2"):
        for i in range(MIN_FILES + 10):
            (tmp_path / name / f"p{i // 50}").mkdir(parents=True, exist_ok=True)
            (tmp_path / name / f"p{i // 50}" / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
        index = held_for(Root(tmp_path / name), False).index
        index.scan()
        outlines.append([index.entries[f"p{i // 50}/m{i}.py"].outline for i in range(MIN_FILES + 10)])
    assert [s.name for s in outlines[1][7].symbols] == ["f7"]
    assert all(a is b for a, b in zip(*outlines, strict=True))  # the pool's parses, kept


def test_a_process_told_to_parse_alone_starts_no_pool(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """LOKI_PARSE_PROCESSES=1 (a fleet worker's, one of many on the node): a large tree is
    parsed in the process itself."""
    from yggdrasil.loki.code import _pool
    from yggdrasil.loki.code._roots import held_for
    from yggdrasil.loki.files import Root

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("a parse pool was started")

    monkeypatch.setenv("LOKI_PARSE_PROCESSES", "1")
    monkeypatch.setattr(_pool, "ProcessPoolExecutor", no_pool)
    for i in range(_pool.MIN_FILES + 10):
        (tmp_path / f"alone{i}.py").write_text(f"def alone{i}():\n    return {i}\n")
    index = held_for(Root(tmp_path), False).index
    index.scan()
    assert [s.name for s in index.entries["alone3.py"].outline.symbols] == ["alone3"]


def test_a_fresh_copy_of_a_repository_is_not_parsed_again(tmp_path: Path) -> None:
    """A fleet worker runs attempt after attempt, each on a fresh working copy (a new
    root): files whose contents it parsed before are not parsed again, and a changed file
    is."""
    from yggdrasil.loki.code._roots import held_for
    from yggdrasil.loki.files import Root

    entries = []
    for name, body in (("copy1", "def f():\n    return 1\n"), ("copy2", "def f():\n    return 1\n"),
                       ("copy3", "def g():\n    return 2\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "m.py").write_text(body)
        index = held_for(Root(tmp_path / name), False).index
        index.scan()
        entries.append(index.entries["m.py"])
    assert entries[0].outline is entries[1].outline  # the same parse, shared
    assert [s.name for s in entries[2].outline.symbols] == ["g"]
