"""Attacks on the command fence, each run in a child process as root or an ordinary user.

``python fence_attacks.py NAME WORK`` runs attack NAME with a toolbox rooted at WORK/root
(WORK is a folder of the running user, outside /tmp) and prints the facts it found as
JSON; test_fence.py asserts on them for both users. Nothing here decides pass or fail.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

Facts = dict[str, Any]


def _setup(work: Path, **kwargs: Any) -> tuple[Path, Path, Toolbox]:
    root, far = work / "root", work / "far"
    root.mkdir(exist_ok=True)
    far.mkdir(exist_ok=True)
    return root, far, filesystem_toolbox(root, **kwargs)


@contextlib.contextmanager
def _unix_listener(path: Path) -> Iterator[list[bytes]]:
    """A pathname UNIX socket that records what connects to it (as an agent would)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    got: list[bytes] = []
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                got.append(conn.recv(100) or b"connected")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        stop.set()
        thread.join()
        srv.close()
        path.unlink(missing_ok=True)


def _after_a_control(listeners: list[Path], heard: list[list[bytes]]) -> list[list[bytes]]:
    """What each listener heard before a connection of ours, once ours arrived (a listener
    accepts in order: what came before it has been heard)."""
    for path in listeners:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as ours:
            ours.connect(str(path))
            ours.sendall(b"control")
    deadline = time.monotonic() + 30
    while not all(b"control" in h for h in heard) and time.monotonic() < deadline:
        time.sleep(0.02)
    return [h[: h.index(b"control")] if b"control" in h else h for h in heard]


_CONNECT = """
import socket, sys
for path in sys.argv[1:]:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(b'reached')
        print(path, 'connected')
    except OSError as exc:
        print(path, type(exc).__name__)
"""


def sockets(work: Path) -> Facts:
    """The user's ssh-agent, a tmux-like socket in /tmp, one in /dev/shm and /run/user."""
    root, _far, box = _setup(work)
    uid = os.getuid()
    run_user = Path(f"/run/user/{uid}")
    tmp = Path(tempfile.mkdtemp(prefix="ssh-", dir="/tmp"))
    agent_sock = tmp / f"agent.{os.getpid()}"
    agent = subprocess.run(["ssh-agent", "-a", str(agent_sock)], capture_output=True, text=True,
                           check=True)
    agent_pid = agent.stdout.split("SSH_AGENT_PID=")[1].split(";")[0]
    listeners = [tmp / "plain.sock", Path(tempfile.mkdtemp(dir="/dev/shm")) / "s.sock"]
    if run_user.is_dir() and os.access(run_user, os.W_OK):
        listeners.append(run_user / f"loki-test-{os.getpid()}.sock")
    (root / "probe.py").write_text(_CONNECT)
    try:
        with contextlib.ExitStack() as stack:
            heard = [stack.enter_context(_unix_listener(p)) for p in listeners]
            ssh = box.call("run", {"command": f"SSH_AUTH_SOCK={agent_sock} ssh-add -l; echo rc=$?"})
            probe = box.call("run", {"command": "python3 probe.py " + " ".join(map(str, listeners))})
            hits = sum(len(h) for h in _after_a_control(listeners, heard))
            listing = box.call("run", {"command": f"ls {tmp} /dev/shm; echo listed"})
    finally:
        subprocess.run(["kill", agent_pid], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(listeners[1].parent, ignore_errors=True)
    return {"ssh": ssh, "probe": probe, "hits": hits, "listing": listing,
            "listeners": [str(p) for p in listeners]}


def tmux(work: Path) -> Facts:
    """`tmux new-window` through the user's tmux server runs a shell outside the fence."""
    _root, far, box = _setup(work)
    sock = Path(f"/tmp/tmux-{os.getuid()}-loki-{os.getpid()}/default")
    sock.parent.mkdir(mode=0o700)
    server = ["tmux", "-S", str(sock)]
    # tmux runs windows with $SHELL, else the user's login shell: nobody's is nologin
    env = {**os.environ, "TMUX": "", "SHELL": "/bin/sh"}
    subprocess.run([*server, "new-session", "-d", "sleep infinity"], check=True,  # till kill-server
                   env=env)
    try:
        out = box.call("run", {"command": f"{' '.join(server)} new-window -d 'touch {far}/pwned'; "
                                          "echo rc=$?"})
        # the server runs windows in the order asked: once ours has run, theirs had
        subprocess.run([*server, "new-window", "-d", f"touch {far}/ours"], check=True, env=env)
        deadline = time.monotonic() + 30
        while not (far / "ours").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        subprocess.run([*server, "kill-server"], check=False, capture_output=True)
        shutil.rmtree(sock.parent, ignore_errors=True)
    return {"out": out, "pwned": (far / "pwned").exists(), "ours": (far / "ours").exists()}


# Each level leaves the session, clears its environment (only a reaper can find it),
# leaves 40 sleepers and waits for the next level: 2,400 processes to kill and reap when
# the command's shell exits (once the deepest runs: no timeout to race on a busy machine),
# and the deepest one is re-parented only when all 60 above it are dead. Every one of them
# holds the lock on tree.lock (fd 9, inherited): it is free once the last one is gone. The
# deepest edits settings.py as soon as it sees `go`, which the test makes after the kill.
_ESCAPE = """
exec 9>>tree.lock; flock 9 && echo locked
deep() {
  if [ "$1" -gt 0 ]; then
    for i in $(seq 40); do sleep 600 & done
    setsid env -i PATH="$PATH" bash -c "$(declare -f deep); deep $(($1 - 1))" &
    wait
  else
    touch deepest; while [ ! -e go ]; do sleep 0.05; done; echo 'PWNED = True' >> settings.py
  fi
}
deep 60 &
while [ ! -e deepest ]; do sleep 0.05; done
echo spawned
"""


def _seconds_until_free(lock: Path, deadline: float) -> float | None:
    """Seconds until no process holds ``lock`` (None: one still did at ``deadline``)."""
    started = time.monotonic()
    with lock.open("a") as held:
        while True:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return time.monotonic() - started
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.02)


def escape(work: Path) -> Facts:
    """60 nested background shells and 2,400 sleepers left behind by a command that exits
    once they all run; the deepest edits settings.py when told to, if it still lives."""
    root, _far, box = _setup(work)
    (root / "settings.py").write_text("DEBUG = False\n")
    out = box.call("run", {"command": _ESCAPE, "timeout": 120})  # a guard, not a timing
    changed = list(box.changed)
    freed = _seconds_until_free(root / "tree.lock", time.monotonic() + 20)
    (root / "go").touch()  # a survivor writes now: wait for that when one held the lock
    deadline = time.monotonic() + 5
    while freed is None and "PWNED" not in (root / "settings.py").read_text() \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    seen = box.call("run", {"command": "ls -d /proc/[0-9]* | wc -l"})
    return {"out": out[:300], "settings": (root / "settings.py").read_text(),
            "changed": changed, "lock_freed_after": freed,
            "processes_seen": int(seen.split("\n")[2])}


_NETWORK = """
import socket, sys
tcp_port, udp_port = int(sys.argv[1]), int(sys.argv[2])
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)  # IPPROTO_MPTCP
    s.settimeout(3)
    s.connect(("127.0.0.1", tcp_port))
    print("mptcp connected")
except OSError as exc:
    print("mptcp", type(exc).__name__)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"udp-out", ("127.0.0.1", udp_port))
    print("udp sent")
except OSError as exc:
    print("udp", type(exc).__name__)
a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
a.bind(("127.0.0.1", 0))
a.sendto(b"inside", a.getsockname())
print("loopback", a.recv(10).decode())
"""


def network(work: Path) -> Facts:
    """network=False: MPTCP and UDP to a listener in the agent's network, loopback inside."""
    root, _far, box = _setup(work, network=False)
    facts: Facts = {}
    try:
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
        facts["mptcp_here"] = True
    except OSError:
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        facts["mptcp_here"] = False
    with tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(4)
        tcp.settimeout(0.5)
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(0.5)
        (root / "net.py").write_text(_NETWORK)
        facts["out"] = box.call("run", {"command": f"python3 net.py {tcp.getsockname()[1]} "
                                                   f"{udp.getsockname()[1]}"})
        try:
            tcp.accept()[0].close()
            facts["tcp_accepted"] = True
        except OSError:
            facts["tcp_accepted"] = False
        try:
            facts["udp_received"] = udp.recv(100).decode()
        except OSError:
            facts["udp_received"] = ""
    facts["status"] = box.status
    return facts


_SETID = """
import os
for path, mode in (("py-suid", 0o4755), ("py-sgid", 0o2755)):
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, mode))
        print(path, "created", oct(os.stat(path).st_mode))
    except OSError as exc:
        print(path, exc.strerror)
"""


def setid(work: Path) -> Facts:
    """Plant a setuid/setgid copy of a shell in the root and in /dev/shm."""
    root, _far, box = _setup(work)
    (root / "setid.py").write_text(_SETID)
    shm = f"/dev/shm/loki-suid-{os.getpid()}"
    out = box.call("run", {"command": f"cp /bin/sh sh-copy; chmod 4755 sh-copy; chmod u+s sh-copy; "
                                      f"chmod g+s sh-copy; install -m 6755 /bin/sh inst; "
                                      f"cp /bin/sh {shm}; chmod 4755 {shm}; python3 setid.py; "
                                      f"cp -p /bin/su su-copy 2>&1; ls -l {shm}; echo done"})
    modes = {p.name: stat.S_IMODE(p.lstat().st_mode) for p in root.iterdir()}
    host_shm = os.path.exists(shm)
    with contextlib.suppress(OSError):
        os.unlink(shm)
    return {"out": out, "modes": modes, "host_shm": host_shm, "status": box.status}


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


_GIT_ATTACK = ("git config core.fsmonitor 'touch {far}/pwned'; echo config=$?; "
               "echo '[alias] st = !touch {far}/pwned' >> .git/config; echo append=$?; "
               "printf '#!/bin/sh\\ntouch {far}/pwned\\n' > .git/hooks/pre-commit; echo hook=$?; "
               "mv .git moved-git; echo move=$?; echo gitdir: elsewhere > sub/.git; echo sub=$?")


def git(work: Path) -> Facts:
    """Write .git/config and .git/hooks so that the user's next git command runs code."""
    facts: Facts = {}
    for writable in (False, True):
        w = work / ("open" if writable else "closed")
        w.mkdir()
        root, far, box = _setup(w, git_writable=writable)
        _git(root, "init", "-q")
        (root / "sub").mkdir()
        config = (root / ".git" / "config").read_text()
        out = box.call("run", {"command": _GIT_ATTACK.format(far=far)})
        git_dir = root / ".git" if (root / ".git").exists() else root / "moved-git"
        facts[f"{writable}"] = {
            "out": out, "config_same": (git_dir / "config").read_text() == config,
            "hook": (git_dir / "hooks" / "pre-commit").exists(),
            "git_there": (root / ".git" / "config").exists(), "changed": list(box.changed),
            "status": box.status}
        if writable:
            shutil.rmtree(root / "moved-git", ignore_errors=True)
            _git(root, "init", "-q")
            config = (root / ".git" / "config").read_text()
            box2 = filesystem_toolbox(root, git_writable=True)
            out2 = box2.call("run", {"command": f"git config core.fsmonitor 'touch {far}/pwned' && "
                                                f"printf '#!/bin/sh\\n' > .git/hooks/pre-commit"})
            changed = list(box2.changed)
            report = box2.revert()
            facts["revert"] = {"out": out2, "changed": changed, "report": str(report),
                               "config_restored": (root / ".git" / "config").read_text() == config,
                               "hook_gone": not (root / ".git" / "hooks" / "pre-commit").exists()}
    return facts


def startup(work: Path) -> Facts:
    """.pth and sitecustomize.py in a virtualenv, bytecode in __pycache__."""
    root, _far, box = _setup(work)
    site = root / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (site / "sitecustomize.py").write_text("# the user's own\n")
    (root / "mod.py").write_text("X = 1\n")
    box.call("run", {"command": "true"})
    pyc = ("import importlib.util, marshal, os, time\n"
           "st = os.stat('mod.py')\n"
           "code = compile('import os; os.system(\"touch pwned\")', 'mod.py', 'exec')\n"
           "head = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, 'little')"
           " + int(st.st_mtime).to_bytes(4, 'little') + (st.st_size & 0xFFFFFFFF).to_bytes(4, 'little')\n"
           "os.makedirs('__pycache__', exist_ok=True)\n"
           "tag = __import__('sys').implementation.cache_tag\n"
           "open(f'__pycache__/mod.{tag}.pyc', 'wb').write(head + marshal.dumps(code))\n")
    out = box.call("run_python", {"code": pyc + (
        f"open({str(site / 'evil.pth')!r}, 'w').write('import os; os.system(\"id\")\\n')\n"
        f"open({str(site / 'sitecustomize.py')!r}, 'a').write('import os\\n')\n")})
    imported = box.call("run_python", {"code": "import mod; print('X', getattr(mod, 'X', None))"})
    changed = list(box.changed)
    report = box.revert()
    return {"out": out, "imported": imported, "changed": changed, "report": str(report),
            "pth_gone": not (site / "evil.pth").exists(),
            "sitecustomize": (site / "sitecustomize.py").read_text(),
            "pycache_left": sorted(p.name for p in (root / "__pycache__").glob("*")),
            "pwned": (root / "pwned").exists()}


def ctime(work: Path) -> Facts:
    """A same-size rewrite with its mtime put back, and `cp -p` of a same-size file."""
    root, far, box = _setup(work)
    (root / "a.txt").write_text("AAAA")
    (root / "b.txt").write_text("BBBB")
    (far / "c.txt").write_text("CCCC")
    os.utime(far / "c.txt", ns=(0, os.stat(root / "b.txt").st_mtime_ns))
    box.call("run", {"command": "true"})
    one = box.call("run", {"command": "touch -r a.txt ref; printf 'EVIL' > a.txt; "
                                      "touch -r ref a.txt; rm ref"})
    two = box.call("run", {"command": f"cp -p {far}/c.txt b.txt"})
    return {"one": one, "two": two, "a": (root / "a.txt").read_text()}


def revert_identity(work: Path) -> Facts:
    """write_file out.txt, run rm out.txt, the user saves out.txt: revert keeps it."""
    root, _far, box = _setup(work)
    box.call("write_file", {"path": "out.txt", "content": "agent\n"})
    box.call("run", {"command": "rm out.txt"})
    (root / "out.txt").write_text("the user's\n")
    box.call("write_file", {"path": "mine.txt", "content": "agent\n"})
    (root / "mine.txt").write_text("edited by the user\n")
    box.call("write_file", {"path": "plain.txt", "content": "agent\n"})
    report = box.revert()
    return {"report": str(report), "out": (root / "out.txt").read_text(),
            "mine": (root / "mine.txt").read_text(), "plain": (root / "plain.txt").exists()}


SECRETS = {"MYSQL_PWD": "hunter2", "DB_PASS": "hunter2", "SMTP_PASS": "hunter2",
           "REDIS_URL": "redis://:hunter2@cache:6379/0",
           "DATABASE_URL": "postgres://app:hunter2/x@db/app",
           "CELERY_BROKER_URL": "amqp://app:hunter2@rabbit//",
           "SERVICE_ENDPOINT": "https://api.example.com/v1?user=me&password=hunter2",
           "EXTRA_HEADER": "Authorization: Bearer hunter2hunter2"}
CREDENTIAL_FILES = (".bash_history", ".bashrc", ".npmrc", ".pgpass", ".config/git/credentials",
                    ".cache/huggingface/token", ".cargo/credentials.toml",
                    ".config/containers/auth.json", ".vault-token",
                    ".terraform.d/credentials.tfrc.json", ".config/rclone/rclone.conf")


def env_and_home(work: Path) -> Facts:
    """Secrets in the environment and in well-known files of the home folder."""
    home = work / "home"
    for rel in CREDENTIAL_FILES:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("hunter2\n")
    os.environ.update(SECRETS, HOME=str(home))
    _root, _far, box = _setup(work)
    names = " ".join(f"${n}" for n in SECRETS)
    cats = " ".join(f"~/{rel}" for rel in CREDENTIAL_FILES)
    out = box.call("run", {"command": f"echo {names}; cat {cats}; echo listed; ls -a ~"})
    return {"out": out, "status": box.status}


ATTACKS: dict[str, Callable[[Path], Facts]] = {
    f.__name__: f for f in (sockets, tmux, escape, network, setid, git, startup, ctime,
                            revert_identity, env_and_home)}

if __name__ == "__main__":
    print(json.dumps(ATTACKS[sys.argv[1]](Path(sys.argv[2]))))
