"""The third red team: attacks on the seams between features that were each hardened alone.

A hostile model, a hostile file in the root and a hostile page each try to get past one
feature through another: a protected file read through the code index, the table worker
or the fleet's bookkeeping; a module planted in the root run by a library's optional
import; a protected file moved out of the command mask's sight. Each test failed before
its fix (see the commit that adds it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet_kit import done, run, write_script
from yggdrasil.loki.fleet import Fleet, Task
from yggdrasil.loki.sandbox import isolation_status, launcher_argv
from yggdrasil.loki.tools import filesystem_toolbox

HERE = Path(__file__).resolve().parent
SRC = str(HERE.parent / "src")
ISO = isolation_status()
isolated = pytest.mark.skipif(not ISO.namespaces, reason=f"no namespaces here: {ISO}")
SECRET = "sk-SEAM-SECRET-42"


# --- modules planted in the root --------------------------------------------------------

_AGENT_SCRIPT = """
import os, sys
from yggdrasil.loki.tools import filesystem_toolbox
here = os.path.dirname(os.path.abspath(__file__))
assert os.path.realpath(sys.path[0]) == os.path.realpath(here)  # the root is on the path
box = filesystem_toolbox(here)
print(box.call(sys.argv[1], {sys.argv[2]: sys.argv[3]}).splitlines()[0])
import mine
print('own module:', mine.X)
"""


def _agent_in_root(root: Path, *call: str) -> list[str]:
    """Run a program started from ``root`` (so the root is on its sys.path) that builds a
    toolbox there and makes one call; what it printed."""
    (root / ".env").write_text(f"API_KEY={SECRET}\n")
    (root / "a.csv").write_text("a,b\n1,2\n")
    (root / "mine.py").write_text("X = 'mine'\n")  # the user's own module still imports
    (root / "agent.py").write_text(_AGENT_SCRIPT)
    done = subprocess.run([sys.executable, "agent.py", *call], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout and "planted" not in done.stdout, done.stdout
    return done.stdout.splitlines()


def test_a_library_s_optional_import_never_takes_a_module_planted_in_the_root(
        tmp_path: Path) -> None:
    """sqlglot tries ``import sqlglotrs`` (an accelerator that is not installed): with the
    root on sys.path, a ``sqlglotrs.py`` a command wrote there ran in the agent, with its
    API keys in the environment."""
    (tmp_path / "sqlglotrs.py").write_text("open('sqlglotrs.ran', 'w').close()\n")
    said = _agent_in_root(tmp_path, "query_table", "sql", "SELECT * FROM 'a.csv'")
    assert said == ["result  shape=(1, 2)  columns=['a', 'b']", "own module: mine"], said
    assert not (tmp_path / "sqlglotrs.ran").exists()


def test_the_user_s_modules_imported_by_name_still_import(tmp_path: Path) -> None:
    """The rule against installed code's imports from the root refused the user's own
    modules whenever a library imported them by name on the user's behalf (a logging
    handler class in dictConfig, Django settings, importlib.import_module): only an
    ``import`` statement in installed code (an optional accelerator) is refused."""
    (tmp_path / "myhandlers.py").write_text("import logging\nclass H(logging.Handler):\n"
                                            "    def emit(self, record): pass\n")
    (tmp_path / "accel.py").write_text("open('accel.ran', 'w').close()\n")
    (tmp_path / "main.py").write_text(
        "import importlib, json.decoder, logging.config\n"
        "from yggdrasil.loki.tools import filesystem_toolbox\n"
        "box = filesystem_toolbox('.')\n"
        "logging.config.dictConfig({'version': 1, 'handlers': {'h': {'class': 'myhandlers.H'}}})\n"
        "print(importlib.import_module('myhandlers').H.__name__)\n"
        "installed = compile('try:\\n    import accel\\nexcept ImportError as e:\\n"
        "    print(type(e).__name__)\\n', json.decoder.__file__, 'exec')\n"
        "exec(installed, {})  # as if the standard library tried an optional module\n")
    done = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["H", "ModuleNotFoundError"], done.stdout
    assert not (tmp_path / "accel.ran").exists()


def test_the_table_worker_never_imports_a_module_planted_in_the_root(tmp_path: Path) -> None:
    """The table worker starts with the agent's module folders: with the root among them,
    it imported a planted ``polars.py``, which read the protected .env (the worker may
    read the whole root) and sent it back as the error the model reads."""
    (tmp_path / "polars.py").write_text(
        "import os, sys\n"
        "here = [p for p in sys.path if os.path.exists(os.path.join(p, '.env'))][0]\n"
        "raise SystemExit('planted polars: ' + open(os.path.join(here, '.env')).read())\n")
    said = _agent_in_root(tmp_path, "read_table", "path", "a.csv")
    assert said == ["a.csv  shape=(1, 2)  columns=['a', 'b']", "own module: mine"], said


# --- the command mask and the change tracker ----------------------------------------------

_FLOOD = ("python3 -c \"import os\nfor i in range(60000):\n"
          "    open(f'j{i}', 'w').close(); os.unlink(f'j{i}')\"")  # overflows inotify's queue


@isolated
@pytest.mark.parametrize("hide", [
    "mkdir -p node_modules && mv config node_modules/",  # a folder the tracker never walks
    f"touch config/pyvenv.cfg; {_FLOOD}",  # a virtualenv, once the tracker rebuilds its view
])
def test_a_protected_file_moved_out_of_the_masks_sight_stays_masked(root: Path, hide: str) -> None:
    """Masks were computed from the change tracker's view, which does not look into
    node_modules, virtualenvs or caches: renaming the folder above a masked .env into
    one (or planting a pyvenv.cfg and flooding inotify so the view is rebuilt) left the
    next command free to read it."""
    (root / "config").mkdir()
    (root / "config" / ".env").write_text(f"API_KEY={SECRET}\n")
    box = filesystem_toolbox(root)
    assert "Permission denied" in box.call("run", {"command": "cat config/.env"})
    box.call("run", {"command": hide})
    out = box.call("run", {"command": "cat config/.env node_modules/config/.env"})
    assert SECRET not in out and "Permission denied" in out, out
    out = box.call("run", {"command": "grep -r API_KEY . ; tar cf - . | tar xOf -"})
    assert SECRET not in out, out


@isolated
@pytest.mark.parametrize("swap", ["moved", "a link"])
def test_a_mask_planned_before_a_job_moved_the_file_stops_the_command(
        root: Path, swap: str) -> None:
    """The agent plans a command's masks, then its launcher mounts them: a background job
    that renames the folder above the .env in between (or swaps it for a link to a decoy)
    made the mask land nowhere (or on the decoy), and the command read the real file. The
    launcher now reaches each path without following a link and refuses to run when it
    moved. (Run here with a plan made stale on purpose: what the race produces.)"""
    (root / "config").mkdir()
    (root / "config" / ".env").write_text(f"API_KEY={SECRET}\n")
    plan = [("tmpfs", "/tmp"), ("bind", str(root)), ("protect", str(root / "config" / ".env"))]

    def launch(command: str) -> subprocess.CompletedProcess[str]:
        argv = launcher_argv(sys.executable, [str(root)], network=True, abi=0,
                             argv=["/bin/sh", "-c", command], namespaces=True, mounts=plan)
        return subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=60)

    assert "Permission denied" in launch("cat config/.env").stderr
    (root / "config").rename(root / "moved")
    if swap == "a link":
        (root / "decoy").mkdir()
        (root / "decoy" / ".env").write_text("decoy\n")
        (root / "config").symlink_to("decoy")
    done = launch("cat moved/.env; cat config/.env")
    assert SECRET not in done.stdout, done.stdout
    assert done.returncode == 126 and "run it again" in done.stderr, done.stderr


# --- the fleet's bookkeeping beside the root -----------------------------------------------

@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp (a command's /tmp is a private tmpfs, which would hide what
    lies there anyway): where a real fleet keeps its cache, under ~/.cache."""
    where = Path(tempfile.mkdtemp(prefix="loki-seams-", dir="/var/tmp"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


@isolated
def test_a_fleet_attempt_cannot_read_protected_files_through_the_fleets_own_copies(
        outside_tmp: Path) -> None:
    """An attempt's snapshots (a git store of the whole copy, protected files included) sit
    beside the root in the scratch folder, and the task's own folder is a plain path: the
    agent's commands read the .env from both while the copy's .env was masked."""
    source = outside_tmp / "notes"
    source.mkdir()
    (source / "notes.txt").write_text("draft\n")
    (source / ".env").write_text(f"API_KEY={SECRET}\n")
    steal = ("cat .env; cat ../snapshots.git/snapshot-index >/dev/null && echo index-read; "
             "for f in ../snapshots.git/objects/??/*; do python3 -c \"import zlib, sys; "
             "print(zlib.decompress(open(sys.argv[1], 'rb').read()))\" $f; done; "
             f"cat {source}/.env; ls ../..")
    write_script(outside_tmp / "s", "t1", run(steal), done())
    fleet = Fleet("scripted", model=str(outside_tmp / "s" / "{id}.jsonl"), backend="local",
                  workers=1, out=outside_tmp / "out", cache_dir=outside_tmp / "cache")
    [result] = list(fleet.run([Task(id="t1", repo=str(source), prompt="x")]))
    assert result.status == "done", result
    said = (outside_tmp / "out" / "t1" / "transcript.jsonl").read_text()
    observation = next(json.loads(line) for line in said.splitlines()
                       if json.loads(line)["type"] == "step")["observation"]
    assert SECRET not in said and "index-read" not in observation, observation
    assert observation.count("Permission denied") >= 3, observation


# --- the code index, shared by toolboxes and kept on disk ----------------------------------

def _code_root(root: Path) -> None:
    (root / "secrets.py").write_text(f'API_KEY = "{SECRET}"\n\ndef leak():\n    pass\n')
    (root / "app.py").write_text("from secrets import API_KEY\n\ndef main():\n"
                                 "    return API_KEY\n")


def test_the_shared_code_index_answers_each_toolbox_with_its_own_protected_files(
        root: Path) -> None:
    """The index is shared by every toolbox of a root in the process: one made with
    ``protect=()`` parsed secrets.py, and a protected toolbox then showed its constant."""
    _code_root(root)
    open_box = filesystem_toolbox(root, read_only=True, protect=())
    assert SECRET in open_box.call("find_symbol", {"name": "API_KEY"})
    box = filesystem_toolbox(root, read_only=True)
    for tool, args in (("find_symbol", {"name": "API_KEY"}), ("outline", {"path": "."}),
                       ("repo_map", {}), ("find_symbol", {"name": "leak"})):
        out = box.call(tool, args)
        assert SECRET not in out and "leak" not in out.replace("'leak'", ""), (tool, out)
        assert "1 protected" in out, (tool, out)


_CACHED = """
import sys
from yggdrasil.loki.tools import filesystem_toolbox
kw = {} if sys.argv[2] == "on" else {"protect": ()}
box = filesystem_toolbox(sys.argv[1], read_only=True, code_cache=True, **kw)
print(box.call("repo_map", {}))
"""


def test_a_code_cache_written_without_protection_loses_the_protected_files(
        root: Path, tmp_path: Path) -> None:
    """The disk copy of the index sits in ~/.cache, which commands can read: one written
    by a toolbox that protected nothing kept secrets.py's constants there for good."""
    _code_root(root)
    env = {**os.environ, "PYTHONPATH": SRC, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for protect in ("off", "on"):
        done = subprocess.run([sys.executable, "-c", _CACHED, str(root), protect], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert (SECRET in done.stdout) == (protect == "off"), done.stdout
    [cached] = (tmp_path / "cache").rglob("*.json")
    assert SECRET not in cached.read_text() and "secrets.py" not in cached.read_text()


# --- git's config and hooks through the file tools ----------------------------------------

_GIT_WRITES = {
    "write_file hook": ("write_file", {"path": ".git/hooks/pre-commit",
                                       "content": "#!/bin/sh\ntouch ../pwned\n"}),
    "edit config": ("edit_file", {"path": ".git/config", "old": "[core]",
                                  "new": "[core]\n\tfsmonitor = touch ../pwned; echo"}),
    "patch adds a hook": ("apply_patch", {"patch": "*** Begin Patch\n*** Add File: "
                                          ".git/hooks/post-checkout\n+#!/bin/sh\n*** End Patch"}),
    "patch moves into hooks": ("apply_patch", {"patch": "*** Begin Patch\n*** Update File: "
                                               "notes.txt\n*** Move to: .git/hooks/pre-push\n"
                                               "*** End Patch"}),
    "commondir": ("write_file", {"path": ".git/commondir", "content": "../evil\n"}),
    "a .git file": ("write_file", {"path": "sub/.git", "content": "gitdir: ../evil\n"}),
    "mercurial hooks": ("write_file", {"path": ".hg/hgrc",
                                       "content": "[hooks]\npre-status = touch ../pwned\n"}),
}


@pytest.mark.parametrize("attack", sorted(_GIT_WRITES))
def test_the_file_tools_never_write_what_git_runs(root: Path, attack: str) -> None:
    """Commands get .git/config and .git/hooks read-only (git_writable=False), but the
    file tools wrote them: an fsmonitor set with edit_file ran, unfenced, at the user's
    next 'git status'."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "notes.txt").write_text("[core]\n")
    config = (root / ".git" / "config").read_bytes()
    box = filesystem_toolbox(root, sandbox="off")
    tool, args = _GIT_WRITES[attack]
    if tool == "apply_patch":  # a dry run says what the patch would meet
        out = box.call(tool, {**args, "dry_run": True})
        assert out.startswith("ERROR: ") and "read-only for the tools" in out, out
    out = box.call(tool, args)
    assert out.startswith("ERROR: ") and "read-only for the tools" in out, out
    assert "git_writable=True" in out
    assert (root / ".git" / "config").read_bytes() == config
    assert not any((root / ".git" / "hooks" / n).exists()
                   for n in ("pre-commit", "post-checkout", "pre-push"))
    assert not (root / ".git" / "commondir").exists() and not (root / "sub" / ".git").exists()
    assert (root / "notes.txt").exists()


def test_git_writable_lets_the_tools_write_them(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    box = filesystem_toolbox(root, sandbox="off", git_writable=True)
    out = box.invoke("edit_file", {"path": ".git/config", "old": "[core]",
                                   "new": "[core]\n\tautocrlf = false"})
    assert (out.data.path, out.data.replacements) == (".git/config", 1), out.text
    assert "restored .git/config" in str(box.revert())


_COMMONDIR = ("mkdir -p evil/hooks evil/objects evil/refs && cp .git/HEAD evil/ && "
              "printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch "
              "\"$PWD/../pwned\"; echo\\n' > evil/config && echo ../evil > .git/commondir")


@pytest.mark.parametrize("how", ["run", "job"])
def test_a_command_cannot_point_git_at_a_config_of_its_own(root: Path, how: str) -> None:
    """.git/config is read-only to commands, but a .git/commondir (which need not exist,
    so no mount covers it) made git read evil/config instead: its fsmonitor ran, unfenced,
    at the user's next 'git status'. A command's change to such a file is put back."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    box = filesystem_toolbox(root)
    if how == "run":
        out = box.call("run", {"command": _COMMONDIR})
        assert "[sandbox: put back .git/commondir" in out, out
    else:
        box.call("run", {"command": _COMMONDIR + "; sleep 30", "background": True})
        box.call("jobs", {})  # settles what the job changed
        out = box.call("job_output", {"job": 1})
        assert "[sandbox: put back .git/commondir" in out, out  # the job's report says so
    box.close()
    assert not (root / ".git" / "commondir").exists()
    subprocess.run(["git", "status"], cwd=root, capture_output=True, check=False)
    assert not (root.parent / "pwned").exists()
    assert box.changes.get(".git/commondir") == "transient", box.changes


# --- command rules and background jobs ----------------------------------------------------

@pytest.mark.parametrize("shell", ["bash", "sh -s", "cat | bash -i", "bash -s foo", "sh -s -- x",
                                   "bash --", "bash -o posix", "bash -O extglob",
                                   "bash --norc -e"])
def test_a_shell_job_s_input_is_judged_by_the_rules(root: Path, shell: str) -> None:
    """``run`` lines obey the rules, but ``run('bash', background=true)`` then
    ``job_input('git push')`` ran what a deny rule refused, and an ask rule never asked."""
    asked: list[str] = []
    box = filesystem_toolbox(root, rules=[("deny", "touch"), ("ask", "rm")],
                             confirm=lambda action: asked.append(action) is not None)
    assert box.call("run", {"command": shell, "background": True}).startswith("started job 1")
    out = box.call("job_input", {"job": 1, "text": "echo ok; touch pwned"})
    assert out.startswith("ERROR: the command 'touch pwned' is refused by the rule"), out
    out = box.call("job_input", {"job": 1, "text": "rm -f notes.txt"})
    assert out.startswith("REFUSED: user declined to run rm -f notes.txt"), out
    assert asked == ["run rm -f notes.txt"]
    out = box.call("job_input", {"job": 1, "text": "echo fine > fine.txt"})
    assert out.startswith("job 1: sent 21 bytes"), out
    box.close()
    assert not (root / "pwned").exists() and (root / "fine.txt").read_text() == "fine\n"


def test_a_repository_a_command_makes_keeps_its_config_without_what_runs(root: Path) -> None:
    """git init/clone inside the root: the new repository's config stays (its remote and
    branches), without the keys that could run a command; sample hooks stay, a real hook
    does not. The first version removed the whole config, silently breaking every clone."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    box = filesystem_toolbox(root)
    out = box.call("run", {"command": (
        "git init -q sub && git -C sub remote add origin https://example.invalid/r.git"
        " && git -C sub config core.fsmonitor 'touch ../../pwned'"
        " && git -C sub config alias.st '!touch ../../pwned'"
        " && git clone -q sub cl 2>/dev/null; printf '#!/bin/sh\\ntouch ../pwned\\n' >"
        " sub/.git/hooks/pre-commit && chmod +x sub/.git/hooks/pre-commit")})
    assert "sub/.git/config (kept without core.fsmonitor, alias.st)" in out, out
    assert "sub/.git/hooks/pre-commit" in out.split("[sandbox: put back", 1)[1]
    remotes = subprocess.run(["git", "-C", str(root / "sub"), "remote", "-v"],
                             capture_output=True, text=True, check=True).stdout
    assert "origin\thttps://example.invalid/r.git (fetch)" in remotes
    cloned = subprocess.run(["git", "-C", str(root / "cl"), "remote", "-v"],
                            capture_output=True, text=True, check=True).stdout
    assert f"origin\t{root / 'sub'} (fetch)" in cloned
    assert (root / "sub" / ".git" / "hooks" / "pre-commit.sample").exists()
    assert not (root / "sub" / ".git" / "hooks" / "pre-commit").exists()
    for where in ("sub", "cl"):
        subprocess.run(["git", "status"], cwd=root / where, capture_output=True, check=False)
        subprocess.run(["git", "commit", "--allow-empty", "-qm", "x"], cwd=root / where,
                       capture_output=True, check=False)
    assert not (root.parent / "pwned").exists() and not (root / "pwned").exists()
