"""The second red team's attacks on the command fence, as root and as an ordinary user.

Each attack lives in fence_attacks.py and runs in a child process (so that an escape
cannot touch this one), once as the user running the tests and once as uid 65534 when
the tests run as root (``setpriv``). The child prints what it saw; the assertions are here.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from readable import new_base, readable_copy
from yggdrasil.loki.sandbox import isolation_status
from yggdrasil.loki.tools import filesystem_toolbox, sandbox_status

HERE = Path(__file__).resolve().parent
SRC = str(HERE.parent / "src")
NOBODY = 65534
ISO = isolation_status()
isolated = pytest.mark.skipif(not ISO.namespaces, reason=f"no namespaces here: {ISO}")
setid_filter = pytest.mark.skipif(not ISO.setid_filter, reason=f"no setid filter: {ISO}")
landlock = pytest.mark.skipif(not sandbox_status().available, reason="no Landlock here")
USERS = ["self", "nobody"]


_CHECK = ("import os, sys, yggdrasil.loki.tools; "
          "sys.exit(not os.access(os.path.realpath(sys.executable), os.X_OK))")


def _as_nobody(argv: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


@functools.cache
def _nobody_runner() -> tuple[list[str], str, Path] | None:
    """A command prefix that runs ``python ARGS`` as uid 65534 with this interpreter and its
    packages, the PYTHONPATH it needs and the tests folder it reads; None when there is
    none. An interpreter under /root (0700, pyenv) is bound at a path uid 65534 can reach,
    in a mount namespace of the child only; the checkout, which may sit where that user
    cannot enter (a 0700 folder), is a copy that user can read (readable.py)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    base = new_base("loki-fence-checkout-")
    if base is None:
        return None
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    src, tests = (str(p) for p in readable_copy(base))
    prefixes = [([*_as_nobody([sys.executable])], src)]
    if sys.prefix == sys.base_prefix and shutil.which("unshare"):
        where = tempfile.mkdtemp(prefix="loki-python-", dir="/var/tmp")
        atexit.register(shutil.rmtree, where, ignore_errors=True)
        os.chmod(where, 0o755)
        rel = os.path.relpath(os.path.realpath(sys.executable), sys.prefix)
        script = (f'mount --bind "{sys.prefix}" "{where}" && exec '
                  f'setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups "{where}/{rel}" "$@"')
        site = os.path.relpath(sysconfig.get_paths()["purelib"], sys.prefix)
        prefixes.append((["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                          "python"], f"{src}{os.pathsep}{where}/{site}"))
    for prefix, path in prefixes:
        done = subprocess.run([*prefix, "-c", _CHECK], env={"PYTHONPATH": path,
                              "PATH": os.defpath}, capture_output=True)
        if done.returncode == 0:
            return prefix, path, Path(tests)
    return None


@pytest.fixture
def work() -> Iterator[Path]:
    """A folder outside /tmp (a command's /tmp is private), writable by either user."""
    folder = Path(tempfile.mkdtemp(prefix="loki-fence-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def attack(name: str, work: Path, user: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": SRC, "HOME": str(work / "home")}
    argv = [sys.executable, str(HERE / "fence_attacks.py"), name, str(work)]
    if user == "nobody":
        runner = _nobody_runner()
        if runner is None:
            pytest.skip("switching to an ordinary user needs root, setpriv and a Python that "
                        f"uid {NOBODY} can run with this checkout on its path")
        os.chown(work, NOBODY, NOBODY)
        argv = [*runner[0], str(runner[2] / "fence_attacks.py"), *argv[2:]]
        env["PYTHONPATH"] = runner[1]
        env = {k: v for k, v in env.items() if not k.startswith(("PYTEST", "COV"))}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout))


# -- family 2: channels the fence did not cover --------------------------------------------


@isolated
@pytest.mark.parametrize("user", USERS)
def test_the_users_sockets_are_out_of_reach(work: Path, user: str) -> None:
    if shutil.which("ssh-agent") is None:
        pytest.skip("needs ssh-agent")
    seen = attack("sockets", work, user)
    assert "Error connecting to agent" in seen["ssh"] or "Could not open" in seen["ssh"], seen
    assert "rc=2" in seen["ssh"] and seen["hits"] == 0, seen
    assert seen["probe"].count("FileNotFoundError") == len(seen["listeners"]), seen
    assert "agent." not in seen["listing"] and "s.sock" not in seen["listing"]


@isolated
@pytest.mark.skipif(os.geteuid() != 0, reason="making sockets under /run needs root")
def test_daemon_sockets_are_masked_for_commands(root: Path) -> None:
    """A docker or system D-Bus socket runs code outside the fence for whoever connects:
    a command finds it masked, while the agent itself still reaches it."""
    made: list[tuple[str, socket.socket]] = []
    try:
        for path in ("/run/docker.sock", "/run/dbus/system_bus_socket", "/run/snapd.socket"):
            if os.path.lexists(path):
                continue  # a real daemon's socket: leave it alone (it is masked all the same)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            server = socket.socket(socket.AF_UNIX)
            server.bind(path)
            server.listen()
            made.append((path, server))
        if not made:
            pytest.skip("every socket this test would make exists already")
        probe = ("import socket,sys\nfor p in sys.argv[1:]:\n    s=socket.socket(socket.AF_UNIX)\n"
                 "    try: s.connect(p); print(p, 'CONNECTED')\n"
                 "    except OSError as e: print(p, type(e).__name__)")
        (root / "probe.py").write_text(probe)
        paths = " ".join(p for p, _ in made)
        out = filesystem_toolbox(root).call("run", {"command": f"python3 probe.py {paths}"})
        assert "CONNECTED" not in out, out
        assert out.count("Error") == len(made), out
        done = subprocess.run([sys.executable, str(root / "probe.py"), *paths.split()],
                              capture_output=True, text=True, check=True)
        assert done.stdout.count("CONNECTED") == len(made)  # the socket itself works
    finally:
        for path, server in made:
            server.close()
            os.unlink(path)


@isolated
@pytest.mark.parametrize("user", USERS)
def test_tmux_cannot_open_a_window_outside_the_fence(work: Path, user: str) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    seen = attack("tmux", work, user)
    assert seen["ours"] and not seen["pwned"] and "rc=1" in seen["out"], seen


@isolated
@pytest.mark.parametrize("user", USERS)
def test_nothing_outlives_a_command_however_deep_it_forks(work: Path, user: str) -> None:
    seen = attack("escape", work, user)
    assert seen["out"].startswith("exit=0") and "spawned" in seen["out"], seen
    assert "locked" in seen["out"], seen  # the tree held tree.lock, and
    assert seen["lock_freed_after"] is not None, seen  # every process of it is gone
    assert seen["settings"] == "DEBUG = False\n", seen
    # Its own PID namespace: a command sees its init, its shell, ls and wc, not the host.
    assert seen["processes_seen"] <= 5, seen


@isolated
@pytest.mark.parametrize("user", USERS)
def test_no_network_means_none_at_all(work: Path, user: str) -> None:
    seen = attack("network", work, user)
    out = seen["out"]
    assert not seen["tcp_accepted"] and seen["udp_received"] == "", seen
    if seen["mptcp_here"]:
        assert "mptcp connected" not in out, out
    assert "loopback inside" in out and "network namespace of their own" in seen["status"]


@setid_filter
@pytest.mark.parametrize("user", USERS)
def test_no_setuid_or_setgid_bits(work: Path, user: str) -> None:
    seen = attack("setid", work, user)
    bad = {name: oct(mode) for name, mode in seen["modes"].items() if mode & 0o6000}
    assert bad == {}, seen["out"]
    assert "py-suid Operation not permitted" in seen["out"]
    assert "setuid/setgid bits cannot be set" in seen["status"]
    if ISO.namespaces:  # /dev/shm was the command's own
        assert not seen["host_shm"]


# -- family 3: what a command writes that runs later ---------------------------------------


@isolated
@pytest.mark.parametrize("user", USERS)
def test_git_config_and_hooks_are_read_only_unless_opened(work: Path, user: str) -> None:
    if shutil.which("git") is None:
        pytest.skip("needs git")
    seen = attack("git", work, user)
    closed, opened = seen["False"], seen["True"]
    assert closed["config_same"] and not closed["hook"] and closed["git_there"], closed
    for verb in ("config", "append", "hook", "move"):
        assert f"{verb}=0" not in closed["out"], closed["out"]
    assert "created sub/.git" in closed["out"]  # a gitdir pointer is reported
    assert "read-only (git_writable=False)" in closed["status"]
    # Opened on purpose: the writes land, and are reported and undone.
    assert not opened["config_same"] and opened["hook"]
    assert "read-only" not in opened["status"]
    revert = seen["revert"]
    assert ".git/config" in revert["changed"] and ".git/hooks/pre-commit" in revert["changed"]
    assert revert["config_restored"] and revert["hook_gone"], revert


@landlock
@pytest.mark.parametrize("user", USERS)
def test_startup_files_and_bytecode_are_reported_and_reverted(work: Path, user: str) -> None:
    seen = attack("startup", work, user)
    for rel in (".venv/lib/python3.11/site-packages/evil.pth",
                ".venv/lib/python3.11/site-packages/sitecustomize.py"):
        assert rel in seen["changed"], seen
    assert any(p.startswith("__pycache__/mod.") for p in seen["changed"]), seen
    # Commands keep their own bytecode elsewhere, so the planted one never ran in them.
    assert "X 1" in seen["imported"] and not seen["pwned"], seen
    assert seen["pth_gone"] and seen["sitecustomize"] == "# the user's own\n", seen
    assert seen["pycache_left"] == [], seen


@pytest.mark.parametrize("user", USERS)
def test_same_size_rewrites_with_old_mtimes_are_seen(work: Path, user: str) -> None:
    seen = attack("ctime", work, user)
    assert seen["one"].endswith("changed:\nmodified a.txt\n"), seen
    assert seen["two"].endswith("changed:\nmodified b.txt\n"), seen


@pytest.mark.parametrize("user", USERS)
def test_revert_never_removes_a_file_the_user_made(work: Path, user: str) -> None:
    seen = attack("revert_identity", work, user)
    assert seen["out"] == "the user's\n" and seen["mine"] == "edited by the user\n", seen
    assert "not reverted out.txt: the run created and then deleted it" in seen["report"]
    assert "not reverted mine.txt: created by the run, but changed" in seen["report"]
    assert not seen["plain"] and "removed plain.txt" in seen["report"]


# -- the smaller ones --------------------------------------------------------------------------


@landlock
@pytest.mark.parametrize("user", USERS)
def test_more_secrets_are_withheld_and_hidden(work: Path, user: str) -> None:
    seen = attack("env_and_home", work, user)
    out = seen["out"]
    assert "hunter2" not in out, out
    assert out.count("Permission denied") >= 11 and ".vault-token" in out  # names listable


# -- in this process: the working folder, imports, recording -------------------------------


@isolated
def test_the_host_tmp_is_not_reachable_from_the_working_folder(root: Path) -> None:
    """The command starts in the root; under a private /tmp, `..` must not lead back into
    the host's /tmp (where the root's siblings and the user's sockets are)."""
    sock = root.parent / "outside" / "agent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock))
    server.listen(1)
    try:
        box = filesystem_toolbox(root)
        out = box.call("run_python", {"code": (
            "import os, socket\nprint(sorted(os.listdir('..')))\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n    s.connect('../outside/agent.sock'); print('connected')\n"
            "except OSError as exc:\n    print(type(exc).__name__)\n")})
    finally:
        server.close()
    assert out.startswith("exit=0\nstdout:\n['root']\nFileNotFoundError\n"), out


def _plant(folder: Path, *names: str) -> None:
    for name in ("polars", "yaml", "python_calamine", *names):
        (folder / f"{name}.py").write_text(f"open({name!r} + '.ran', 'w').close()\n")
    (folder / "a.csv").write_text("a,b\n1,2\n")
    (folder / "c.yaml").write_text("k: 1\n")


def test_python_m_from_the_root_imports_nothing_planted_there(root: Path) -> None:
    _plant(root, "__future__", "subprocess")  # what yggdrasil.loki itself imports first
    env = {**os.environ, "PYTHONPATH": SRC}
    for args in (["read_table", "path=a.csv"], ["edit_file", "path=c.yaml", "old=k: 1",
                                                 "new=k: 2"]):
        done = subprocess.run([sys.executable, "-m", "yggdrasil.loki", "call", *args],
                              cwd=root, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in root.glob("*.ran")) == []
    assert (root / "c.yaml").read_text() == "k: 2\n"


_IN_PROCESS = """
import sys
from yggdrasil.loki.tools import filesystem_toolbox
assert sys.path[0] == ''  # `python -c` from the root: the root is on the path
box = filesystem_toolbox('.')
print(box.call('edit_file', {'path': 'c.yaml', 'old': 'k: 1', 'new': 'k: 2'}))
print(box.call('read_table', {'path': 'a.csv'}).splitlines()[0])
try:
    import python_calamine
except ImportError as exc:
    print('refused:', exc)
import mine
print('own module:', mine.X)
"""


def test_the_toolbox_never_imports_a_planted_module(root: Path) -> None:
    """A program started from the root with the root on sys.path builds a toolbox: from
    then on the tools take their modules from the installed packages."""
    _plant(root)
    (root / "mine.py").write_text("X = 'mine'\n")  # the user's own module still imports
    done = subprocess.run([sys.executable, "-c", _IN_PROCESS], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("edited c.yaml (1 replacement)\n--- c.yaml\n")  # then the diff
    assert "\n+k: 2\na.csv  shape=(1, 2)" in done.stdout
    assert "refused: refusing to import 'python_calamine' from the agent root" in done.stdout
    assert "own module: mine" in done.stdout
    assert sorted(p.name for p in root.glob("*.ran")) == []


class _Path(str):
    """A path that counts how often it is compared (searching a list compares each item)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        type(self).compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_recording_a_change_does_not_search_the_list(root: Path) -> None:
    box = filesystem_toolbox(root)
    paths = [_Path(f"f{i}") for i in range(3000)]
    for path in paths:
        box.record(path)
    for path in paths:
        box.record(_Path(str(path)))  # a second touch is not a second entry
    assert len(box.changed) == 3000 and _Path.compared < 3 * 3000, _Path.compared
    box.changed[0] = "edited"  # someone edits the documented list: recording follows it
    box.record("edited")
    box.record("f0")
    assert box.changed[0] == "edited" and box.changed[-1] == "f0" and len(box.changed) == 3001
    box.changed = []
    box.record("x")
    box.record("x")
    assert box.changed == ["x"]


def test_commands_keep_their_bytecode_out_of_the_root(root: Path) -> None:
    (root / "mod.py").write_text("X = 1\n")
    box = filesystem_toolbox(root)
    out = box.call("run_python", {"code": "import mod, sys; print(mod.X, bool(sys.pycache_prefix))"})
    assert out == "exit=0\nstdout:\n1 True\n\nstderr:\n", out
    assert not (root / "__pycache__").exists()


def test_commands_python_reads_the_installed_bytecode_of_its_start_up_modules(
        root: Path) -> None:
    """The bytecode cache outside the root hides the installed modules' bytecode: without
    links to it, every Python a command starts compiles its start-up modules again."""
    box = filesystem_toolbox(root)
    out = box.call("run", {"command": f"{sys.executable} -v -c pass 2>&1 | "
                                      "grep -c \"code object from '.*encodings/__init__\""})
    assert out.startswith("exit=0\nstdout:\n1\n"), out
    assert not (root / "__pycache__").exists()


# -- where namespaces are missing: say so, and require refuses -----------------------------

_NO_NAMESPACES = r"""
import ctypes, json, os, platform, struct, sys
arch, unshare = {"x86_64": (0xC000003E, 272), "aarch64": (0xC00000B7, 97)}[platform.machine()]
EPERM_RET, ALLOW = 0x00050000 | 1, 0x7FFF0000
insns = [(0x20, 0, 0, 4), (0x15, 0, 3, arch), (0x20, 0, 0, 0), (0x15, 0, 1, unshare),
         (0x06, 0, 0, EPERM_RET), (0x06, 0, 0, ALLOW)]
code = b"".join(struct.pack("HBBI", *i) for i in insns)
buf = ctypes.create_string_buffer(code, len(code))
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Prog(len(insns), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(prog)) == 0, os.strerror(ctypes.get_errno())

from yggdrasil.loki.tools import filesystem_toolbox
root = sys.argv[1]
auto = filesystem_toolbox(root)
required = filesystem_toolbox(root, sandbox="require")
print(json.dumps({
    "auto_status": auto.status,
    "auto_run": auto.call("run", {"command": "ls /tmp | grep -c . ; echo $LOKI_SANDBOX"}),
    "require_status": required.status,
    "require_run": required.call("run", {"command": "echo should-not-run"}),
}))
"""


@landlock
def test_without_namespaces_status_says_so_and_require_refuses(root: Path) -> None:
    import platform

    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the seccomp stand-in for a kernel without user namespaces is per-arch")
    done = subprocess.run([sys.executable, "-c", _NO_NAMESPACES, str(root)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert "NOT isolated (unshare: Operation not permitted)" in seen["auto_status"], seen
    assert "/tmp, /dev/shm and /run/user are shared" in seen["auto_status"]
    assert seen["auto_run"].startswith("exit=0\nstdout:\n") and "landlock-abi-" in seen["auto_run"]
    assert seen["require_status"].startswith("Commands (run, run_python) are refused")
    assert seen["require_run"].startswith('ERROR: sandbox="require" but namespaces unavailable')
    assert "should-not-run" not in seen["require_run"]


@isolated
def test_the_isolation_probe_works_from_a_folder_under_tmp(tmp_path: Path) -> None:
    """A checkout or venv in /tmp: the probe's private /tmp must not hide its working folder."""
    probe = "from yggdrasil.loki.sandbox import isolation_status; print(isolation_status())"
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=60)
    assert str(tmp_path).startswith("/tmp/") and done.returncode == 0, done.stderr
    assert done.stdout.startswith("namespaces available"), done.stdout


@isolated
def test_commands_run_when_the_agents_pythonpath_holds_the_system_tmp(tmp_path: Path) -> None:
    """PYTHONPATH=/tmp (or sys.path, as under `python -m pytest` from /tmp, which a fleet
    hands its workers) named the private tmpfs itself: it was bound back read-only, whole,
    and every command failed with exit=126 "Read-only file system". The tmpfs stays private."""
    root = tmp_path / "root"
    root.mkdir()
    system_tmp = tempfile.gettempdir()
    (Path(system_tmp) / f"loki-visible-{os.getpid()}").touch()
    code = ("import sys; from yggdrasil.loki.tools import filesystem_toolbox; "
            "print(filesystem_toolbox(sys.argv[1]).call('run', {'command': "
            "'echo hi; touch $TMPDIR/x && echo wrote; ls /tmp'}))")
    try:
        done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True,
                              text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": f"{system_tmp}:{SRC}"})
    finally:
        (Path(system_tmp) / f"loki-visible-{os.getpid()}").unlink()
    assert done.stdout.startswith("exit=0\nstdout:\nhi\nwrote\n"), done.stdout + done.stderr
    assert f"loki-visible-{os.getpid()}" not in done.stdout  # the host's /tmp stays hidden
