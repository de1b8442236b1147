"""Real Ray nodes started with ``ray start --block`` in subprocesses, for CLI fleet tests.

Each node is its own process group with its own ``--temp-dir``, so that stopping it ends
exactly the processes it started (never ``ray stop``, which would end every Ray process
on the machine, other test runs' included) and no other test's ``ray.init()`` finds it.
Token authentication (on by default for ``ray start`` since Ray 2.5x) is turned off for
these throwaway clusters on 127.0.0.1; the driver is told the same through ``env``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.exit(main())"]
# A dead node is declared dead after a few missed health checks, not the default ~30s.
FAST_HEALTH = {"RAY_health_check_initial_delay_ms": "1000", "RAY_health_check_period_ms": "1000",
               "RAY_health_check_timeout_ms": "1000", "RAY_health_check_failure_threshold": "3"}


def ray_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """What every process of these clusters (nodes and drivers) needs in its environment."""
    env = dict(os.environ if base is None else base)
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", **FAST_HEALTH)
    env.pop("RAY_ADDRESS", None)
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RayNode:
    """One Ray node (``head`` or joining ``address``) with ``cpus`` CPUs, until ``stop``."""

    def __init__(self, cpus: int, *, address: str | None = None) -> None:
        self.temp = Path(tempfile.mkdtemp(prefix="rn", dir="/tmp"))  # short: socket paths
        self.log = self.temp / "start.log"
        args = ["start", "--block", "--num-cpus", str(cpus), "--temp-dir", str(self.temp),
                "--disable-usage-stats"]
        if address is None:
            args += ["--head", "--port", str(free_port()), "--include-dashboard", "false"]
        else:
            args += ["--address", address]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([*RAY, *args], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=ray_env(),
                                         start_new_session=True)
        self.address = address or ""
        self._wait_started()
        if address is None:
            self.address = (self.temp / "ray_current_cluster").read_text().strip()

    def _wait_started(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "Ray runtime started" in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"ray start did not start: {self.log.read_text(errors='replace')[-3000:]}")

    def pids(self) -> list[int]:
        """The live processes of this node (its process group)."""
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if fields[0] != "Z" and int(fields[2]) == self.proc.pid:
                found.append(int(name))
        return found

    def raylet(self) -> int:
        for pid in self.pids():
            try:
                argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if argv0.endswith(b"/raylet"):
                return pid
        raise AssertionError("this node has no raylet")

    def stop(self) -> None:
        """SIGTERM ``ray start`` (it ends its node's processes), then SIGKILL what is left."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + 10
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.1)
