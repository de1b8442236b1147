"""The fenced table worker: crafted files and escapes cost an ERROR, never the agent.

Issue #11, family 1: before the worker, read_table / query_table parsed files in the agent
process, so a crafted workbook aborted it (calamine asked for 512 GiB), a Parquet file
nested 500 lists deep segfaulted it, and polars' read_csv() read any file the user could.
Each attack here runs through the real toolbox or a real FencedWorker process.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from crafted import deep_parquet, far_corners_xlsx, shared_strings_bomb, small_xlsx
from yggdrasil.loki.sandbox import FencedWorker, WorkerFailed, WorkerLimits, landlock_status
from yggdrasil.loki.tools import Tool, Toolbox, filesystem_toolbox

FENCED = landlock_status().abi > 0
needs_landlock = pytest.mark.skipif(not FENCED, reason="Landlock is not available here")
SRC = Path(__file__).resolve().parents[1] / "src"
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def tables(root: Path) -> Path:
    pl.DataFrame({"city": ["Oslo", "Rome"], "qty": [3, 4]}).write_csv(root / "ok.csv")
    return root


def still_works(box: Toolbox) -> None:
    out = box.call("read_table", {"path": "ok.csv"})
    assert out.startswith("ok.csv  shape=(2, 2)"), out


# -- crafted files through the toolbox ---------------------------------------------------------


def test_a_workbook_with_far_corners_is_refused_up_front(tables: Path, box: Toolbox) -> None:
    far_corners_xlsx(tables / "far.xlsx")
    for out in (box.call("read_table", {"path": "far.xlsx"}),
                box.call("query_table", {"sql": "SELECT * FROM 'far.xlsx'"})):
        assert out.startswith("ERROR: far.xlsx: sheet sheet1.xml: its cells span 1,048,576 "
                              "rows x 16,384 columns"), out
        assert "at most 20,000,000 cells" in out
    still_works(box)


def test_a_shared_strings_bomb_is_refused_up_front(tables: Path, box: Toolbox) -> None:
    shared_strings_bomb(tables / "bomb.xlsx")
    out = box.call("read_table", {"path": "bomb.xlsx"})
    assert out.startswith("ERROR: bomb.xlsx: its shared-strings table is 371.9 MB "
                          "uncompressed"), out
    still_works(box)


def test_a_parquet_column_nested_500_lists_deep_is_refused(tables: Path, box: Toolbox) -> None:
    deep_parquet(tables / "deep.parquet")
    for out in (box.call("read_table", {"path": "deep.parquet"}),
                box.call("query_table", {"sql": "SELECT count(*) FROM 'deep.parquet'"})):
        assert out.startswith("ERROR: deep.parquet: a column is nested 1000 levels deep"), out
    still_works(box)


def test_nesting_below_the_limit_is_read(tables: Path, box: Toolbox) -> None:
    deep_parquet(tables / "nested.parquet", depth=40)
    assert box.call("read_table", {"path": "nested.parquet"}).startswith(
        "nested.parquet  shape=(2, 1)")
    small_xlsx(tables / "small.xlsx")
    assert box.call("read_table", {"path": "small.xlsx"}).startswith(
        "small.xlsx  shape=(1, 2)  columns=['city', 'qty']")


def test_the_agent_keeps_its_state_when_the_worker_dies(tables: Path, box: Toolbox) -> None:
    assert box.invoke("write_file", {"path": "notes.txt", "content": "mine\n"}).data.created
    worker = box_worker(box)
    box.call("read_table", {"path": "ok.csv"})
    pid = worker.pid()
    assert pid is not None
    os.kill(pid, 9)  # as a crash would, between two calls
    while worker.pid() == pid:
        time.sleep(0.01)
    still_works(box)
    assert worker.pid() not in (None, pid)  # a new worker
    assert box.changed == ["notes.txt"]
    box.revert()
    assert not (tables / "notes.txt").exists()


def box_worker(box: Toolbox) -> FencedWorker:
    run = box.tools["read_table"].run
    worker = run.__self__.worker  # type: ignore[attr-defined]
    assert isinstance(worker, FencedWorker)
    return worker


# -- the worker's limits and fence, with handlers that attack from inside --------------------


@pytest.fixture
def probe(tables: Path) -> Iterator[FencedWorker]:
    worker = FencedWorker("worker_probe", [str(tables)], name="table worker",
                          limits=WorkerLimits(memory=2 * 2**30, cpu_seconds=2, wall_seconds=20))
    yield worker
    worker.close()


def fails(worker: FencedWorker, op: str, fds: list[int] | None = None, **args: object) -> str:
    with pytest.raises(WorkerFailed) as info:
        worker.call(op, args, fds or [])
    return str(info.value)


def test_memory_limit(probe: FencedWorker) -> None:
    assert fails(probe, "allocate", gib=3) == (
        "it needed more than 2 GiB of memory (the table worker's limit)")
    assert probe.call("echo", {"text": "back"}) == {"ok": "back"}


def test_calamine_asking_for_512_gib_is_contained(tables: Path, probe: FencedWorker) -> None:
    """The far-corner workbook straight into fastexcel, as if the up-front check missed it:
    in the agent process this aborts Python (SIGABRT)."""
    pytest.importorskip("fastexcel")
    far_corners_xlsx(tables / "far.xlsx")
    fd = os.open(tables / "far.xlsx", os.O_RDONLY)
    try:
        assert fails(probe, "calamine", [fd]) == (
            "it needed more than 2 GiB of memory (the table worker's limit)")
    finally:
        os.close(fd)


def test_a_segfault_is_contained(tables: Path, probe: FencedWorker) -> None:
    deep_parquet(tables / "deep.parquet")
    fd = os.open(tables / "deep.parquet", os.O_RDONLY)
    try:
        out = fails(probe, "polars_parquet", [fd])
    finally:
        os.close(fd)
    assert out.startswith("the parser ") and "table worker" in out, out
    assert fails(probe, "segfault") == "the parser crashed (SIGSEGV) and the table worker stopped"


def test_cpu_and_wall_time_limits(tables: Path) -> None:
    worker = FencedWorker("worker_probe", [str(tables)], name="table worker",
                          limits=WorkerLimits(cpu_seconds=1, wall_seconds=30))
    try:
        assert fails(worker, "spin") == "it used more than 1 s of CPU (the table worker's limit)"
    finally:
        worker.close()
    worker = FencedWorker("worker_probe", [str(tables)], name="table worker",
                          limits=WorkerLimits(wall_seconds=1))
    try:
        assert fails(worker, "sleep", seconds=30) == (
            "it took more than 1 s (the table worker's time limit)")
        assert worker.call("echo", {"text": "x"}) == {"ok": "x"}
    finally:
        worker.close()


@needs_landlock
def test_the_worker_reads_only_the_root(tables: Path, probe: FencedWorker) -> None:
    secret = tables.parent / "outside" / "secret.txt"
    assert probe.call("read", {"path": str(tables / "ok.csv")})["ok"].startswith("city,qty")
    for path in (secret, "/etc/passwd", "/etc/hostname"):
        assert "Permission denied" in probe.call("read", {"path": str(path)})["error"]
    assert "Permission denied" in probe.call("write", {"path": str(tables / "new.txt")})["error"]
    assert not (tables / "new.txt").exists()
    environ = f"/proc/{os.getpid()}/environ"
    assert "error" in probe.call("read", {"path": environ})
    assert "not permitted" in probe.call("kill", {"pid": os.getpid()})["error"]


@needs_landlock
def test_the_worker_has_no_network(probe: FencedWorker) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert "Permission denied" in probe.call("connect", {"port": port})["error"]


@needs_landlock
def test_a_table_function_that_got_past_the_sql_check_still_cannot_leave_the_root(
        tables: Path, probe: FencedWorker) -> None:
    secret = tables.parent / "outside" / "secret.txt"
    reply = probe.call("polars_sql", {"sql": f"SELECT * FROM read_csv('{secret}')"})
    assert "Permission denied" in reply["error"] and "TOP SECRET" not in str(reply)


PROBE_AS_USER = """
import json, os, sys
from yggdrasil.loki.sandbox import FencedWorker, WorkerFailed, WorkerLimits
root, secret = sys.argv[1], sys.argv[2]
w = FencedWorker("worker_probe", [root], name="table worker", limits=WorkerLimits(memory=2**30))
out = {"inside": w.call("read", {"path": os.path.join(root, "ok.csv")}),
       "outside": w.call("read", {"path": secret}),
       "write": w.call("write", {"path": os.path.join(root, "x.txt")})}
try:
    w.call("allocate", {"gib": 2})
except WorkerFailed as exc:
    out["memory"] = str(exc)
w.close()
print(json.dumps(out))
"""


@needs_landlock
def test_the_fence_holds_for_an_ordinary_user(request: pytest.FixtureRequest,
                                              readable_checkout: tuple[Path, Path]) -> None:
    """As uid 65534 (no root rights to lose): the same reads refused, the same limits."""
    python = shutil.which("python3", path="/usr/bin")
    if os.geteuid() != 0 or python is None or shutil.which("setpriv") is None:
        pytest.skip("needs root, setpriv and /usr/bin/python3 to switch to an ordinary user")
    base = Path(tempfile.mkdtemp(prefix="loki-user-"))  # pytest's own tmp is root-only
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    root, outside = base / "root", base / "outside"
    for folder in (base, root, outside):
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)
    (root / "ok.csv").write_text("city,qty\nOslo,3\n")
    (outside / "secret.txt").write_text("TOP SECRET\n")
    for path in (root / "ok.csv", outside / "secret.txt"):
        path.chmod(0o644)
    root.chmod(0o777)  # the user could write here, were it not for the fence
    src, tests = readable_checkout  # the checkout may be where the user cannot read it
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{src}:{tests}"}
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c",
         PROBE_AS_USER, str(root), str(outside / "secret.txt")],
        capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = __import__("json").loads(done.stdout)
    assert out["inside"] == {"ok": "city,qty\nOslo,3\n"}
    assert "Permission denied" in out["outside"]["error"]
    assert "Permission denied" in out["write"]["error"] and not (root / "x.txt").exists()
    assert out["memory"] == "it needed more than 1 GiB of memory (the table worker's limit)"


def test_the_status_says_how_tables_are_parsed(root: Path) -> None:
    box = filesystem_toolbox(root, read_only=True)
    worker = box_worker(box)
    if FENCED:
        assert worker.status().startswith(f"fenced by Landlock (ABI {landlock_status().abi})")
        assert "table" not in box.status and box.status.startswith("Protected files")
    else:
        assert "NOT fenced" in box.status
    unfenced = FencedWorker("worker_probe", [str(root)], sandbox=False)
    assert unfenced.status().startswith("NOT fenced (sandbox off)")
    assert sys.executable  # the worker runs this interpreter


def test_a_query_past_the_time_limit_is_an_error_naming_the_files(tables: Path) -> None:
    from yggdrasil.loki.files import Root
    from yggdrasil.loki.tables import TableReader

    pl.DataFrame({"n": range(3000)}).write_csv(tables / "n.csv")
    reader = TableReader(Root.at(tables), limits=WorkerLimits(wall_seconds=1))
    box = Toolbox()
    box.add(Tool("query_table", "q", {"sql": "sql", "rows": "rows"}, reader.query_table))
    try:
        out = box.call("query_table", {"sql": "SELECT sum(a.n * b.n * c.n * d.qty) AS s "
                                              "FROM 'n.csv' a CROSS JOIN 'n.csv' b CROSS JOIN "
                                              "'n.csv' c CROSS JOIN 'ok.csv' d"})
        assert out == ("ERROR: the query over 'n.csv', 'ok.csv' stopped: it took more than 1 s "
                       "(the table worker's time limit)"), out
        read = reader.read_table("ok.csv")  # the next call starts a fresh worker
        assert (read.path, read.row_count, read.columns) == ("ok.csv", 2, ["city", "qty"])
    finally:
        reader.close()


def test_a_cancelled_call_stops_the_worker_and_the_next_starts_a_fresh_one(
        tables: Path) -> None:
    """A call waiting on the worker honours its cancel event (Toolbox.cancel, close(), an
    MCP cancellation): the worker is stopped instead of running to its time limit."""
    import threading

    from yggdrasil.loki.sandbox import cancel_scope

    worker = FencedWorker("worker_probe", [str(tables)], name="table worker",
                          limits=WorkerLimits(wall_seconds=120))
    event, outcome = threading.Event(), []

    def call() -> None:
        with cancel_scope(event):
            try:
                worker.call("sleep", {"seconds": 100})
            except WorkerFailed as exc:
                outcome.append(str(exc))

    try:
        assert worker.call("echo", {"text": "started"}) == {"ok": "started"}
        caller = threading.Thread(target=call)
        caller.start()
        wchan = Path(f"/proc/{worker.pid()}/wchan")
        deadline = time.monotonic() + 30
        while "nanosleep" not in wchan.read_text():  # the worker is in the sleep call
            assert time.monotonic() < deadline and caller.is_alive(), outcome
            time.sleep(0.01)
        event.set()
        caller.join(30)
        assert not caller.is_alive()  # not the 100 s sleep nor the 120 s limit
        assert outcome == ["it was cancelled (the table worker was stopped)"]
        assert worker.call("echo", {"text": "again"}) == {"ok": "again"}
    finally:
        worker.close()


@pytest.mark.parametrize("memfd", [True, False], ids=["memfd", "unlinked-temp-file"])
def test_downloaded_bytes_reach_the_worker_with_or_without_memfd(
        root: Path, memfd: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from yggdrasil.loki.files import Root
    from yggdrasil.loki.tables import TableReader

    if not memfd:  # macOS has no memfd_create (nor Landlock): an unlinked file instead
        monkeypatch.delattr(os, "memfd_create")
    reader = TableReader(Root.at(root), sandbox=memfd)
    try:
        out = reader.preview_bytes(b"city,n\nOslo,7\nLima,9\n", "page.csv", ".csv", "", 5)
    finally:
        reader.close()
    assert (out.path, out.format, out.rows) == ("page.csv", "csv", [["Oslo", 7], ["Lima", 9]])
    assert not [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("loki-download-")]
