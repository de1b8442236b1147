"""The Landlock fence around run and run_python, with real processes and a real kernel."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from yggdrasil.loki.errors import PathError
from yggdrasil.loki.sandbox import isolation_status
from yggdrasil.loki.settings import OutputsSettings, Settings
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox, sandbox_status

STATUS = sandbox_status()
ISOLATED = isolation_status().namespaces
landlock = pytest.mark.skipif(not STATUS.available, reason=f"no Landlock here: {STATUS}")
SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture
def far() -> Iterator[Path]:
    """A folder outside the root and outside /tmp (a command's /tmp is private and empty):
    what a command may read but not write."""
    folder = Path(tempfile.mkdtemp(prefix="loki-test-", dir="/var/tmp"))
    (folder / "secret.txt").write_text("TOP SECRET\n")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@landlock
def test_writes_outside_the_root_are_refused(root: Path, box: Toolbox, far: Path) -> None:
    outside = far
    out = box.call("run", {"command": f"echo inside > in.txt && cat in.txt; "
                                      f"echo x > {far}/new.txt; "
                                      f"echo y >> {far}/secret.txt; "
                                      f"rm {far}/secret.txt; mkdir {far}/d"})
    assert "stdout:\ninside\n" in out
    stderr = out.split("\nstderr:\n", 1)[1].split("changed:\n")[0]
    assert stderr.count("Permission denied") == 4, out
    assert out.endswith("changed:\ncreated in.txt\n[sandbox: commands may write only inside "
                        "the root and $TMPDIR; a write elsewhere fails with 'Permission denied'. "
                        "Work inside the root, or ask the user to add a writable folder]\n")
    assert (root / "in.txt").read_text() == "inside\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


@landlock
def test_run_python_is_fenced_and_reads_still_work(root: Path, box: Toolbox, far: Path) -> None:
    code = textwrap.dedent(f"""
        import pathlib
        print(pathlib.Path('{far}/secret.txt').read_text().strip())
        pathlib.Path('mine.txt').write_text('ok')
        try:
            pathlib.Path('{far}/x.txt').write_text('no')
        except PermissionError as exc:
            print('refused:', exc.strerror)
    """)
    out = box.call("run_python", {"code": code})
    assert out.startswith("exit=0\nstdout:\nTOP SECRET\nrefused: Permission denied\n")
    assert (root / "mine.txt").read_text() == "ok"
    assert not (far / "x.txt").exists()


@landlock
def test_hidden_paths_cannot_be_read(root: Path, far: Path) -> None:
    (far / "public.txt").write_text("fine\n")
    (far / "root-secrets").mkdir()
    (far / "root-secrets" / "key.txt").write_text("PREFIX SECRET\n")
    box = filesystem_toolbox(root, hidden=[far / "secret.txt", far / "root-secrets"])
    out = box.call("run", {"command": f"cat {far}/public.txt; cat {far}/secret.txt; "
                                      f"cat {far}/root-secrets/key.txt; ls {far}/root-secrets; "
                                      "echo in > mine.txt && cat mine.txt"})
    assert "stdout:\nfine\nkey.txt\nin\n" in out  # names stay listable, contents do not
    assert "SECRET" not in out and out.count("Permission denied") == 2, out
    assert "they cannot read" in box.status and "root-secrets" in box.status


@landlock
def test_credential_stores_are_hidden_by_default(root: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (home / ".bashrc").write_text("# rc with an exported token")
    (home / ".profile").write_text("# profile")
    monkeypatch.setenv("HOME", str(home))
    out = filesystem_toolbox(root).call(
        "run", {"command": "cat ~/.profile; cat ~/.bashrc; cat ~/.ssh/id_ed25519"})
    assert "# profile" in out and "PRIVATE KEY" not in out and "token" not in out
    assert out.split("\nstderr:\n")[1].count(": Permission denied") == 2, out
    out = filesystem_toolbox(root, hidden=()).call("run", {"command": "cat ~/.ssh/id_ed25519"})
    assert "PRIVATE KEY" in out


@landlock
def test_no_device_nodes_even_inside_the_root(root: Path, box: Toolbox) -> None:
    out = box.call("run", {"command": "mknod null-copy c 1 3 || mkfifo fifo && echo made"})
    assert "mknod: null-copy: Permission denied" in out or "Operation not permitted" in out
    assert not (root / "null-copy").exists() and "made" in out  # FIFOs are fine


@landlock
def test_devices_and_scratch_stay_writable(box: Toolbox) -> None:
    out = box.call("run", {"command": "echo a > /dev/null && echo b >/dev/zero && "
                                      "echo t > $TMPDIR/t && cat $TMPDIR/t && "
                                      "python3 -c 'import multiprocessing as m; m.Lock()' && "
                                      "cat <(echo sub) && echo e > /dev/stderr && "
                                      "head -c1 /dev/urandom | wc -c && echo ok"})
    assert out == "exit=0\nstdout:\nt\nsub\n1\nok\n\nstderr:\ne\n"


@landlock
def test_extra_writable_folders(root: Path, far: Path) -> None:
    box = filesystem_toolbox(root, writable=[far, root.parent / "outside"])
    out = box.call("run", {"command": f"echo more > {far}/more.txt && "
                                      "echo also > ../outside/also.txt && echo no > ../x.txt"})
    assert (far / "more.txt").read_text() == "more\n"
    assert (root.parent / "outside" / "also.txt").read_text() == "also\n"  # bound back
    assert "x.txt: Permission denied" in out and not (root.parent / "x.txt").exists()
    assert str(far) in box.status


def test_writable_folders_must_exist(root: Path) -> None:
    with pytest.raises(PathError, match="does not exist"):
        filesystem_toolbox(root, writable=[root / "nope"])
    with pytest.raises(ValueError, match="sandbox must be one of"):
        filesystem_toolbox(root, sandbox="strict")  # type: ignore[arg-type]


@landlock
def test_the_root_cannot_swap_in_its_own_launcher(root: Path, box: Toolbox, far: Path) -> None:
    """run_python puts root/src on PYTHONPATH; a yggdrasil package there must not unfence it."""
    fake = root / "src" / "yggdrasil" / "loki" / "sandbox"
    fake.mkdir(parents=True)
    (root / "src" / "yggdrasil" / "__init__.py").write_text("")
    (fake.parent / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "_landlock.py").write_text(  # an impostor: runs the command without any fence
        "import os, sys\nargv = sys.argv[sys.argv.index('--') + 1 :]\nos.execvp(argv[0], argv)\n")
    out = box.call("run_python", {"code": f"open('{far}/pwned', 'w')"})
    assert "PermissionError" in out and not (far / "pwned").exists()


@landlock
def test_commands_cannot_signal_the_agent(box: Toolbox) -> None:
    if STATUS.abi < 6:
        pytest.skip("signal scoping needs Landlock ABI 6")
    out = box.call("run", {"command": f"kill -0 {os.getpid()} && echo reached"})
    # In a PID namespace of its own the agent is not even there to be named.
    assert "reached" not in out
    assert ("No such process" if ISOLATED else "Operation not permitted") in out


@landlock
def test_commands_cannot_kill_their_reaper(root: Path, box: Toolbox) -> None:
    """The launcher stays outside the fence, so a killed reaper cannot free an escapee."""
    if STATUS.abi < 6:
        pytest.skip("signal scoping needs Landlock ABI 6")
    out = box.call("run", {"command": "kill -9 $PPID; echo $? > status; sleep 0.2; echo on"})
    assert out.startswith("exit=0\nstdout:\non\n") and "Operation not permitted" in out
    assert (root / "status").read_text() == "1\n"


@pytest.fixture
def tcp_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        yield srv.getsockname()[1]


@landlock
def test_network_can_be_blocked(root: Path, tcp_port: int) -> None:
    if not STATUS.network_control:
        pytest.skip("TCP rules need Landlock ABI 4")
    connect = f"import socket; socket.create_connection(('127.0.0.1', {tcp_port})); print('connected')"
    bind = "import socket; socket.create_server(('127.0.0.1', 0)); print('bound')"
    open_box = filesystem_toolbox(root)
    assert "connected" in open_box.call("run_python", {"code": connect})
    closed = filesystem_toolbox(root, network=False)
    assert "TCP connect/bind blocked" in closed.status
    for code in (connect, bind):
        out = closed.call("run_python", {"code": code})
        assert out.startswith("exit=1") and "PermissionError: [Errno 13]" in out
        assert "and may not open TCP connections" in out


@landlock
def test_status_says_how_commands_are_fenced(root: Path, box: Toolbox) -> None:
    assert box.status.startswith(f"Commands (run, run_python) are sandboxed by Landlock "
                                 f"(ABI {STATUS.abi})")
    assert box.spec().endswith(box.status)
    out = box.call("run", {"command": "echo $LOKI_SANDBOX"})
    assert out.splitlines()[2] == f"landlock-abi-{STATUS.abi}"
    assert "Landlock ABI" in subprocess.run(
        [sys.executable, "-m", "yggdrasil.loki.sandbox"], env={"PYTHONPATH": SRC},
        capture_output=True, text=True, check=True).stdout


def test_sandbox_off_runs_unfenced(root: Path) -> None:
    box = filesystem_toolbox(root, sandbox="off")
    out = box.call("run", {"command": "echo free > ../outside/free.txt; echo $LOKI_SANDBOX"})
    assert out.startswith("exit=0\nstdout:\nnone\n")
    assert (root.parent / "outside" / "free.txt").read_text() == "free\n"
    assert 'NOT sandboxed (sandbox="off")' in box.status


def test_read_only_toolbox_has_no_command_status(root: Path) -> None:
    assert "Commands" not in filesystem_toolbox(root, read_only=True).status
    status = filesystem_toolbox(root, read_only=True, protect=()).status
    # nothing but what diagnostics(paths) reports, where ruff is installed (no edits to follow)
    assert status in ("", "diagnostics(paths) lists what ruff (Python) reports.")


# -- a kernel without Landlock: a child whose seccomp filter answers ENOSYS ----------------

_NO_LANDLOCK = r"""
import ctypes, json, os, platform, struct, sys
arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[platform.machine()]
ENOSYS_RET, ALLOW = 0x00050000 | 38, 0x7FFF0000
insns = [(0x20, 0, 0, 4), (0x15, 0, 3, arch), (0x20, 0, 0, 0), (0x15, 0, 1, 444),
         (0x06, 0, 0, ENOSYS_RET), (0x06, 0, 0, ALLOW)]
code = b"".join(struct.pack("HBBI", *i) for i in insns)
buf = ctypes.create_string_buffer(code, len(code))
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Prog(len(insns), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
assert libc.prctl(22, 2, ctypes.byref(prog)) == 0, os.strerror(ctypes.get_errno())

from yggdrasil.loki.tools import filesystem_toolbox, sandbox_status
root, far = sys.argv[1], sys.argv[2]
auto = filesystem_toolbox(root)
required = filesystem_toolbox(root, sandbox="require")
print(json.dumps({
    "status": str(sandbox_status()),
    "auto_status": auto.status,
    "auto_run": auto.call("run", {"command": f"echo out > {far}/auto.txt; echo ran"}),
    "require_status": required.status,
    "require_run": required.call("run", {"command": "echo should-not-run"}),
    "require_py": required.call("run_python", {"code": "print(1)"}),
}))
"""


def test_without_landlock_commands_say_so_and_require_refuses(root: Path, far: Path) -> None:
    import platform

    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the seccomp stand-in for an old kernel is written for x86_64/aarch64")
    done = subprocess.run([sys.executable, "-c", _NO_LANDLOCK, str(root), str(far)],
                          capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert "does not implement Landlock" in seen["status"]
    assert seen["auto_status"].startswith("Commands (run, run_python) are NOT sandboxed")
    assert seen["auto_run"].startswith("exit=0\nstdout:\nran\n")
    assert (far / "auto.txt").exists()  # auto ran it, unfenced
    assert seen["require_status"].startswith("Commands (run, run_python) are refused")
    for key in ("require_run", "require_py"):
        assert seen[key].startswith('ERROR: sandbox="require" but Landlock unavailable')
        assert "should-not-run" not in seen[key]


# -- the agent's process, environment and terminal stay out of reach --------------------

_PROBE_AGENT = """
import ctypes, os
agent = {pid}
print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])
try:
    open(f'/proc/{{agent}}/environ', 'rb').read()
    print('environ readable')
except OSError as exc:
    print('environ:', exc.strerror)
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(0x4206, agent, 0, 0) == 0:  # PTRACE_SEIZE: attaches without stopping it
    print('ptrace attached')
    libc.ptrace(17, agent, 0, 0)  # PTRACE_DETACH
else:
    print('ptrace:', os.strerror(ctypes.get_errno()))
"""


@landlock
def test_commands_have_no_capabilities_and_cannot_reach_the_agent(box: Toolbox) -> None:
    out = box.call("run_python", {"code": _PROBE_AGENT.format(pid=os.getpid())})
    if ISOLATED:  # in a PID namespace of its own, the agent's pid names nothing
        assert out.startswith("exit=0\nstdout:\n0000000000000000\nenviron: No such file or "
                              "directory\nptrace: No such process\n"), out
    else:
        assert out.startswith("exit=0\nstdout:\n0000000000000000\nenviron: Permission denied\n"
                              "ptrace: Operation not permitted\n"), out


def _tiny_wheel(folder: Path) -> Path:
    """A pure-Python wheel, built by hand so that installing it needs no build backend."""
    import zipfile

    wheel = folder / "tiny-1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("tiny.py", "X = 1\n")
        zf.writestr("tiny-1.dist-info/METADATA", "Metadata-Version: 2.1\nName: tiny\nVersion: 1\n")
        zf.writestr("tiny-1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\n"
                    "Root-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr("tiny-1.dist-info/RECORD", "")
    return wheel


@landlock
def test_a_capless_root_command_still_does_ordinary_work(root: Path, box: Toolbox) -> None:
    wheel = _tiny_wheel(root)
    out = box.call("run", {"command": (
        "git init -q repo && cd repo && echo a > a && git add a && "
        "git -c user.name=t -c user.email=t@t commit -qm one && git log --oneline | wc -l && "
        f"cd .. && python3 -m pip install -q --no-index --target deps {wheel.name} && "
        "PYTHONPATH=deps python3 -c 'import tiny; print(tiny.X)'"), "timeout": 120})
    assert out.startswith("exit=0\nstdout:\n1\n1\n"), out


_SECRET_AGENT = r"""
import json, os, sys
from yggdrasil.loki.tools import filesystem_toolbox
root, mode = sys.argv[1], sys.argv[2]
box = filesystem_toolbox(root, sandbox=mode)
print(json.dumps({"status": box.status, "run": box.call(
    "run", {"command": f"agent={os.getpid()}; "
                       "tr '\\0' '\\n' </proc/$agent/environ | grep MY_API_TOKEN; "
                       "echo env=${MY_API_TOKEN:-withheld}"})}))
"""


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_the_agent_environment_under_proc(root: Path, mode: str) -> None:
    if mode == "auto" and not STATUS.available:
        pytest.skip(f"no Landlock here: {STATUS}")
    env = {**os.environ, "PYTHONPATH": SRC, "MY_API_TOKEN": "tok-123-secret"}
    done = subprocess.run([sys.executable, "-c", _SECRET_AGENT, str(root), mode],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert "env=withheld" in seen["run"]
    if mode == "off":  # unfenced: the agent's environment is there to read, and status says so
        assert "MY_API_TOKEN=tok-123-secret" in seen["run"]
        assert "can read the agent's environment" in seen["status"]
    else:
        refused = "No such file or directory" if ISOLATED else "Permission denied"
        assert "tok-123-secret" not in seen["run"] and refused in seen["run"]
        assert "can read the agent's environment" not in seen["status"]



@landlock
def test_commands_cannot_reach_the_users_terminal(box: Toolbox) -> None:
    master, slave = os.openpty()
    try:
        path = os.ttyname(slave)
        os.set_blocking(master, False)
        code = textwrap.dedent(f"""
            import os
            for dev in ({path!r}, '/dev/tty', '/dev/ptmx'):
                for flags in (os.O_WRONLY, os.O_RDONLY | os.O_NONBLOCK):
                    try:
                        os.close(os.open(dev, flags | os.O_NOCTTY))
                        print(dev, 'opened')
                    except OSError as exc:
                        print(dev, exc.strerror)
            """)
        out = box.call("run_python", {"code": code})
        assert out.count("Permission denied") == 6 and "opened" not in out, out
        out = box.call("run", {"command": f"printf 'pwned' > {path}"})
        assert "Permission denied" in out
        with pytest.raises(BlockingIOError):
            os.read(master, 100)  # nothing reached the terminal
    finally:
        os.close(master)
        os.close(slave)


@landlock
def test_status_says_when_a_hidden_path_is_not_hidden(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (home / ".aws").mkdir()
    (tmp_path / "keys").mkdir()
    monkeypatch.setenv("HOME", str(home))
    # (without checkpoints and kept outputs: their folders, hidden too, would be listed as
    # unreadable)
    box = filesystem_toolbox(home, hidden=["~/.ssh", "~/.aws", tmp_path / "keys"],
                             writable=[tmp_path / "keys"], protect=(), checkpoints=False,
                             settings=Settings(outputs=OutputsSettings(keep_whole=False)))
    status = box.status
    assert "~/.ssh is inside the root: NOT hidden" in status
    assert "~/.aws is inside the root: NOT hidden" in status
    assert f"{tmp_path / 'keys'} is inside writable folder {tmp_path / 'keys'}: NOT hidden" in status
    assert "cannot read" not in status and "/dev/shm" in status
    assert "PRIVATE KEY" in box.call("run", {"command": "cat .ssh/id_ed25519"})  # it says true
    # Protected by default (.ssh/ and .aws/ are in DEFAULT_PROTECTED): masked after all.
    box = filesystem_toolbox(home, hidden=["~/.ssh", "~/.aws", tmp_path / "keys"],
                             writable=[tmp_path / "keys"])  # protection named root paths only
    assert "~/.ssh is inside the root but protected (masked)" in box.status
    assert f"{tmp_path / 'keys'} is inside writable folder {tmp_path / 'keys'}: NOT hidden" \
        in box.status
    out = box.call("run", {"command": "cat .ssh/id_ed25519"})
    assert "PRIVATE KEY" not in out and "Permission denied" in out


@landlock
@pytest.mark.skipif(not ISOLATED, reason="no namespaces here")
def test_the_launcher_starts_light(tmp_path: Path) -> None:
    """It runs before every command: with every layer on, it imports none of the standard
    modules that cost milliseconds each (typing, contextlib, enum, importlib.util...)."""
    from yggdrasil.loki.sandbox import launcher_argv

    argv = launcher_argv(sys.executable, [str(tmp_path)], network=False,
                         abi=STATUS.abi, argv=["true"], namespaces=True, no_setid=True,
                         mounts=[("tmpfs", "/tmp"), ("bind", str(tmp_path))])
    # cwd: the launcher re-enters it after mounting, and a checkout in /tmp is under the tmpfs
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "ctypes" in imported  # the list is read
    heavy = {"typing", "contextlib", "enum", "importlib.util", "re", "collections", "signal",
             "functools", "socket", "selectors"}
    assert imported & heavy == set(), done.stderr
