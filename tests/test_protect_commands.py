"""Protected files through commands: every route to their bytes ends in EACCES.

run and run_python get each protected file and folder of the root covered by a mode-000
stand-in in their own mount namespace; these tests try the routes a model would: read it,
copy it, link it, archive the folder, grep the tree, move it away, unmount the mask, read
it from a background process, and from a file that got a protected name in between.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from yggdrasil.loki.sandbox import isolation_status
from yggdrasil.loki.search import protection
from yggdrasil.loki.shell import ProtectedPaths, walk_protected
from yggdrasil.loki.tools import DEFAULT_PROTECTED, Toolbox, filesystem_toolbox

pytestmark = pytest.mark.skipif(not isolation_status().namespaces,
                                reason="masking protected files needs user namespaces")

SECRET = "s3cret-91c4"


@pytest.fixture
def work(root: Path) -> tuple[Path, Toolbox]:
    for rel in (".env", "certs/tls.key", ".aws/credentials", "app/credentials.json"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"TOKEN={SECRET}\n")
    (root / ".env.example").write_text("TOKEN=\n")
    (root / "readme.txt").write_text("hello\n")
    return root, filesystem_toolbox(root)


ROUTES = {
    "cat": "cat .env",
    "cat a key": "cat certs/tls.key",
    "a folder": "cat .aws/credentials; ls .aws",
    "head via <": "head -c 100 < app/credentials.json",
    "python open": "python3 -c \"print(open('.env').read())\"",
    "cp then read": "cp .env copy.txt; cat copy.txt; cp -r .aws awscopy; cat awscopy/*",
    "symlink": "ln -s .env link; cat link; ln -s .aws lnk; cat lnk/credentials",
    "hard link": "ln .env hard; cat hard",
    "tar of the folder": "tar cf - . 2>/dev/null | tar xOf - 2>/dev/null",
    "tar of a copy": "mkdir -p $TMPDIR/t && tar cf $TMPDIR/t/a.tar . ; tar xOf $TMPDIR/t/a.tar",
    "grep -r": "grep -r s3cret . ; grep -ra TOKEN .",
    "find -exec": "find . -type f -exec cat {} +",
    "dd": "dd if=.env bs=1 2>/dev/null",
    "mmap": "python3 -c \"import mmap,os;f=os.open('.env',os.O_RDONLY);print(mmap.mmap(f,0,prot=mmap.PROT_READ)[:])\"",
    "background": "(sleep 0.2; cat .env > bg.txt) & wait; cat bg.txt",
    "nohup, detached": "nohup sh -c 'cat .env' > nh.txt 2>&1 & sleep 0.5; cat nh.txt",
    "/proc/self/root": "cat /proc/self/root$PWD/.env",
    "umount the mask": "unshare -Urm sh -c 'umount .env; cat .env' ; umount .env; cat .env",
    "mount over it": "unshare -Urm sh -c 'mount --bind readme.txt .env; cat .env'",
    "move it away": "mv .env moved; cat moved; mv .aws aws2; cat aws2/credentials",
    "delete and read": "rm -f .env; cat .env",
    "chmod": "chmod 644 .env; cat .env",
}


@pytest.mark.parametrize("route", ROUTES)
def test_no_command_route_reads_a_protected_file(work: tuple[Path, Toolbox], route: str) -> None:
    root, box = work
    out = box.call("run", {"command": ROUTES[route], "timeout": 30})
    assert SECRET not in out, out
    assert (root / ".env").read_text() == f"TOKEN={SECRET}\n"  # still there, untouched
    assert (root / ".aws" / "credentials").read_text() == f"TOKEN={SECRET}\n"


def test_each_default_pattern_is_unreadable_to_commands(root: Path) -> None:
    from test_protect import EXCEPTIONS, PROTECTED

    for rel in [*PROTECTED, *EXCEPTIONS]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"{rel}={SECRET}\n" if rel in PROTECTED else f"{rel}=ok\n")
    box = filesystem_toolbox(root)
    names = " ".join(f"'{rel}'" for rel in [*PROTECTED, *EXCEPTIONS])
    out = box.call("run", {"command": f"for f in {names}; do cat \"$f\"; done; grep -ra {SECRET} ."})
    assert SECRET not in out, out
    assert out.count("Permission denied") >= len(PROTECTED)
    for rel in EXCEPTIONS:
        assert f"{rel}=ok" in out
    unprotected = filesystem_toolbox(root, protect=())
    assert f".pypirc={SECRET}" in unprotected.call("run", {"command": "cat .pypirc"})


def test_run_python_cannot_read_them_either(work: tuple[Path, Toolbox]) -> None:
    _, box = work
    out = box.call("run_python", {"code": "import pathlib\nfor p in pathlib.Path('.').rglob('*'):\n"
                                          "    try: print(p, p.read_text())\n"
                                          "    except OSError as e: print(p, e)"})
    assert SECRET not in out and ".env [Errno 13] Permission denied" in out
    assert "readme.txt hello" in out


def test_the_observation_says_why(work: tuple[Path, Toolbox]) -> None:
    _, box = work
    out = box.call("run", {"command": "cat .env"})
    assert "cat: .env: Permission denied" in out
    assert "[sandbox: protected files (they may hold secrets) are unreadable" in out
    assert "write only inside the root" not in out  # a read of a secret, not a stray write
    assert "the protected files are unreadable to them (masked" in box.status


def test_writes_moves_and_deletes_fail_and_leave_the_file(work: tuple[Path, Toolbox]) -> None:
    root, box = work
    out = box.call("run", {"command": "echo x > .env; echo x >> certs/tls.key; rm .aws/credentials;"
                                      " mv certs/tls.key k; touch .aws/new; echo end"})
    assert "Read-only file system" in out and "end" in out
    assert (root / ".env").read_text() == f"TOKEN={SECRET}\n"
    assert (root / "certs" / "tls.key").read_text() == f"TOKEN={SECRET}\n"
    assert sorted(p.name for p in (root / ".aws").iterdir()) == ["credentials"]
    assert "changed:" not in out


def test_files_that_get_a_protected_name_are_masked_from_the_next_command(
        work: tuple[Path, Toolbox]) -> None:
    root, box = work
    out = box.call("run", {"command": f"echo NEW={SECRET} > .env.local; cp readme.txt secrets.txt;"
                                      f" mkdir .ssh; echo {SECRET} > .ssh/id; cat .env.local"})
    assert f"NEW={SECRET}" in out  # a command's own bytes are its own while it runs
    out = box.call("run", {"command": "cat .env.local secrets.txt .ssh/id"})
    assert SECRET not in out and out.count("Permission denied") == 3
    (root / "id_rsa").write_text(SECRET)  # the user (or another program) between commands
    assert SECRET not in box.call("run", {"command": "cat id_rsa"})
    assert box.call("read_file", {"path": ".env.local"}).startswith("ERROR: .env.local is protected")


def test_exceptions_and_untracked_package_data_stay_readable(work: tuple[Path, Toolbox]) -> None:
    root, box = work
    venv = root / ".venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr\n")
    (venv / "lib" / "cacert.pem").write_text("CERTS\n")  # certifi's bundle: masking it breaks TLS
    out = box.call("run", {"command": "cat .env.example .venv/lib/cacert.pem readme.txt"})
    assert out.startswith("exit=0") and "TOKEN=\nCERTS\nhello" in out
    assert box.call("read_file", {"path": ".venv/lib/cacert.pem"}).startswith("ERROR:")


def test_protect_off_lets_commands_read_them(root: Path) -> None:
    (root / ".env").write_text(SECRET)
    box = filesystem_toolbox(root, protect=())
    assert SECRET in box.call("run", {"command": "cat .env"})
    assert "protected" not in box.status


def test_sandbox_off_says_they_are_not_hidden(root: Path) -> None:
    (root / ".env").write_text(SECRET)
    box = filesystem_toolbox(root, sandbox="off")
    assert 'the protected files are NOT hidden from them (sandbox="off")' in box.status
    assert box.call("read_file", {"path": ".env"}).startswith("ERROR: .env is protected")


def test_the_walk_and_the_tracker_view_agree(work: tuple[Path, Toolbox]) -> None:
    root, box = work
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / "x.pem").write_text("x")
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "test.key").write_text("x")  # not walked, as for changes
    box.call("run", {"command": "true"})  # the tracker's view is built
    protect = protection(DEFAULT_PROTECTED)
    walked = walk_protected(str(root), protect)
    assert walked == [".aws", ".env", "app/credentials.json", "certs/tls.key", "deep/er/x.pem"]
    files = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
             and "node_modules" not in p.parts]
    dirs = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()
            and "node_modules" not in p.parts]
    assert ProtectedPaths(protect).outermost(files, dirs) == walked


# -- where namespaces are missing: status says so, require refuses --------------------------

_WITHOUT_NAMESPACES = """
from yggdrasil.loki.tools import filesystem_toolbox
root = sys.argv[1]
auto = filesystem_toolbox(root, network=["pypi.org"])
required = filesystem_toolbox(root, sandbox="require", network=["pypi.org"])
print(json.dumps({
    "status": auto.status,
    "run": auto.call("run", {"command": "cat .env; curl -sS -m 3 http://127.0.0.1:9/"}),
    "require": required.call("run", {"command": "cat .env"}),
}))
"""


def test_without_namespaces_status_says_they_are_not_hidden(root: Path) -> None:
    import json
    import os
    import platform
    import subprocess
    import sys

    from test_fence import _NO_NAMESPACES, SRC

    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the seccomp stand-in for a kernel without user namespaces is per-arch")
    (root / ".env").write_text(SECRET)
    script = _NO_NAMESPACES.split("from yggdrasil.loki.tools")[0] + _WITHOUT_NAMESPACES
    done = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert "the protected files are NOT hidden from them (masking them needs namespaces)" in seen["status"]
    assert "network limited to hosts is NOT possible here" in seen["status"]
    assert SECRET in seen["run"]  # what the status says is true
    assert seen["require"].startswith('ERROR: sandbox="require" but namespaces unavailable')


def test_background_jobs_cannot_read_them_either(work: tuple[Path, Toolbox]) -> None:
    """A job gets the same masks as run, including for a file that appeared since the
    last command and while another job was running."""
    root, box = work
    first = box.call("run", {"command": "cat .env; sleep 30", "background": True})
    assert first.startswith("started job 1:") and SECRET not in first
    (root / "id_ed25519").write_text(SECRET)  # appears while job 1 runs
    second = box.call("run", {"command": "cat id_ed25519 .env .aws/credentials", "background": True})
    assert second.startswith("started job 2:")
    out = second + box.call("job_output", {"job": 2, "wait": 10})  # what it printed, in two reads
    assert "exit=1" in out and SECRET not in out and out.count("Permission denied") == 3
    assert SECRET not in box.call("job_output", {"job": 1})
    box.close()
