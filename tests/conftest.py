from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fake_servers import FakeModelServer, clear_engine_env, serve
from readable import new_base, readable_copy
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto`` (pyproject's addopts): twice the cores, since most tests
    wait on a child process, a server or a job; at most 8 (each worker holds ~300 MB)."""
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


def once_per_run(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]
                 ) -> Path:
    """``folder`` made by ``make(folder)`` once for the whole run: the xdist workers share
    the base temp folder's parent, and the first to take the lock makes it."""
    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / name
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".made").exists():
            folder.mkdir(exist_ok=True)
            make(folder)
            (folder / ".made").touch()
    return folder


@pytest.fixture(autouse=True, scope="session")
def _session_basetemp(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Where this session's tmp folders live: process scans (fleet_kit) look only there,
    not at what another test run on the same machine is doing."""
    os.environ["LOKI_TEST_BASETEMP"] = str(tmp_path_factory.getbasetemp())
    # checkpoints and transcripts go to this session's folder, never the developer's
    os.environ["LOKI_STATE_DIR"] = str(tmp_path_factory.getbasetemp() / "loki-state")
    # so do kept outputs and other caches: every toolbox sweeps the spill folder's sessions,
    # and the developer's ~/.cache/loki/outputs held 34,000 of them from earlier test runs
    # (each toolbox paid ~0.3 s of CPU listing them)
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.getbasetemp() / "xdg-cache")


@pytest.fixture(scope="session")
def readable_checkout() -> Iterator[tuple[Path, Path]]:
    """(src, tests) of a copy of this checkout that uid 65534 can read (see readable.py)."""
    base = new_base("loki-readable-")
    if base is None:
        pytest.skip("the system temp folder is not reachable by other users, so a copy of "
                    "the checkout an ordinary user can import cannot be made")
    try:
        yield readable_copy(base)
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_engine_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real model API through the developer's own keys or settings."""
    clear_engine_env(monkeypatch)


@pytest.fixture(autouse=True)
def _no_user_settings(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
                      ) -> None:
    """No test reads the developer's ~/.config/loki, a LOKI_* setting or a profile."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    for name in list(os.environ):
        if name.startswith("LOKI_") and ("__" in name or name in ("LOKI_PROFILE", "LOKI_CONFIG",
                                                                  "LOKI_READ_ONLY")):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _no_language_servers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                         _no_user_settings: None) -> None:
    """Toolboxes start no language server (each is a node process of ~200 MB that indexes
    the root) unless the test is marked ``language_servers``: ruff still checks Python."""
    if request.node.get_closest_marker("language_servers") is not None:
        return
    import yggdrasil.loki.tools as tools

    monkeypatch.setattr(tools, "default_servers", lambda root: {})
    monkeypatch.setenv("LOKI_DIAGNOSTICS__DEFAULT_SERVERS", "false")  # CLI and MCP children


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    """A fake model API on 127.0.0.1 speaking the OpenAI and Anthropic wire formats."""
    with serve() as fake:
        yield fake


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An agent root with a sibling folder outside it that must stay unreachable."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP SECRET\n")
    (tmp_path / "root-secrets").mkdir()  # shares a name prefix with the root
    (tmp_path / "root-secrets" / "key.txt").write_text("PREFIX SECRET\n")
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.fixture
def box(root: Path) -> Toolbox:
    return filesystem_toolbox(root)


def _mcp_major(python: str) -> int | None:
    """The major version of the mcp SDK that ``python`` imports, None without one."""
    probe = "import importlib.metadata as m; print(m.version('mcp'))"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    return int(done.stdout.split(".")[0]) if done.returncode == 0 else None


@pytest.fixture(scope="session")
def other_mcp_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python whose mcp SDK is the other major version than this environment's.

    ``loki mcp`` supports mcp 1.x (>=1.24) and 2.x, chosen at run time, so its tests run
    the server under both: a venv that sees this environment's packages (the server's
    dependencies) but has the other mcp installed over them, from the package registry.
    """
    installed = _mcp_major(sys.executable)
    want = "mcp>=2,<3" if installed == 1 else "mcp>=1.24,<2"

    def make(folder: Path) -> None:
        venv = folder / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       check=True, timeout=300)
        pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                              "--disable-pip-version-check", want],
                             capture_output=True, text=True, timeout=600)
        if pip.returncode != 0:
            pytest.fail(f"could not install {want} for the second-SDK tests: {pip.stderr[-2000:]}")

    python = str(once_per_run(tmp_path_factory, "other-mcp", make) / "venv" / "bin" / "python")
    assert _mcp_major(python) == (2 if installed == 1 else 1)
    return python


@pytest.fixture(params=["installed", "other"], ids=lambda p: f"mcp-{p}")
def mcp_python(request: pytest.FixtureRequest) -> str:
    """The Python that runs `loki mcp`: this environment's mcp SDK, then the other one."""
    if request.param == "installed":
        return sys.executable
    return str(request.getfixturevalue("other_mcp_python"))


@pytest.fixture(scope="session")
def ray_head() -> Iterator[object]:
    """The run's one Ray cluster: a head node with 2 CPUs (ray_nodes.RayNode), shared by the
    Ray tests, which are one xdist_group so that one worker runs them all."""
    pytest.importorskip("ray")
    from ray_nodes import RayNode

    node = RayNode(2)
    try:
        yield node
    finally:
        node.stop()
