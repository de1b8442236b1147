"""The test suite passes wherever it is cloned: here, from a copy in a folder other users
cannot enter (root's 0700 home, a ``mktemp -d`` folder), the tests that switch to an
ordinary user still run their attack (from a copy that user can read) rather than fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from readable import HERE, SRC

ORDINARY_USER_TESTS = [
    "tests/test_search_hostile.py::test_the_rg_fence_holds_for_an_ordinary_user",
    "tests/test_table_worker.py::test_the_fence_holds_for_an_ordinary_user",
]


def test_the_ordinary_user_tests_pass_from_a_clone_in_a_private_folder(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("the ordinary-user tests run only as root with setpriv")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    clone = private / "clone"
    clone.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache")
    shutil.copytree(SRC, clone / "src", ignore=ignore)
    shutil.copytree(HERE, clone / "tests", ignore=ignore)
    shutil.copy(HERE.parent / "pyproject.toml", clone / "pyproject.toml")
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}
    # a base temp folder of its own: pytest's default one would first delete the oldest
    # runs' folders in /tmp/pytest-of-<user> (other suites' trees: ~30 s on a busy disk)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "-n", "0",
         "--basetemp", str(tmp_path / "basetemp"), *ORDINARY_USER_TESTS],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "ModuleNotFoundError" not in done.stdout
    assert f"{len(ORDINARY_USER_TESTS)} passed" in done.stdout, done.stdout[-3000:]  # none skipped
