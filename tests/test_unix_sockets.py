"""UNIX sockets outside a command's places are out of its reach, wherever they are.

Real servers run outside the fence on sockets in arbitrary places (a folder under
/var/tmp, a folder in HOME): a tmux server (it runs whatever a client asks, outside the
fence), an ssh-agent and a docker-like HTTP server. A command cannot connect to any of
them, not even through a link it makes in its TMPDIR, while a server it starts on a
socket in its own TMPDIR works, and ``unix_sockets=[...]`` lets the user open one.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
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


class DockerLike:
    """A UNIX socket answering every connection with an HTTP 200 (counted)."""

    def __init__(self, path: Path) -> None:
        self.path, self.hits = path, 0
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.settimeout(5)
            with contextlib.suppress(OSError):
                conn.recv(4096)  # the request (a close before it reads as a failed connect)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nDOCKER-OK")
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def places() -> Iterator[dict[str, Path]]:
    """Folders outside any root: one under /var/tmp, one in HOME."""
    found = {"var": Path(tempfile.mkdtemp(dir="/var/tmp", prefix="loki-sock-")),
             "home": Path(tempfile.mkdtemp(dir=Path.home(), prefix=".loki-sock-"))}
    yield found
    for path in found.values():
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolbox]:
    with filesystem_toolbox(tmp_path_factory.mktemp("sock-root"), allow_shell=True) as made:
        yield made


@pytest.mark.parametrize("where", ["var", "home"])
def test_a_tmux_server_elsewhere_runs_nothing_for_a_command(
        box: Toolbox, places: dict[str, Path], where: str) -> None:
    sock, marker = places[where] / "tmux.sock", places[where] / f"ran-{where}"
    subprocess.run(["tmux", "-S", str(sock), "new-session", "-d", "sleep 300"], check=True)
    try:
        out = box.call("run", {"command": f"tmux -S {sock} run-shell 'touch {marker}'; "
                                          f"tmux -S {sock} ls"})
        assert not marker.exists(), out
        assert "loki sandbox: refused connecting to the UNIX socket" in out, out
        assert not out.startswith("exit=0"), out
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], check=False)


def test_an_ssh_agent_elsewhere_is_unreachable(box: Toolbox, places: dict[str, Path]) -> None:
    sock = places["home"] / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            threading.Event().wait(0.05)
        outside = subprocess.run(["ssh-add", "-l"], env={"SSH_AUTH_SOCK": str(sock)},
                                 capture_output=True, text=True)
        assert "no identities" in outside.stdout  # the agent is there and answers
        out = box.call("run", {"command": f"SSH_AUTH_SOCK={sock} ssh-add -l"})
        assert "no identities" not in out, out
        assert "refused connecting" in out, out
        assert "may write only inside" not in out, out  # the refusal says why, not the fence note
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(10)


@pytest.mark.parametrize("where", ["var", "home"])
def test_a_docker_like_socket_elsewhere_is_unreachable(
        box: Toolbox, places: dict[str, Path], where: str) -> None:
    server = DockerLike(places[where] / "docker.sock")
    try:
        out = box.call("run", {"command": f"curl -s --unix-socket {server.path} http://x/v; "
                                          f"ln -s {server.path} $TMPDIR/d.sock; "
                                          "curl -s --unix-socket $TMPDIR/d.sock http://x/v"})
        assert "DOCKER-OK" not in out and server.hits == 0, out
        assert out.count("refused connecting") == 2, out
    finally:
        server.close()


def test_the_user_may_open_one_socket(tmp_path: Path, places: dict[str, Path]) -> None:
    server = DockerLike(places["var"] / "allowed.sock")
    try:
        with filesystem_toolbox(tmp_path, allow_shell=True,
                                unix_sockets=[server.path]) as opened:
            out = opened.call("run", {"command": f"curl -s --unix-socket {server.path} "
                                                 "http://x/v"})
        assert "DOCKER-OK" in out and server.hits == 1, out
    finally:
        server.close()


OWN_SERVER = """
import os, socket, threading
path = os.path.join(os.environ["TMPDIR"], "own.sock")
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen(1)
threading.Thread(target=lambda: server.accept()[0].sendall(b"OWN-OK"), daemon=True).start()
client = socket.socket(socket.AF_UNIX)
client.connect(path)
print(client.recv(10).decode())
"""


def test_a_server_the_command_starts_in_its_tmpdir_works(box: Toolbox) -> None:
    out = box.call("run_python", {"code": OWN_SERVER})
    assert out.startswith("exit=0") and "OWN-OK" in out, out


def test_a_socket_in_the_root_works(box: Toolbox) -> None:
    line = ("python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]);"
            " s.listen(1); c=socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); "
            "print(\"ok\", sys.argv[1])' {}")
    out = box.call("run", {"command": line.format("r.sock") + " && rm r.sock"})
    assert out.startswith("exit=0") and "ok r.sock" in out, out


def test_an_abstract_socket_outside_is_unreachable(box: Toolbox) -> None:
    name = b"\0loki-test-abstract-" + str(id(box)).encode()
    server = socket.socket(socket.AF_UNIX)
    server.bind(name)
    server.listen(1)
    try:
        code = (f"import socket\ns = socket.socket(socket.AF_UNIX)\n"
                f"try:\n    s.connect({name!r}); print('REACHED')\n"
                f"except OSError as e:\n    print('refused', e)\n")
        out = box.call("run_python", {"code": code})
        assert "REACHED" not in out and "refused" in out, out
        server.setblocking(False)  # and the listener saw no connection either
        with contextlib.suppress(BlockingIOError):
            server.accept()
            pytest.fail("a connection reached the abstract socket outside")
    finally:
        server.close()


def test_background_jobs_are_held_to_it_too(box: Toolbox, places: dict[str, Path]) -> None:
    server = DockerLike(places["var"] / "job.sock")
    try:
        started = box.call("run", {"command": f"curl -s --unix-socket {server.path} http://x/",
                                   "background": True})
        job = int(started.split()[2].rstrip(":"))
        out = started + box.call("job_output", {"job": job, "wait": 10})
        assert server.hits == 0 and "refused connecting" in out, out
    finally:
        server.close()


def test_a_refusal_is_said_once_however_often_it_is_tried(
        box: Toolbox, places: dict[str, Path]) -> None:
    server = DockerLike(places["var"] / "loop.sock")
    try:
        code = (f"import socket\nfor _ in range(200):\n    s = socket.socket(socket.AF_UNIX)\n"
                f"    try: s.connect({str(server.path)!r})\n    except OSError: pass\n"
                f"    s.close()\nprint('tried')\n")
        out = box.call("run_python", {"code": code})
        assert "tried" in out and out.count("refused connecting") == 1, out
        assert server.hits == 0
    finally:
        server.close()
