"""The warm launcher (``sandbox/_warm``): one launcher process per toolbox forks each
command's launcher. It must change nothing a command can see or do, only the time a
command takes to start: the same fence, nothing leaked into the command, stopped on
time, ended with the agent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from yggdrasil.loki.sandbox import WarmLauncher, isolation_status, landlock_status
from yggdrasil.loki.shell import Shell
from yggdrasil.loki.toolbox import Toolbox
from yggdrasil.loki.tools import filesystem_toolbox

ISO = isolation_status()
fenced = pytest.mark.skipif(not (landlock_status().available and ISO.namespaces),
                            reason=f"needs Landlock and namespaces: {ISO}")
SRC = str(Path(__file__).resolve().parent.parent / "src")


def shell_of(box: Toolbox) -> Shell:
    return next(r for r in box._resources if isinstance(r, Shell))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def _wait_until(check: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(check())  # type: ignore[operator]


@fenced
@pytest.mark.parametrize("network", [True, False], ids=["network", "no-network"])
def test_commands_start_from_one_warm_launcher(root: Path, network: bool) -> None:
    box = filesystem_toolbox(root, network=network)
    try:
        warm = shell_of(box).warm
        first = box.invoke("run", {"command": "echo one; echo two >&2; exit 3"}).data
        assert (first.exit_code, first.stdout.text(), first.stderr.text()) == (3, "one\n", "two\n")
        assert warm._process is not None
        server = warm._process.pid
        for _ in range(3):
            assert box.invoke("run", {"command": "true"}).data.exit_code == 0
        assert warm._process is not None and warm._process.pid == server and _alive(server)
        # the same fence as a cold launch: Landlock, no capabilities, its own namespaces
        seen = box.invoke("run", {"command": "echo $LOKI_SANDBOX; grep CapEff /proc/self/status;"
                                             " echo $$; touch /etc/x"}).data
        assert seen.stdout.text().split("\n")[:3] == [f"landlock-abi-{landlock_status().abi}",
                                              "CapEff:\t0000000000000000", "2"]
        assert "Permission denied" in seen.stderr.text()
    finally:
        box.close()


@fenced
def test_nothing_of_the_launcher_leaks_into_the_command(root: Path) -> None:
    """Its control socket, the other commands' report sockets, its wake-up pipe: none of
    them is open in a command; its environment is not the agent's."""
    box = filesystem_toolbox(root)
    try:
        box.invoke("run", {"command": "sleep 1", "background": True})  # another one running
        fds = box.invoke("run", {"command": "ls /proc/self/fd"}).data.stdout.text().split()
        assert sorted(fds) == ["0", "1", "2", "3"]  # 3: the folder ls reads
        warm = shell_of(box).warm
        assert warm._process is not None
        with open(f"/proc/{warm._process.pid}/environ", "rb") as fh:
            names = {entry.split(b"=", 1)[0] for entry in fh.read().split(b"\0") if entry}
        assert names <= {b"LANG", b"LC_ALL", b"LC_CTYPE"}
    finally:
        box.close()


@fenced
def test_a_timeout_stops_a_warm_launched_command(root: Path) -> None:
    """The agent's SIGTERM reaches the launcher though the warm launcher is its parent."""
    box = filesystem_toolbox(root)
    try:
        start = time.monotonic()
        done = box.invoke("run", {"command": "sleep 30; echo late > late", "timeout": 1}).data
        assert done.timed_out and time.monotonic() - start < 10
        assert not (root / "late").exists()  # (a live `sleep 30` would write it in 29 s)
    finally:
        box.close()


@fenced
def test_closing_the_toolbox_ends_the_warm_launcher(root: Path) -> None:
    box = filesystem_toolbox(root)
    box.invoke("run", {"command": "true"})
    warm = shell_of(box).warm
    assert warm._process is not None
    process = warm._process
    box.close()
    process.wait(10)  # it exits once idle
    assert process.returncode == 0


@fenced
def test_a_warm_launched_command_ends_with_the_agent(root: Path, tmp_path: Path) -> None:
    """The agent killed outright (it cannot stop anything): the warm launcher sees it
    gone and exits, and each launcher then kills its command, as a cold one does."""
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {SRC!r})
        from yggdrasil.loki.tools import filesystem_toolbox
        box = filesystem_toolbox({str(root)!r})
        box.call("run", {{"command": "true"}})
        box.call("run", {{"command": "while :; do date +%s%N > beat; sleep 0.05; done",
                          "timeout": 600}})
    """))
    agent = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    beat = root / "beat"
    try:
        assert _wait_until(beat.exists, 60), "the command never started"
        os.kill(agent.pid, signal.SIGKILL)
        agent.wait(10)

        def still() -> bool:  # polled until the beat stops: no fixed wait for the kill
            before = beat.read_text()
            time.sleep(0.3)
            return beat.read_text() == before

        assert _wait_until(still, 10), "the command outlived the agent"
    finally:
        if agent.poll() is None:
            agent.kill()


def test_the_warm_launcher_can_be_turned_off(root: Path) -> None:
    box = filesystem_toolbox(root)
    try:
        shell = shell_of(box)
        shell.warm = WarmLauncher(sys.executable, enabled=False)
        assert box.invoke("run", {"command": "echo cold"}).data.stdout.text() == "cold\n"
        assert shell.warm._process is None
    finally:
        box.close()
