"""find / grep against hostile names, patterns and trees (issue #11, family 1).

- globs with many stars against a long name backtracked for hours (Python ``re``);
- the Python engine's regex backtracked on ``^(\\w+\\s?)+$`` and a long line;
- ripgrep opens paths by name: a folder swapped for a link to the outside while it walks
  led it outside the root. It now runs under a read-only Landlock fence.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from yggdrasil.loki.errors import ToolError
from yggdrasil.loki.files import Root
from yggdrasil.loki.sandbox import landlock_status
from yggdrasil.loki.search import Search, find_rg

ENGINES = ["python", *(["rg"] if find_rg() else [])]
STARS = "*a*a*a*a*a*a*a*a*a*a*b"
needs_rg_and_landlock = pytest.mark.skipif(
    find_rg() is None or landlock_status().abi == 0, reason="needs ripgrep and Landlock")


@pytest.mark.parametrize("engine", ENGINES)
def test_globs_with_many_stars_take_linear_time(root: Path, engine: str) -> None:
    """In a child process with a deadline: before, this ran for hours."""
    (root / ("a" * 120)).write_text("x marks the spot\n")
    (root / ("a" * 119 + "b")).write_text("x marks the spot\n")
    code = f"""
import json, sys
from yggdrasil.loki.files import Root
from yggdrasil.loki.results import render_text as text
from yggdrasil.loki.search import Search
s = Search(Root.at(sys.argv[1]), backend={engine!r})
print(json.dumps([text(s.find({STARS!r})), text(s.grep("x", glob={STARS!r})),
                  text(s.grep("x", glob="{{" + {STARS!r} + ",q}}"))]))
"""
    found, grepped, alt = run_child(code, root)
    name = "a" * 119 + "b"
    assert found == name
    assert grepped == alt == f"{name}:1: x marks the spot"


def test_ignore_files_with_many_stars_take_linear_time(root: Path) -> None:
    (root / ".gitignore").write_text(STARS + "\n")
    (root / ("a" * 120)).write_text("x\n")
    (root / ("a" * 119 + "b")).write_text("x\n")
    code = """
import json, sys
from yggdrasil.loki.files import Root
from yggdrasil.loki.results import render_text
from yggdrasil.loki.search import Search
print(json.dumps([render_text(Search(Root.at(sys.argv[1]), backend="python").find("*"))]))
"""
    (found,) = run_child(code, root)
    assert found.splitlines() == ["a" * 120, "[skipped: 1 ignored, 1 hidden; include_ignored="
                                  "true searches ignored and hidden files]"]


def test_the_python_engine_never_backtracks(root: Path) -> None:
    (root / "long.txt").write_text("word " * 5000 + "!\n" + "just words\n")
    code = r"""
import json, sys
from yggdrasil.loki.files import Root
from yggdrasil.loki.results import render_text as text
from yggdrasil.loki.search import Search
s = Search(Root.at(sys.argv[1]), backend="python")
print(json.dumps([text(s.grep(r"^(\w+\s?)+$")), text(s.grep(r"(a|aa)+$")),
                  text(s.grep(r"^(\w+\s?)*!$"))]))
"""
    catastrophic, alternation, bang = run_child(code, root)
    assert catastrophic == "long.txt:2: just words"
    assert alternation == "no matches for '(a|aa)+$' under ."
    assert bang.startswith("long.txt:1: word word")


def run_child(code: str, root: Path) -> list[str]:
    src = Path(__file__).resolve().parents[1] / "src"
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(src)},
                          check=False)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def test_look_around_is_refused_like_ripgrep_refuses_it(root: Path) -> None:
    (root / "a.txt").write_text("ab\n")
    for engine in ENGINES:
        with pytest.raises(ToolError, match=r"pattern '\(\?<=a\)b' is not a valid regex"):
            Search(Root.at(root), backend=engine).grep("(?<=a)b")  # type: ignore[arg-type]
        with pytest.raises(ToolError, match="not a valid regex"):
            Search(Root.at(root), backend=engine).grep(r"(a)\1")  # type: ignore[arg-type]


# -- a folder swapped for a link to the outside while ripgrep walks --------------------------


@pytest.fixture
def swapping(root: Path) -> Iterator[Path]:
    """``root/d`` flips between a real folder and a link to ``outside`` until the test ends."""
    outside = root.parent / "outside"
    for i in range(20):
        (outside / f"f{i}.txt").write_text("OUTSIDE SECRET\n")
    (root / "d").mkdir()
    for i in range(20):
        (root / "d" / f"f{i}.txt").write_text("inside secret\n")
    stop = threading.Event()

    def flip() -> None:
        real, link = root / "d", root / "d.real"
        while not stop.is_set():
            os.rename(real, link)
            os.symlink(outside, real)
            time.sleep(0.001)  # long enough for rg to open a few files through the link
            os.unlink(real)
            os.rename(link, real)
            time.sleep(0.001)

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    yield root
    stop.set()
    thread.join()


def grep_many(root: Path, calls: int) -> int:
    search = Search(Root.at(root), backend="rg")
    leaks = 0
    for _ in range(calls):
        try:
            out = search.grep("SECRET", ignore_case=True)
        except ToolError:
            continue
        leaks += any("OUTSIDE" in match.text for match in out.matches)
    return leaks


@needs_rg_and_landlock
def test_a_swapped_folder_does_not_lead_ripgrep_outside(
        swapping: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yggdrasil.loki.search._rg as rg

    with monkeypatch.context() as unfenced:  # today's main: rg ran unfenced
        unfenced.setattr(rg, "fenced", lambda args, root, extra: args)
        before = grep_many(swapping, 150)
    after = grep_many(swapping, 150)
    assert after == 0
    if before == 0:
        pytest.skip("the race did not happen unfenced on this run (the fenced run held)")


FOLLOW_AS_USER = """
import subprocess, sys
sys.path.insert(0, sys.argv[1])
from _readonly import binary_paths, read_only_argv
root, rg, abi = sys.argv[2], sys.argv[3], int(sys.argv[4])
args = [rg, "--no-config", "-L", "-e", "SECRET", "."]
plain = subprocess.run(args, cwd=root, capture_output=True, text=True).stdout
fenced = subprocess.run(read_only_argv(args, read=[root], execute=binary_paths(rg), abi=abi),
                        cwd=root, capture_output=True, text=True).stdout
print(repr(plain)); print(repr(fenced))
"""


@needs_rg_and_landlock
def test_the_rg_fence_holds_for_an_ordinary_user(request: pytest.FixtureRequest,
                                                 readable_checkout: tuple[Path, Path]) -> None:
    """As uid 65534, with a link rg is told to follow (-L): unfenced it reads the outside."""
    python = shutil.which("python3", path="/usr/bin")
    if os.geteuid() != 0 or python is None or shutil.which("setpriv") is None:
        pytest.skip("needs root, setpriv and /usr/bin/python3 to switch to an ordinary user")
    base = Path(tempfile.mkdtemp(prefix="loki-rg-user-"))
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "s.txt").write_text("OUTSIDE SECRET\n")
    (root / "in.txt").write_text("inside SECRET\n")
    (root / "link").symlink_to(outside)
    rg = base / "rg"
    shutil.copy(find_rg() or "", rg)  # the user cannot reach root's own rg
    for path in (base, root, outside, rg):
        path.chmod(0o755)
    for path in (outside / "s.txt", root / "in.txt"):
        path.chmod(0o644)
    sandbox = readable_checkout[0] / "yggdrasil" / "loki" / "sandbox"  # the user reads it
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-I", "-c",
         FOLLOW_AS_USER, str(sandbox), str(root), str(rg), str(landlock_status().abi)],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    plain, fenced = (ast.literal_eval(line) for line in done.stdout.splitlines())
    assert "OUTSIDE SECRET" in plain  # the attack works without the fence
    assert "OUTSIDE SECRET" not in fenced and "inside SECRET" in fenced
