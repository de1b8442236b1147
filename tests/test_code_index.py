"""The code index kept fresh by change events, and the disk cache kept from commands."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from yggdrasil.loki.code import Code, _index
from yggdrasil.loki.files import DEFAULT_PROTECTED, Root
from yggdrasil.loki.search import protection
from yggdrasil.loki.search._listing import Listing
from yggdrasil.loki.search._walk import Visit
from yggdrasil.loki.shell import feeds
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox, sandbox_status

landlock = pytest.mark.skipif(not sandbox_status().available, reason="no Landlock here")

APP = ("import util\n\n\nclass Greeter:\n    def greet(self, name):\n        return util.helper(name)\n"
       "\n\ndef main():\n    Greeter().greet('x')\n")
UTIL = "def helper(name):\n    return name\n\n\ndef unused():\n    pass\n"


@pytest.fixture
def watched(root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Toolbox]:
    """A toolbox over a small tree that the index follows by events (as a large one)."""
    monkeypatch.setattr(_index, "WATCH_FROM", 0)
    (root / "pkg").mkdir()
    (root / "app.py").write_text(APP)
    (root / "pkg" / "util.py").write_text(UTIL)
    (root / "notes.txt").write_text("main\n")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "gen.py").write_text("def main():\n    pass\n")
    (root / "venv").mkdir()  # a package named venv (the standard library has one): the
    (root / "venv" / "env.py").write_text("def make_env():\n    pass\n")  # watch skips it
    with filesystem_toolbox(root, sandbox="off") as box:
        assert box.call("repo_map", {}).startswith("[repo map of .: ")
        assert index_of(root).tree is not None  # answers now come from the kept listing
        yield box


def index_of(root: Path) -> _index.Index:
    return Code(Root.at(root, protect=protection(DEFAULT_PROTECTED))).index


def test_edits_by_any_hand_are_seen_without_a_walk(root: Path, watched: Toolbox) -> None:
    index = index_of(root)
    assert watched.call("find_symbol", {"name": "helper"}).startswith("pkg/util.py:1: function helper(name)")
    (root / "pkg" / "util.py").write_text(UTIL.replace("def unused", "def by_editor"))
    assert watched.call("find_symbol", {"name": "by_editor"}).startswith("pkg/util.py:5: function by_editor()")
    assert watched.call("find_symbol", {"name": "unused"}).startswith("no definition named 'unused'")
    watched.call("edit_file", {"path": "app.py", "old": "def main():", "new": "def start():"})
    assert watched.call("find_symbol", {"name": "start"}).startswith("app.py:9: function start()")
    watched.call("run", {"command": "printf '\\ndef by_command():\\n    pass\\n' >> pkg/util.py"})
    assert watched.call("find_symbol", {"name": "by_command"}).startswith(
        "pkg/util.py:8: function by_command()")
    assert index.tree is not None  # modifications never needed a walk
    (root / "venv" / "env.py").write_text("def make_other_env():\n    pass\n")
    assert watched.call("find_symbol", {"name": "make_*"}).startswith(
        "venv/env.py:1: function make_other_env()")
    assert index.tree is not None  # a file where the watch is deaf is statted instead
    (root / "venv" / "new.py").write_text("def fresh_env():\n    pass\n")
    assert watched.call("find_symbol", {"name": "fresh_env"}).startswith("venv/new.py:1: ")


def _inotify_fds() -> int:
    fds = Path("/proc/self/fd")
    found = 0
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            found += os.readlink(fd) == "anon_inode:inotify"
    return found


def test_one_watcher_per_root_serves_change_tracking_and_the_code_index(
        root: Path, watched: Toolbox) -> None:
    """A command's edit is seen through one watch: the command's `changed` (change
    tracking) and find_symbol (the code index) both read the root's one feed."""
    index = index_of(root)
    before = _inotify_fds()
    watched.call("run", {"command": "true"})  # the tracker joins the feed the index started
    watching = {k: f for k, f in feeds().items() if k == str(root)}
    assert list(watching) == [str(root)]
    feed = watching[str(root)]
    assert feed.builds == 1 and _inotify_fds() == before  # no second walk, no second inotify
    assert index.watch is not None and index.watch.feed is feed
    ran = watched.invoke("run", {"command": "printf '\\ndef by_command():\\n    pass\\n' "
                                            ">> pkg/util.py && echo x > made.py"})
    assert ran.changed == ("made.py", "pkg/util.py")  # change tracking, from the feed
    assert watched.call("find_symbol", {"name": "by_command"}).startswith(
        "pkg/util.py:8: function by_command()")  # the code index, from the same feed
    assert index.tree is not None  # answered from events, not a walk
    (root / "pkg" / "util.py").write_text(UTIL + "\ndef by_editor():\n    pass\n")
    ran = watched.invoke("run", {"command": "rm made.py"})  # the editor's change is not the command's
    assert ran.changed == ("made.py",)
    assert watched.call("find_symbol", {"name": "by_editor"}).startswith("pkg/util.py:")
    assert feed.builds == 1 and _inotify_fds() == before


def test_definitions_added_deleted_and_moved_are_found_where_they_are(
        root: Path, watched: Toolbox) -> None:
    watched.call("run", {"command": "mkdir -p lib && printf 'def made():\\n    pass\\n' > lib/made.py"})
    assert watched.call("find_symbol", {"name": "made"}).startswith("lib/made.py:1: function made()")
    watched.call("run", {"command": "rm lib/made.py"})
    gone = watched.call("find_symbol", {"name": "made"})
    assert gone.startswith("no definition named 'made'") and "lib/made.py" not in gone
    out = watched.invoke("apply_patch", {"patch": "*** Begin Patch\n*** Update File: pkg/util.py\n"
                                                  "*** Move to: pkg/moved.py\n@@\n-def unused():\n"
                                                  "+def renamed():\n*** End Patch\n"})
    assert [(f.op, f.path, f.new_path) for f in out.data.files] == [
        ("R", "pkg/util.py", "pkg/moved.py")], out.text
    assert watched.call("find_symbol", {"name": "renamed"}).startswith("pkg/moved.py:5: function renamed()")
    assert watched.call("find_symbol", {"name": "helper"}).startswith("pkg/moved.py:1: function helper(name)")
    assert watched.call("outline", {"path": "pkg"}).startswith("pkg/moved.py:\n  function helper(name)")
    assert index_of(root).tree is not None  # the walk that settled the creation kept it again


def test_answers_from_the_kept_listing_equal_a_walk(root: Path, watched: Toolbox,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tree = index_of(root).tree
    questions = [("find_symbol", {"name": "helper"}), ("find_symbol", {"name": "Greeter.greet"}),
                 ("find_symbol", {"name": "*e*", "kind": "function"}),
                 ("find_symbol", {"name": "main", "path": "pkg"}),
                 ("find_symbol", {"name": "nowhere"}), ("outline", {"path": "."}),
                 ("outline", {"path": "pkg"}), ("repo_map", {"budget": 400}),
                 ("find_symbol", {"name": "main", "include_ignored": True})]
    for tool, args in questions:  # the counts of . and pkg are kept from here on, file by file
        watched.call(tool, args)
    (root / "pkg" / "bin.py").write_bytes(b"\0\x01binary")
    (root / "pkg" / "util.py").write_text(UTIL + "\n\nclass Helper:\n    pass\n")
    (root / "pkg" / "gone.py").write_text("def gone():\n    pass\n")
    (root / "pkg" / "data.json").write_text("{}")
    watched.call("find_symbol", {"name": "gone"})
    watched.call("run", {"command": "mkdir -p .hid new/deep build/more && echo 'def h(): pass' > "
                                    ".hid/h.py && echo 'def main(): pass' > new/deep/m.py && "
                                    "echo x > new/readme.md && echo 'def b(): pass' > "
                                    "build/more/b.py && mkdir .empty && rm notes.txt && "
                                    "rm pkg/gone.py pkg/data.json && touch app.py pkg/util.py"})
    kept = [watched.call(tool, args) for tool, args in questions]
    assert index_of(root).tree is tree  # creations and deletions were folded in, not walked
    monkeypatch.setattr(_index, "WATCH_FROM", 10**9)  # another index (protect=()) walks
    with filesystem_toolbox(root, sandbox="off", protect=()) as walking:
        walked = [walking.call(tool, args) for tool, args in questions]
        assert Code(Root.at(root)).index.tree is None
    assert kept == walked
    assert "1 binary" in kept[0] and "1 ignored" in kept[0] and "3 hidden" in kept[0]
    assert "new/deep/m.py:1: function main()" in watched.call("find_symbol", {"name": "main"})


@pytest.fixture
def user_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache folder outside /tmp (a command's /tmp is its own) that commands could read."""
    folder = Path(tempfile.mkdtemp(prefix="loki-cache-", dir="/var/tmp"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    (folder / "other.txt").write_text("readable\n")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@landlock
def test_the_code_cache_is_the_users_never_the_commands(root: Path, user_cache: Path) -> None:
    (root / "secrets.py").write_text('API_KEY = "sk-live-4f9a"\n')
    (root / "app.py").write_text(APP)
    with filesystem_toolbox(root, protect=(), code_cache=True) as lax:
        assert lax.call("repo_map", {}).startswith("[repo map of .: ")  # parses both, saves
        assert "sk-live-4f9a" in lax.call("outline", {"path": "secrets.py"})
        [stored] = (user_cache / "yggdrasil-loki" / "code").glob("*.json")
        text = stored.read_text()
        assert '"app.py"' in text and "secrets.py" not in text and "sk-live" not in text
        out = lax.call("run", {"command": f"cat {user_cache}/other.txt; cat {stored}"})
        assert "readable" in out and "app.py" not in out and "Permission denied" in out
    with filesystem_toolbox(root, code_cache=True) as strict:
        for _ in range(2):  # before its first code call, and after
            out = strict.call("run", {"command": f"cat {stored}; ls {stored.parent}"})
            assert "Permission denied" in out and "app.py" not in out and "sk-live" not in out
            strict.call("find_symbol", {"name": "main"})
        # made under other protection: not served, rebuilt and written over
        assert '"protect":[".env"' in stored.read_text()


def test_a_call_while_a_build_runs_answers_from_what_is_parsed_and_says_so(
        root: Path, watched: Toolbox) -> None:
    """While one call builds the index (its parse of every file running), another call
    answers from the files parsed so far at once, saying so, instead of walking the tree
    beside the build."""
    index = index_of(root)
    (root / "pkg" / "late.py").write_text("def helper_late():\n    pass\n")  # not parsed yet
    index.building = [2, 5]  # what _build says while its parse runs
    try:
        found = watched.invoke("find_symbol", {"name": "helper"})
        late = watched.call("find_symbol", {"name": "helper_late"})
    finally:
        index.building = None
    note = ("[the code index is being built: 2 of 5 source files parsed so far; this answer "
            "covers what is parsed, ask again when it is built]")
    assert found.text.split("\n") == ["pkg/util.py:1: function helper(name)", note]
    assert found.data is not None and found.data.scan.built == note  # type: ignore[attr-defined]
    assert late.split("\n") == [  # (no grep of the whole tree beside the build)
        "no definition named 'helper_late' in 3 source files under .", note]
    assert watched.call("find_symbol", {"name": "helper_late"}).startswith(
        "pkg/late.py:1: function helper_late()")  # built: the whole answer again


def test_thousands_of_files_where_the_watch_is_deaf_take_turns_not_a_walk_each_call(
        root: Path, watched: Toolbox) -> None:
    """A virtualenv or node_modules inside the tree (folders the watch does not enter) no
    longer sends every call back to a walk past 2,000 files: their folders are statted on
    each call and their files by turns, 4,000 a call."""
    index = index_of(root)
    deaf = root / "venv" / "lib"
    deaf.mkdir()
    for i in range(6_000):
        (deaf / f"data{i}.txt").write_text("x\n")
    watched.call("repo_map", {})  # a walk (a folder appeared there), the listing kept again
    tree = index.tree
    assert tree is not None and len(tree.blind) > 6_000
    (root / "venv" / "env.py").write_text("def make_deaf_env():\n    pass\n")
    seen = [watched.call("find_symbol", {"name": "make_deaf_env"}) for _ in range(2)]
    assert seen[-1].startswith("venv/env.py:1: function make_deaf_env()")  # within 2 calls
    assert index.tree is tree  # no walk


def test_a_kept_ranking_after_changes_equals_a_fresh_one(tmp_path: Path) -> None:
    """The ranker keeps its tables between maps; after files come and go (a name falls
    from more than MAX_DEFINERS definers to fewer, and rises again) its ranking is the one
    a new ranker makes of the same files."""
    from yggdrasil.loki.code._rank import MAX_DEFINERS, Ranker

    many = MAX_DEFINERS + 2
    for i in range(many):
        (tmp_path / f"d{i:02}.py").write_text(f"def shared_helper(x):\n    return x\n\n\n"
                                               f"def own_{i}():\n    return shared_helper({i})\n")
    (tmp_path / "use.py").write_text("from d00 import shared_helper\n\n\n"
                                     "def caller():\n    return shared_helper(1) + own_3()\n")
    index = Code(Root.at(tmp_path)).index

    def files() -> list[tuple[str, _index.Entry]]:
        return [(rel, e) for rel, e in index.scan(".").files if e.outline is not None]

    kept = Ranker()
    kept.rank(files())
    assert kept.found["shared_helper"] == many  # too many to link by: only counted
    for step in (lambda: (tmp_path / "d20.py").unlink(), lambda: (tmp_path / "d21.py").unlink(),
                 lambda: (tmp_path / "d05.py").write_text("def other():\n    pass\n"),
                 lambda: (tmp_path / "d20.py").write_text("def shared_helper():\n    pass\n")):
        step()
        now = files()
        got, fresh = list(kept.rank(now)), list(Ranker().rank(now))
        # the same definitions in the same order (the kept ranks start the power iteration
        # where they were, so scores agree to its tolerance)
        assert [(f, j) for _, f, j in got] == [(f, j) for _, f, j in fresh]
        assert [round(r, 5) for r, _, _ in got] == [round(r, 5) for r, _, _ in fresh]
    assert kept.found["shared_helper"] == (*(f"d{i:02}.py" for i in range(20) if i != 5),
                                           "d20.py")


def test_a_repeated_find_symbol_is_the_kept_answer_until_something_changes(
        root: Path, watched: Toolbox) -> None:
    from yggdrasil.loki.code._roots import held_for

    first = watched.call("find_symbol", {"name": "helper"})
    assert first.startswith("pkg/util.py:1: function helper(name)")
    held = held_for(Root.at(root, protect=protection(DEFAULT_PROTECTED)), None)
    kept = [answer for _, answer in held.found.values()]
    assert len(kept) == 1
    assert watched.call("find_symbol", {"name": "helper"}) == first
    assert next(answer for _, answer in held.found.values()) is kept[0]  # not made again
    watched.call("run", {"command": "printf 'def helper():\\n    pass\\n' > helper2.py"})
    again = watched.call("find_symbol", {"name": "helper"})
    assert again.startswith("helper2.py:1: function helper()\npkg/util.py:1: function helper(name)")
    (root / "helper2.py").unlink()
    assert watched.call("find_symbol", {"name": "helper"}) == first


def test_a_call_during_a_long_walk_waits_for_one_file_not_the_walk(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk holds the index's lock one file at a time: a call answers while the walk
    goes on (it waited for the whole walk: ~2.5 s after a first build of a 68,000-file
    tree, when a call landed in the walk that follows the parse)."""
    (root / "pkg").mkdir()
    for i in range(3):
        (root / "pkg" / f"m{i}.py").write_text(f"def f{i}():\n    pass\n")
    index = index_of(root)
    monkeypatch.setattr(_index, "MAX_VISITS", 10**9)
    real = _index.list_files
    asked, answered = threading.Event(), threading.Event()
    ended_by: list[str] = []

    def endless(at: Root, path: str = ".", **kwargs: bool) -> Listing:
        first = real(at, path, **kwargs)

        def visits() -> Iterator[Visit]:
            yield from first.visits
            asked.set()
            deadline = time.monotonic() + 30
            while not answered.is_set() and time.monotonic() < deadline:
                yield from real(at, path, **kwargs).visits  # the same files again and again
            ended_by.append("the answer" if answered.is_set() else "its deadline")

        return Listing(first.start, first.skips, visits())

    monkeypatch.setattr(_index, "list_files", endless)
    walk = threading.Thread(target=index.scan, args=("pkg",))
    walk.start()
    try:
        assert asked.wait(30)
        entry = index.entry("pkg/m1.py")  # takes the lock the walk holds file by file
    finally:
        answered.set()
        walk.join(60)
    assert entry.outline is not None
    assert ended_by == ["the answer"]  # the call got in while the walk was going on

