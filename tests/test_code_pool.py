"""The parse pool of a whole build: worker processes that outlive no TMPDIR and re-run no script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli_run import SRC

# A script without ``if __name__ == "__main__":`` (as a user's may be), run the way a fleet
# worker runs attempts: each under its own TMPDIR, deleted when the attempt ends.
SCRIPT = """
import os, shutil, sys, tempfile
from pathlib import Path
print("script ran", flush=True)
from yggdrasil.loki.code import _pool
from yggdrasil.loki.tools import filesystem_toolbox

def in_this_process(*args):
    raise AssertionError("parsed in this process: the pool did not start")

_pool._here = in_this_process
base = Path(sys.argv[1])
for attempt in ("one", "two"):
    tmp = base / f"tmp-{attempt}"
    tmp.mkdir()
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = None
    root = base / f"root-{attempt}"
    root.mkdir()
    for i in range(_pool.MIN_FILES + 50):
        (root / f"m{i}.py").write_text(f"def {attempt}_{i}():\\n    return m{i + 1}\\n")
    with filesystem_toolbox(root, sandbox="off") as box:
        print(box.call("repo_map", {}).split("\\n")[0], flush=True)
        print(box.call("find_symbol", {"name": f"{attempt}_7"}), flush=True)
    shutil.rmtree(tmp)
"""


def test_a_pool_starts_again_after_its_tmpdir_is_gone_and_never_reruns_the_script(
        tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 0, done.stderr
    out = done.stdout.split("\n")
    assert out.count("script ran") == 1, done.stdout
    assert out[1].startswith("[repo map of .: ") and "250 files" in out[1], done.stdout
    assert out[2].startswith("m7.py:1: function one_7()"), done.stdout
    assert out[3].startswith("[repo map of .: ") and "250 files" in out[3], done.stdout
    assert out[4].startswith("m7.py:1: function two_7()"), done.stdout
