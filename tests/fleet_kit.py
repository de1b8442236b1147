"""What the fleet tests share: small real git repositories, scripts, a batch, a model server.

Everything is real: repositories made with git in tmp dirs, the scripted engine replaying
per-task scripts (``scripts/{id}.jsonl``), and, for the rate gate, an HTTP server on
127.0.0.1 speaking the OpenAI chat-completions wire format to the real SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fake_servers import Reply, openai_error, openai_reply, served
from yggdrasil.loki.fleet import Task, TaskResult

BINARY = bytes(range(256)) * 4  # a file the patch must carry as binary
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def make_repo(path: Path, files: dict[str, str], message: str = "init") -> str:
    """A git repository at ``path`` with ``files`` committed; the commit's hash."""
    if not (path / ".git").exists():
        path.mkdir(parents=True)
        git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-qm", message)
    return git(path, "rev-parse", "HEAD").strip()


def write_script(folder: Path, task_id: str, *decisions: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{task_id}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in decisions))


def done(answer: str = "done") -> dict[str, Any]:
    return {"thought": "finished", "done": True, "answer": answer}


def run(command: str, timeout: float = 60) -> dict[str, Any]:
    return {"thought": "run it", "tool": "run", "args": {"command": command, "timeout": timeout}}


@dataclass
class Batch:
    """Five tasks over two git repositories and one plain folder, and what each must give."""

    root: Path
    tasks: list[Task]
    scripts: Path
    calc_first: str = ""
    greet_first: str = ""
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return str(self.scripts / "{id}.jsonl")


def make_batch(root: Path) -> Batch:
    calc, greet, notes = root / "calc", root / "greet", root / "notes"
    calc_sha = make_repo(calc, {"calc.py": "def add(a, b):\n    return a - b\n",
                                "test_calc.py": "from calc import add\nassert add(2, 3) == 5\n",
                                ".gitignore": "*.local\n"})
    greet_first = make_repo(greet, {"greet.txt": "hi\n"})
    make_repo(greet, {"greet.txt": "hi there\n"}, "second")  # HEAD moves on; the task pins
    notes.mkdir()
    (notes / "notes.txt").write_text("draft\n")
    scripts = root / "scripts"
    write_script(scripts, "calc-fix",
                 {"tool": "edit_file", "args": {"path": "calc.py", "old": "a - b", "new": "a + b"}},
                 {"tool": "write_file", "args": {"path": "NOTES.md", "content": "fixed\n"}},
                 run("python3 -c \"import sys; open('data.bin','wb').write(bytes(range(256))*4)\""),
                 done("fixed add"))
    write_script(scripts, "calc-noop", done("nothing to do"))
    write_script(scripts, "calc-delete", run("rm test_calc.py && mkdir sub && echo x > sub/new.txt"),
                 done())
    write_script(scripts, "greet-old",
                 {"tool": "edit_file", "args": {"path": "greet.txt", "old": "hi", "new": "hello"}},
                 done())
    write_script(scripts, "notes-plain",
                 {"tool": "edit_file", "args": {"path": "notes.txt", "old": "draft", "new": "fixed"}},
                 done())
    verify = "python3 test_calc.py"
    tasks = [
        Task(id="calc-fix", repo=str(calc), prompt="fix add", commit=calc_sha, verify=verify),
        Task(id="calc-noop", repo=str(calc), prompt="look", verify=verify),
        Task(id="calc-delete", repo=str(calc), prompt="remove the test",
             verify="test ! -e test_calc.py && test -f sub/new.txt"),
        Task(id="greet-old", repo=str(greet), prompt="say hello", commit=greet_first,
             verify="grep -qx hello greet.txt"),
        Task(id="notes-plain", repo=str(notes), prompt="finish the notes",
             verify="grep -qx fixed notes.txt"),
    ]
    expected = {
        "calc-fix": {"files": ["NOTES.md", "calc.py", "data.bin"], "verified": True, "steps": 3},
        "calc-noop": {"files": [], "verified": False, "steps": 0},
        "calc-delete": {"files": ["sub/new.txt", "test_calc.py"], "verified": True, "steps": 1},
        "greet-old": {"files": ["greet.txt"], "verified": True, "steps": 1},
        "notes-plain": {"files": ["notes.txt"], "verified": True, "steps": 1},
    }
    return Batch(root, tasks, scripts, calc_sha, greet_first, expected)


def apply_to_fresh(batch: Batch, result: TaskResult, where: Path) -> Path:
    """A fresh checkout of the task's repository at its commit with the patch applied."""
    task = next(t for t in batch.tasks if t.id == result.id)
    if result.commit:
        subprocess.run(["git", "clone", "-q", task.repo, str(where)], check=True)
        git(where, "checkout", "-q", result.commit)
    else:
        subprocess.run(["cp", "-a", task.repo, str(where)], check=True)
    if result.patch:
        subprocess.run(["git", "apply", "-"], cwd=where, input=result.patch.encode(), check=True,
                       env={**os.environ, "GIT_DIR": str(where / ".no-git")})
    return where


def check_batch(batch: Batch, results: list[TaskResult], scratch: Path) -> None:
    """Every task done, with the files, verify outcome and patch content it must have."""
    by_id = {r.id: r for r in results}
    assert sorted(by_id) == sorted(batch.expected)
    for task_id, want in batch.expected.items():
        result = by_id[task_id]
        assert result.status == "done", (task_id, result.reason)
        assert len(result.attempts) == 1 and result.stop_reason == "done", (task_id, result.reason)
        assert sorted(result.files_changed) == want["files"], task_id
        assert result.verified is want["verified"], (task_id, result.verify_output)
        assert result.steps == want["steps"]
    assert by_id["greet-old"].commit == batch.greet_first
    assert by_id["notes-plain"].commit == ""
    fixed = apply_to_fresh(batch, by_id["calc-fix"], scratch / "calc-fix")
    assert (fixed / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (fixed / "data.bin").read_bytes() == BINARY
    assert (fixed / "NOTES.md").read_text() == "fixed\n"
    deleted = apply_to_fresh(batch, by_id["calc-delete"], scratch / "calc-delete")
    assert not (deleted / "test_calc.py").exists() and (deleted / "sub/new.txt").read_text() == "x\n"
    old = apply_to_fresh(batch, by_id["greet-old"], scratch / "greet-old")
    assert (old / "greet.txt").read_text() == "hello\n"  # against the pinned commit, not HEAD
    plain = apply_to_fresh(batch, by_id["notes-plain"], scratch / "notes-plain")
    assert (plain / "notes.txt").read_text() == "fixed\n"
    assert by_id["calc-noop"].patch == ""


def check_outputs(out: Path, results: list[TaskResult]) -> None:
    """results.jsonl: one whole line per task; preds.json; a transcript per task."""
    lines = (out / "results.jsonl").read_text().splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    assert sorted(ids) == sorted(r.id for r in results)  # each exactly once
    preds = json.loads((out / "preds.json").read_text())
    assert sorted(p["instance_id"] for p in preds) == sorted(ids)
    by_id = {r.id: r for r in results}
    for pred in preds:
        assert set(pred) == {"instance_id", "model_name_or_path", "model_patch"}
        assert pred["model_patch"] == by_id[pred["instance_id"]].patch
    for result in results:
        transcript = out / result.id / "transcript.jsonl"
        assert result.transcript == f"{result.id}/transcript.jsonl"
        kinds = [json.loads(line)["type"] for line in transcript.read_text().splitlines()]
        assert kinds[0] == "start" and kinds[-1] == "end"


def comparable(result: TaskResult) -> dict[str, Any]:
    """A result without what legitimately differs between two runs: the time taken, the
    id of its checkpoints, and the scratch paths a failing verify's traceback names (its
    exit code stays)."""
    data = result.to_dict()
    data.pop("seconds")
    data.pop("checkpoints")  # a run id of each attempt's own (their diffs stay)
    data["attempts"] = [sorted(a) for a in data["attempts"]]  # their node and times differ
    data["verify_output"] = data["verify_output"].split("\n", 1)[0]
    return data


def leftovers(cache: Path) -> list[str]:
    """Working copies or scratch folders still in the fleet cache."""
    work = cache / "work"
    return sorted(p.name for p in work.iterdir() if not p.name.startswith(".")) if work.exists() else []


def marked_processes(settle: float = 3.0) -> list[int]:
    """Processes still carrying a fleet attempt's marker (commands of a killed attempt),
    whose working folder is in this test's tmp (other test runs on the machine have their
    own), after giving a SIGKILL that was just sent up to ``settle`` seconds to land."""
    deadline = time.monotonic() + settle
    while True:
        found = _marked_here()
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def marked_running(program: str) -> list[int]:
    """Marked processes (see ``marked_processes``) running ``program`` (by its name)."""
    found = []
    for pid in _marked_here():
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if os.path.basename(argv0.decode(errors="replace")) == program:
            found.append(pid)
    return found


def _marked_here() -> list[int]:
    base = os.environ.get("LOKI_TEST_BASETEMP", "")  # set by conftest for this session
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:
            continue
        if b"LOKI_FLEET_ATTEMPT=" in environ and (not base or cwd.startswith(base)):
            found.append(int(name))
    return found


def wait_for(predicate: Any, timeout: float = 30.0, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"waited {timeout}s in vain")


def attempt_pids(cache: Path, task_id: str) -> list[int]:
    """The pids that own a live scratch folder of ``task_id`` (from their owner files)."""
    pids = []
    for owner in (cache / "work").glob(f"{task_id}.*/owner"):
        try:
            pids.append(int(json.loads(owner.read_text())["pid"]))
        except (OSError, ValueError):
            continue
    return pids


# --- a model endpoint for the rate gate: OpenAI wire format, with rules -------------------

class ChatServer(ThreadingHTTPServer):
    """Answers every conversation with one write_file call, then a final answer.

    Records each request's arrival time and the requests in flight; ``capacity`` answers
    429 (Retry-After ``retry_after``) to a request that arrives while that many are being
    served; ``first_429`` answers 429 to the very first request. ``delay`` is the
    "thinking" time of each answer.
    """

    daemon_threads = True

    def __init__(self, *, delay: float = 0.0, capacity: int | None = None,
                 first_429: bool = False, retry_after: float = 1.0) -> None:
        super().__init__(("127.0.0.1", 0), _ChatHandler)
        self.delay, self.capacity, self.retry_after = delay, capacity, retry_after
        self.first_429 = first_429
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self.arrivals: list[float] = []
        self.limited: list[float] = []  # when each 429 was sent

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def decide(self) -> tuple[Reply | None, bool]:
        """(a 429 to send at once, or None) and whether the request counts as in flight."""
        with self.lock:
            now = time.monotonic()
            self.arrivals.append(now)
            first = len(self.arrivals) == 1
            if (self.first_429 and first) or (self.capacity is not None
                                              and self.in_flight >= self.capacity):
                self.limited.append(now)
                return openai_error(429, "rate limited",
                                    headers={"retry-after": str(self.retry_after)}), False
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return None, True


class _ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ChatServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        refusal, counted = self.server.decide()
        try:
            if refusal is not None:
                self._send(refusal)
                return
            time.sleep(self.server.delay)
            acted = any(m.get("role") == "tool" for m in body["messages"])
            reply = (openai_reply("all done") if acted else
                     openai_reply(None, [("write_file", {"path": "out.txt", "content": "x\n"})]))
            self._send(reply)
        finally:
            if counted:
                with self.server.lock:
                    self.server.in_flight -= 1

    def _send(self, reply: Reply) -> None:
        data = json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def chat_server(**rules: Any) -> Iterator[ChatServer]:
    with served(ChatServer(**rules)) as server:
        yield server


def chat_tasks(root: Path, count: int) -> list[Task]:
    """``count`` tasks on one small repository, for an engine behind a ChatServer."""
    repo = root / "chat-repo"
    if not repo.exists():
        make_repo(repo, {"README.md": "hello\n"})
    return [Task(id=f"chat-{i}", repo=str(repo), prompt="write out.txt") for i in range(count)]
