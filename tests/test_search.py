"""find and grep: ignore files, hidden, binary, links, caps; rg and Python agree."""

from __future__ import annotations

import codecs
import os
from pathlib import Path
from typing import Any

import pytest

from texts import Texts
from yggdrasil.loki.errors import PathError, ToolError
from yggdrasil.loki.files import Root
from yggdrasil.loki.results import MAX_ENTRIES, MAX_HITS, SearchSkips
from yggdrasil.loki.search import COUNT_LIMIT, IgnoreFile, Search, find_rg, glob_regex
from yggdrasil.loki.tools import Toolbox

HAVE_RG = find_rg() is not None
needs_rg = pytest.mark.skipif(not HAVE_RG, reason="ripgrep 14 (rg) is not installed")
ENGINES = ["python", pytest.param("rg", marks=needs_rg)]
HINT = "include_ignored=true searches ignored and hidden files"


def write(root: Path, rel: str, data: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)


@pytest.fixture
def tree(root: Path) -> Path:
    files: dict[str, str | bytes] = {
        ".gitignore": "*.log\nbuild/\n/top_only.txt\n!keep.log\n",
        ".ignore": "via_ignore.txt\n",
        "app.py": "def main():\n    return 'needle'\n",
        "README.md": "needle in readme\nNeedle upper\n",
        "keep.log": "needle kept by a whitelist\n",
        "debug.log": "needle ignored\n",
        "top_only.txt": "needle anchored ignore\n",
        "via_ignore.txt": "needle via .ignore\n",
        "build/out.py": "needle in build\n",
        ".hidden.py": "needle hidden\n",
        ".cache/x.py": "needle hidden folder\n",
        ".git/config": "needle git\n",
        "data.bin": b"needle\0binary",
        "late.txt": "needle early\n" + "filler line\n" * 20_000 + "\0\n",
        "crlf.txt": "needle crlf\r\n",
        "bom.txt": codecs.BOM_UTF8 + b"needle bom\n",
        "utf16.txt": "needle utf16\n".encode("utf-16"),
        "a-b.txt": "needle dash\n",
        "a/z.txt": "needle slash\n",
        "pkg/.gitignore": "*.txt\n!important.txt\n",  # and the root's *.log
        "pkg/mod.py": "needle = 1\n",
        "pkg/notes.txt": "needle notes\n",
        "pkg/important.txt": "needle important\n",
        "a/top_only.txt": "needle nested\n",
        "pkg/sub/code.py": "needle in sub\n",
        "pkg/sub/deep.log": "needle deep log\n",
        "pkg/sub/more.txt": "needle more\n",
    }
    for rel, data in files.items():
        write(root, rel, data)
    (root / "link_in.py").symlink_to("app.py")
    (root / "link_out").symlink_to(root.parent / "outside")
    (root / "link_out_file").symlink_to(root.parent / "outside" / "secret.txt")
    (root / "link_prefix").symlink_to(root.parent / "root-secrets")
    os.mkfifo(root / "pipe")
    return root


def search(root: Path, engine: str) -> Any:
    """The search tools answering text (the observation contract)."""
    return Texts(Search(Root.at(root), engine))  # type: ignore[arg-type]


# -- what each engine finds ----------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_skips_ignored_hidden_binary_and_links(tree: Path, engine: str) -> None:
    out = search(tree, engine).grep("needle")
    assert out.splitlines() == [
        "README.md:1: needle in readme",
        "a/top_only.txt:1: needle nested",
        "a/z.txt:1: needle slash",
        "a-b.txt:1: needle dash",
        "app.py:2:     return 'needle'",
        "bom.txt:1: needle bom",
        "crlf.txt:1: needle crlf",
        "keep.log:1: needle kept by a whitelist",
        "pkg/important.txt:1: needle important",
        "pkg/mod.py:1: needle = 1",
        "pkg/sub/code.py:1: needle in sub",
        "utf16.txt:1: needle utf16",
        f"[skipped: 7 ignored, 5 hidden, 2 binary; {HINT}]",
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_and_find_answer_typed_results(tree: Path, engine: str) -> None:
    typed = search(tree, engine).typed
    found = typed.grep("needle", path="pkg")
    assert (found.kind, found.pattern, found.start) == ("grep", "needle", "pkg")
    assert [(m.path, m.line, m.text) for m in found.matches] == [
        ("pkg/important.txt", 1, "needle important"), ("pkg/mod.py", 1, "needle = 1"),
        ("pkg/sub/code.py", 1, "needle in sub")]
    assert (found.more, found.more_at_least) == (0, False)
    assert found.skipped == SearchSkips(ignored=3, hidden=1)
    paths = typed.find("*.txt", include_ignored=True)
    assert paths.kind == "find" and "pkg/notes.txt" in paths.paths
    assert paths.include_ignored and paths.skipped == SearchSkips()
    nothing = typed.find("*.rs")
    assert (nothing.paths, nothing.more) == ([], 0)


@pytest.mark.parametrize("engine", ENGINES)
def test_include_ignored_searches_ignored_and_hidden_but_never_git_or_binary(
    tree: Path, engine: str
) -> None:
    out = search(tree, engine).grep("needle", include_ignored=True)
    for shown in (".hidden.py:1:", ".cache/x.py:1:", "debug.log:1:", "build/out.py:1:",
                  "pkg/notes.txt:1:", "via_ignore.txt:1:", "pkg/sub/deep.log:1:"):
        assert shown in out
    assert ".git" not in out.replace(".gitignore", "")
    assert "data.bin" not in out and "late.txt" not in out
    assert out.endswith("[skipped: 2 binary]")


@pytest.mark.parametrize("engine", ENGINES)
def test_find_lists_files_in_walk_order(tree: Path, engine: str) -> None:
    out = search(tree, engine).find("*.txt")
    assert out.splitlines() == [
        "a/top_only.txt", "a/z.txt", "a-b.txt", "bom.txt", "crlf.txt", "late.txt",
        "pkg/important.txt", "utf16.txt", f"[skipped: 7 ignored, 5 hidden; {HINT}]",
    ]
    assert search(tree, engine).find("pkg/**/*.py").splitlines()[0] == "pkg/mod.py"
    assert search(tree, engine).find("/*.py").splitlines()[0] == "app.py"
    assert "no files match '*.rs' under ." in search(tree, engine).find("*.rs")


@pytest.mark.parametrize("engine", ENGINES)
def test_glob_and_ignore_case(tree: Path, engine: str) -> None:
    s = search(tree, engine)
    assert [r.split(":")[0] for r in s.grep("needle", glob="*.py").splitlines()[:-1]] == [
        "app.py", "pkg/mod.py", "pkg/sub/code.py"]
    assert s.grep("NEEDLE").startswith("no matches for 'NEEDLE'")
    assert "README.md:2: Needle upper" in s.grep("NEEDLE UPPER", ignore_case=True)
    assert "pkg/mod.py:1:" in s.grep(r"needle\s=\s\d", glob="*.{py,js}")


@pytest.mark.parametrize("engine", ENGINES)
def test_subfolder_keeps_the_rules_of_the_folders_above(tree: Path, engine: str) -> None:
    out = search(tree, engine).grep("needle", path="pkg/sub")
    assert out.splitlines() == [
        "pkg/sub/code.py:1: needle in sub",
        f"[skipped: 2 ignored; {HINT}]",
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_linked_ignore_file_counts_at_every_level(root: Path, engine: str) -> None:
    """Read like ripgrep reads it (the link followed, inside the root), whether it lies in
    the start folder or above it."""
    write(root, "rules.txt", "x.txt\n")
    write(root, "pkg/sub/x.txt", "needle\n")
    write(root, "pkg/sub/y.txt", "needle\n")
    (root / "pkg" / ".gitignore").symlink_to("../rules.txt")
    for path in ("pkg", "pkg/sub"):
        out = search(root, engine).grep("needle", path=path)
        assert out.splitlines()[0] == "pkg/sub/y.txt:1: needle" and "x.txt" not in out, path


@pytest.mark.parametrize("engine", ENGINES)
def test_a_file_named_explicitly_is_searched_unless_binary(tree: Path, engine: str) -> None:
    s = search(tree, engine)
    assert s.grep("needle", path="debug.log") == "debug.log:1: needle ignored"
    assert s.grep("needle", path=".hidden.py") == ".hidden.py:1: needle hidden"
    assert s.grep("needle", path="data.bin") == (
        "no matches for 'needle' under data.bin\n[skipped: 1 binary]")
    assert s.find("*.log", path="debug.log") == "debug.log"


@pytest.mark.parametrize("engine", ENGINES)
def test_links_are_not_followed_and_nothing_outside_is_reported(tree: Path, engine: str) -> None:
    s = search(tree, engine)
    for out in (s.grep("SECRET"), s.grep("SECRET", include_ignored=True),
                s.find("*", include_ignored=True)):
        assert "TOP SECRET" not in out and "PREFIX" not in out
        assert "secret.txt" not in out and "key.txt" not in out and "link_" not in out
    for path in ("../outside", "link_out", "../root-secrets", "link_prefix",
                 str(tree.parent / "root-secrets"), "/etc"):
        with pytest.raises(PathError, match="escapes the agent root"):
            s.grep("SECRET", path=path)
        with pytest.raises(PathError, match="escapes the agent root"):
            s.find("*", path=path)
    assert s.grep("needle", path=str(tree / "app.py")) == "app.py:2:     return 'needle'"


@pytest.mark.parametrize("engine", ENGINES)
def test_errors(tree: Path, engine: str) -> None:
    s = search(tree, engine)
    with pytest.raises(ToolError, match=r"pattern '\(needle' is not a valid regex"):
        s.grep("(needle")
    with pytest.raises(ToolError, match="does not exist"):
        s.grep("x", path="nope")
    with pytest.raises(ToolError, match=r"inside \.git"):
        s.find("*", path=".git")
    with pytest.raises(ToolError, match="not a regular file or folder"):
        s.grep("x", path="pipe")
    with pytest.raises(ToolError, match="line break"):
        s.grep("a\nb")
    with pytest.raises(ToolError, match="unclosed"):
        s.grep("x", glob="*.{py")
    with pytest.raises(ToolError, match="file names only"):
        s.grep("x", glob="pkg/*.py")
    with pytest.raises(ToolError, match="pattern is empty"):
        s.find(" ")


@pytest.mark.parametrize("engine", ENGINES)
def test_explicit_hidden_folder_and_dash_pattern(tree: Path, engine: str) -> None:
    s = search(tree, engine)
    assert s.grep("needle", path=".cache") == ".cache/x.py:1: needle hidden folder"
    assert s.grep("-x", path="app.py").startswith("no matches for '-x'")
    assert s.find("pkg/").splitlines()[:3] == ["pkg/important.txt", "pkg/mod.py", "pkg/sub/code.py"]


def test_toolbox_reports_errors_as_observations(tree: Path, box: Toolbox) -> None:
    assert box.call("grep", {"pattern": "(x"}).startswith("ERROR: pattern '(x' is not a valid regex")
    assert box.call("grep", {"pattern": "x", "path": "nope"}).startswith("ERROR: nope does not exist")
    for path in ("../outside", "link_out", "../root-secrets", str(tree.parent / "root-secrets")):
        for tool, args in (("grep", {"pattern": "SECRET", "path": path}),
                           ("find", {"pattern": "*", "path": path})):
            out = box.call(tool, args)
            assert out.startswith("ERROR:") and "SECRET" not in out, (tool, path, out)
    out = box.call("grep", {"pattern": "needle", "glob": "*.py", "ignore_case": True,
                            "include_ignored": True})
    assert "build/out.py:1: needle in build" in out
    assert box.call("find", {"pattern": "*.log", "include_ignored": True}).splitlines()[0] == (
        "debug.log")


# -- caps ----------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_find_cap_says_how_many_more(root: Path, engine: str) -> None:
    for i in range(MAX_ENTRIES + 25):
        (root / f"f{i:05d}.txt").touch()
    rows = search(root, engine).find("*.txt").splitlines()
    assert rows[0] == "f00000.txt" and rows[MAX_ENTRIES - 1] == f"f{MAX_ENTRIES - 1:05d}.txt"
    assert rows[-1] == "[... 25 more paths not shown; use a narrower pattern or path]"


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_cap_counts_the_rest(root: Path, engine: str) -> None:
    write(root, "b.txt", "hit\n" * 300)
    write(root, "a.txt", "hit\n" * 300)
    rows = search(root, engine).grep("hit").splitlines()
    assert rows[0] == "a.txt:1: hit" and rows[MAX_HITS - 1] == f"b.txt:{MAX_HITS - 300}: hit"
    assert rows[-1] == "[... 100 more matches not shown; narrow the pattern, path or glob]"


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_stops_counting_past_the_limit(root: Path, engine: str) -> None:
    write(root, ".gitignore", "*.log\n")
    write(root, ".h", "hit\n")
    write(root, "f1.txt", "hit\n" * (COUNT_LIMIT + 1000))
    write(root, "zz.log", "hit\n")
    rows = search(root, engine).grep("hit").splitlines()
    assert len(rows) == MAX_HITS + 2
    assert rows[MAX_HITS - 1] == f"f1.txt:{MAX_HITS}: hit"
    assert rows[-2] == (f"[... more than {COUNT_LIMIT - MAX_HITS} more matches not shown "
                        f"(counting stops at {COUNT_LIMIT}); narrow the pattern, path or glob]")
    assert rows[-1] == f"[skipped before the cut: 2 hidden; {HINT}]"


@pytest.mark.parametrize("engine", ENGINES)
def test_long_lines_are_clipped(root: Path, engine: str) -> None:
    write(root, "wide.txt", "x" * 5000 + " needle\n")
    out = search(root, engine).grep("needle")
    assert out.startswith("wide.txt:1: xxx") and "more chars on this line]" in out
    assert len(out) < 2200


# -- both engines agree ----------------------------------------------------------------

TRICKY_IGNORE = "\n".join([
    "# a comment", "\\#hash.txt", "*.{c,h}", "[a-c]*.dat", "!b1.dat", "docs/**/*.md",
    "**/gen", "out/", "/rootonly.txt", "mid/*.tmp", "trail.txt   ", "x**y.txt", "a}b.txt",
    "deep/**",
])
TRICKY_FILES = [
    "#hash.txt", "m.c", "m.h", "m.cc", "a1.dat", "b1.dat", "d1.dat", "docs/a.md", "docs/x/y/b.md",
    "docs/keep.txt", "src/gen/g.py", "gen/h.py", "out/o.txt", "src/out", "rootonly.txt",
    "src/rootonly.txt", "mid/t.tmp", "mid/sub/t.tmp", "trail.txt", "xzzy.txt", "ab.txt",
    "deep/d.txt", "deep/e/f.txt", "sub/.ignore", "sub/i.txt", "sub/j.txt", "sub/.rgignore",
]
CALLS: list[tuple[str, dict[str, object]]] = [
    ("grep", {"pattern": "data"}), ("grep", {"pattern": "data", "include_ignored": True}),
    ("grep", {"pattern": r"^da\w+$", "glob": "*.txt"}), ("grep", {"pattern": "DATA", "ignore_case": True}),
    ("grep", {"pattern": "data", "path": "sub"}), ("grep", {"pattern": "data", "path": "docs/x"}),
    ("find", {"pattern": "*"}), ("find", {"pattern": "**/*.txt"}), ("find", {"pattern": "src/*"}),
    ("find", {"pattern": "*", "include_ignored": True}), ("find", {"pattern": "*", "path": "sub"}),
]


@needs_rg
@pytest.mark.parametrize(("tool", "args"), CALLS)
def test_engines_agree_on_tricky_ignore_files(root: Path, tool: str, args: dict[str, object]) -> None:
    write(root, ".gitignore", TRICKY_IGNORE + "\n")
    for rel in TRICKY_FILES:
        write(root, rel, "data\n")
    write(root, "sub/.ignore", "i.txt\n!j.txt\n")
    write(root, "sub/.gitignore", "j.txt\n")
    write(root, "sub/.rgignore", "!i.txt\n")
    write(root, "docs/x/.gitignore", "!b.md\n")
    outs = [getattr(search(root, engine), tool)(**args) for engine in ("rg", "python")]
    assert outs[0] == outs[1]


@needs_rg
@pytest.mark.parametrize(("tool", "args"), [
    ("grep", {"pattern": "needle"}), ("grep", {"pattern": "needle", "include_ignored": True}),
    ("grep", {"pattern": "NEEDLE", "ignore_case": True, "glob": "*.{py,txt}"}),
    ("grep", {"pattern": r"needle \w+$", "path": "pkg"}), ("grep", {"pattern": "^$|needle$"}),
    ("find", {"pattern": "*"}), ("find", {"pattern": "*", "include_ignored": True}),
    ("find", {"pattern": "pkg/"}), ("grep", {"pattern": "needle", "path": ".cache"}),
    ("grep", {"pattern": "-?needle", "glob": "*.txt"}), ("find", {"pattern": "**"}),
])
def test_engines_agree_on_the_fixture_tree(tree: Path, tool: str, args: dict[str, object]) -> None:
    outs = [getattr(search(tree, engine), tool)(**args) for engine in ("rg", "python")]
    assert outs[0] == outs[1]


# -- globs, as ripgrep reads them -------------------------------------------------------


@pytest.mark.parametrize(("glob", "yes", "no"), [
    ("*.py", ["a.py", ".py"], ["a.pyc", "d/a.py"]),
    ("**/x", ["x", "a/b/x"], ["xx"]),
    ("a/**", ["a/b", "a/b/c"], ["a"]),
    ("a/**/b", ["a/b", "a/x/y/b"], ["ab"]),
    ("*.{c,h}", ["m.c", "m.h"], ["m.cc"]),
    ("[!a-c]?", ["dz"], ["az", "d"]),
    ("\\*", ["*"], ["a"]),
])
def test_glob_syntax(glob: str, yes: list[str], no: list[str]) -> None:
    import re

    rx = re.compile(glob_regex(glob, literal_separator=True))
    assert all(rx.fullmatch(p) for p in yes)
    assert not any(rx.fullmatch(p) for p in no)


def test_ignore_file_last_match_wins_and_folders_only() -> None:
    rules = IgnoreFile("*\n!*/\n!*.py\nbuild/\n")
    assert rules.match("a/b.txt", False) is True
    assert rules.match("a/b.py", False) is False
    assert rules.match("a", True) is False
    assert rules.match("x/build", True) is True
    assert rules.match("build", False) is True  # '*' still matches a file named build


def test_find_globs_matched_without_re2_answer_as_re2_does() -> None:
    # find's quick matchers (str.endswith, Python's re, string search) vs the RE2 regex
    from itertools import product

    from yggdrasil.loki.search._globs import glob_matcher, glob_test

    globs = ["*.py", "*", "a*", "*a*b", "a*b*a", "*.*", "a/*", "*/b*", "a*/*b/*", "a\\*b",
             "*a*a*a*b", "a?b", "a/**/b", "**/a*", "[ab]*", "{a,b}*"]
    names = ["".join(p) for n in range(1, 4) for p in product("ab.*", repeat=n)]
    paths = names + [f"{x}/{y}" for x in names[:20] for y in names[:20]] + ["a/b/c.py"]
    for glob in globs:
        for any_folder in ([True, False] if "/" not in glob else [False]):
            rx = glob_matcher(glob, literal_separator=True, any_folder=any_folder)
            test = glob_test(glob, any_folder=any_folder)
            wrong = [p for p in paths if bool(test(p)) != bool(rx.fullmatch(p))]
            assert wrong == [], (glob, any_folder, wrong[:5])


def test_a_listing_drops_exactly_the_protected_paths(tmp_path: Path) -> None:
    from yggdrasil.loki.files import DEFAULT_PROTECTED
    from yggdrasil.loki.search._protected import protection
    from yggdrasil.loki.search._rg import _Visible

    rels = ["a.py", "x/y.pem", ".env", "d/.env.local", ".env.example", "k/id_rsa.pub",
            "q/xid_rsa", "service-account-1.json", "a/secrets.yml", "credentials.json",
            "foo.json", ".aws/x", "a/.ssh/k", "a.pem/b", "b/a.pem.txt", "z/.aws"]
    for globs in (DEFAULT_PROTECTED, ("*.pem", "!x/y.pem"), ("sub/*.py",), ("*",)):
        root = Root.at(tmp_path, protect=protection(globs))
        shown = _Visible(root)(list(rels), "\0" + "\0".join(rels) + "\0")
        assert shown == [r for r in rels if root.covered(r) is None], globs


def test_find_reads_only_the_paths_holding_a_rare_literal() -> None:
    from yggdrasil.loki.search._rg import _holding

    paths = [f"pkg{i}/file_{i}.py" for i in range(100)] + ["x/file_42", "file_42/y"]
    text = "\0" + "\0".join(paths) + "\0"
    assert _holding(text, "file_42") == ["pkg42/file_42.py", "x/file_42", "file_42/y"]
    assert _holding(text, ".py") == paths  # common: the block is split whole
    assert _holding(text, "zzz") == []
