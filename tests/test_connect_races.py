"""A fenced command cannot race the UNIX-socket connect check (issue 32, item 1).

The supervisor stops every connect of a fenced command. If it checked the socket and
the address and then let the kernel carry on, the kernel would read both again: a
thread that dup2()s an AF_UNIX socket over the AF_INET one checked, or flips the
address's first byte between NUL (an abstract name) and '/' (a path), would reach a
socket outside the root. Here real race programs (C, built with cc; else Python threads
calling libc through ctypes) try thousands of times against a listening socket outside
any root, and the listener counts what reaches it: nothing may. Connects that are
allowed still work, blocking and non-blocking, with the kernel's own answers.
"""

from __future__ import annotations

import errno
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from yggdrasil.loki.sandbox import isolation_status, landlock_status
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

pytestmark = pytest.mark.skipif(
    not (isolation_status().exec_guard and landlock_status().available),
    reason="the socket check needs seccomp user notification and a fence")

TRIES = 3000
RACE_C = Path(__file__).parent / "data" / "connect_race.c"

# The same two races in Python for machines without a C compiler: libc's connect and
# dup2 through ctypes release the GIL, and the address is a ctypes buffer the racing
# thread rewrites in place.
RACE_PY = r"""
import ctypes, socket, struct, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
mode, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
address = ctypes.create_string_buffer(struct.pack("=H", socket.AF_UNIX) + path, 110)
length = 2 + len(path)
slot, stop, fds = 200, [], {}
def swap():
    while not stop:
        libc.dup2(fds["inet"], slot); libc.dup2(fds["unix"], slot)
def flip():
    while not stop:
        ctypes.memset(ctypes.addressof(address) + 2, 0, 1)
        ctypes.memset(ctypes.addressof(address) + 2, ord("/"), 1)
fds["unix"], fds["inet"] = socket.socket(socket.AF_UNIX).detach(), socket.socket().detach()
racer = threading.Thread(target=swap if mode == "dup2" else flip)
sys.setswitchinterval(1e-6)
racer.start()
reached = 0
for _ in range(n):
    fd = slot if mode == "dup2" else socket.socket(socket.AF_UNIX).detach()
    if libc.connect(fd, address, length) == 0:
        reached += 1
        if mode == "dup2":
            old, fds["unix"] = fds["unix"], socket.socket(socket.AF_UNIX).detach()
            libc.close(old)
    if mode != "dup2":
        libc.close(fd)
stop.append(1)
racer.join()
print(f"reached={reached} tries={n}")
"""


class Outside:
    """A listening UNIX socket outside any root; counts every connection it accepts."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="loki-race-"))
        self.path, self.hits = self.folder / "out.sock", 0
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(self.path))
        self.sock.listen(128)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="module")
def outside() -> Iterator[Outside]:
    made = Outside()
    yield made
    made.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("race-root")


@pytest.fixture(scope="module")
def race(root: Path) -> list[str]:
    """The race program's command line, in the root (C when cc is here, else Python)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:
        subprocess.run([cc, "-O2", "-pthread", "-o", str(root / "race"), str(RACE_C)],
                       check=True)
        return ["./race"]
    (root / "race.py").write_text(RACE_PY)
    return [sys.executable, "race.py"]


@pytest.fixture(scope="module", params=[False, True], ids=["network-off", "network-on"])
def network(request: pytest.FixtureRequest) -> bool:
    """Off: a network namespace of the command's own, Landlock refuses TCP; on: ours."""
    return bool(request.param)


@pytest.fixture(scope="module")
def box(network: bool, root: Path) -> Iterator[Toolbox]:
    with filesystem_toolbox(root, allow_shell=True, network=network) as made:
        yield made


@pytest.mark.parametrize("attack", ["dup2", "flip"])
def test_no_race_reaches_a_socket_outside(box: Toolbox, outside: Outside, race: list[str],
                                          attack: str) -> None:
    before = outside.hits
    line = " ".join([*race, attack, str(TRIES), str(outside.path)])
    out = box.call("run", {"command": line, "timeout": 300})
    assert out.startswith("exit=0") and f"reached=0 tries={TRIES}" in out, out
    assert outside.hits == before, f"{outside.hits - before} connects reached {outside.path}"


LEGIT = r"""
import errno, os, select, socket
path = os.path.join(os.getcwd(), "in.sock")
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen(1)
blocking = socket.socket(socket.AF_UNIX)
blocking.connect(path)
print("blocking", blocking.getpeername() == path)
results = []
for _ in range(4):  # the backlog full: the kernel says EAGAIN
    nb = socket.socket(socket.AF_UNIX)
    nb.setblocking(False)
    results.append(nb.connect_ex(path))
print("nonblocking", results[0], errno.EAGAIN in results)
os.unlink(path)
abstract = socket.socket(socket.AF_UNIX)
abstract.bind(b"\0loki-own-" + str(os.getpid()).encode())
abstract.listen(1)
mine = socket.socket(socket.AF_UNIX)
mine.connect(abstract.getsockname())
print("abstract-own", mine.getpeername() == abstract.getsockname())
import threading
def from_a_thread():  # the supervisor is told the thread's id, not the process's
    other = socket.socket(socket.AF_UNIX)
    other.connect(abstract.getsockname())
    print("thread", other.getpeername() == abstract.getsockname())
worker = threading.Thread(target=from_a_thread)
worker.start()
worker.join()
tcp = socket.socket()
tcp.setblocking(False)
code = tcp.connect_ex(("127.0.0.1", PORT))
if code == errno.EINPROGRESS:
    select.select([], [tcp], [], 10)
    code = "inprogress-then-%d" % tcp.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
print("tcp", code)
"""


def test_allowed_connects_still_work_blocking_and_not(box: Toolbox, network: bool) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        port = listener.getsockname()[1]
        out = box.call("run_python", {"code": LEGIT.replace("PORT", str(port))})
    finally:
        listener.close()
    assert out.startswith("exit=0"), out
    assert "blocking True" in out and "nonblocking 0 True" in out, out
    assert "abstract-own True" in out and "thread True" in out, out
    if network:  # the kernel's non-blocking TCP answer, then a real connection
        assert "tcp inprogress-then-0" in out, out
    else:  # Landlock refuses TCP inside the fence: the connector carries the fence
        assert f"tcp {errno.EACCES}" in out, out  # not ECONNREFUSED: an unfenced connect


def _local_address() -> str | None:
    """An address of this machine that is not loopback (None: it has none)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET: picks the source address, sends nothing
        found = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if found.startswith("127.") else found


WAITING = r"""
import os, platform, socket, threading, time
CONNECT = {"x86_64": "42", "aarch64": "203"}[platform.machine()]  # the syscall's number
thread = []
def far():
    thread.append(threading.get_native_id())
    socket.create_connection(("ADDRESS", PORT))  # its listener's queue is full: it waits
    print("far connected")
threading.Thread(target=far, daemon=True).start()
deadline = time.monotonic() + 30
while time.monotonic() < deadline:  # until the far thread waits inside its connect
    if thread:
        with open(f"/proc/self/task/{thread[0]}/syscall") as state:
            if state.read().split()[0] == CONNECT:
                break
    time.sleep(0.01)
else:
    raise SystemExit("the far connect never started")
server = socket.socket(socket.AF_UNIX)
server.bind("wait.sock")
server.listen(1)
mine = socket.socket(socket.AF_UNIX)
mine.connect("wait.sock")
os.unlink("wait.sock")
print("unix connected while the far one waits:", threading.active_count() == 2, flush=True)
os._exit(0)
"""


def test_a_blocking_connect_that_waits_holds_up_no_other(root: Path) -> None:
    """A blocking TCP connect to another host is made by the connector: the command's
    other calls are answered meanwhile (made by the supervisor, it would hold them up)."""
    address = _local_address()
    if address is None:
        pytest.skip("no address but loopback here")
    far = socket.create_server((address, 0), backlog=0)
    fill = []
    try:
        for _ in range(3):  # fill the accept queue: the kernel then drops new SYNs
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(far.getsockname())
            fill.append(sock)
        code = WAITING.replace("ADDRESS", address).replace("PORT", str(far.getsockname()[1]))
        with filesystem_toolbox(root, allow_shell=True, network=True) as box:
            out = box.call("run_python", {"code": code, "timeout": 60})
        assert "unix connected while the far one waits: True" in out, out
        assert "far connected" not in out, out
    finally:
        for sock in fill:
            sock.close()
        far.close()


OTHER_NAMES = r"""
import os, socket
def attempt(how, target):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(target)
        print(how, "REACHED")
    except OSError as e:
        print(how, "refused", e.errno)
try:
    os.link("OUTSIDE", "hard.sock")  # Landlock refuses a link out of a read-only folder
    attempt("hard link", "hard.sock")
except OSError as e:
    print("hard link refused", e.errno)
attempt("fd link", "/proc/self/fd/%d" % os.open("OUTSIDE", os.O_PATH))
attempt("fd link of a thread", "/proc/thread-self/fd/%d" % os.open("OUTSIDE", os.O_PATH))
"""


def test_other_names_of_a_socket_outside_reach_nothing(box: Toolbox, outside: Outside) -> None:
    before = outside.hits
    out = box.call("run_python", {"code": OTHER_NAMES.replace("OUTSIDE", str(outside.path))})
    assert out.startswith("exit=0") and "REACHED" not in out, out
    assert out.count("refused") == 3, out
    assert outside.hits == before


SYNC_WAKE = r"""
import ctypes, sys
from yggdrasil.loki.sandbox import _seccomp, _usernotif
lib = _seccomp.load_library()
lib.seccomp_notify_fd.argtypes = (ctypes.c_void_p,)
ctx = lib.seccomp_init(_usernotif._ALLOW)
nr = lib.seccomp_syscall_resolve_name(b"getcpu")
assert lib.seccomp_rule_add_array(ctx, _usernotif._NOTIFY, nr, 0, None) == 0
assert lib.seccomp_load(ctx) == 0
listener = lib.seccomp_notify_fd(ctx)
print(_usernotif.wake_synchronously(listener), _usernotif.wake_synchronously(987))
"""


@pytest.mark.skipif(tuple(map(int, __import__("platform").release().split(".")[:2])) < (6, 6),
                    reason="SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP came with Linux 6.6")
def test_the_supervisor_is_woken_synchronously() -> None:
    """Each stopped call costs a round trip to the supervisor; the kernel's synchronous
    wake-up makes it two direct switches (bench_rules: ~90 -> ~30 us a connect). The flag
    is set on a real listener (a wrong ioctl number would make it silently slow) and a
    descriptor that is no listener is refused."""
    out = subprocess.run([sys.executable, "-c", SYNC_WAKE], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.split() == ["True", "False"]
