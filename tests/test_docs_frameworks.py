"""The framework programs of the docs run as written, against a fake model server.

Every ```python block of ``DOCS`` is a complete program: it is saved to a file and run in a
subprocess from a project folder, with the model server given the way the page tells the
reader to (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``OPENAI_MODEL``; for ADK
``GOOGLE_API_KEY`` and google-genai's ``GOOGLE_GEMINI_BASE_URL``). The server is the fake
one of the engine tests, answering in the wire format each framework speaks: a call to
``read_file``, then the answer. The test checks what the program printed and that the
tool really ran (the file's lines came back to the model).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fake_servers import FakeModelServer, gemini_reply, openai_reply

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "frameworks.md"
GUARD = 180  # seconds: a guard against a hang, not a timing
NOTES = "The release is on Friday.\n"
READ = ("read_file", {"path": "notes.txt"})

# The module each framework's program imports, and how its model ends a run.
FRAMEWORKS = {
    "agents": [openai_reply(calls=[READ], id_prefix="a"), openai_reply("done")],
    "langchain": [openai_reply(calls=[READ], id_prefix="a"), openai_reply("done")],
    "pydantic_ai": [openai_reply(calls=[READ], id_prefix="a"), openai_reply("done")],
    # a ToolCallingAgent ends only when the model calls final_answer
    "smolagents": [openai_reply(calls=[READ], id_prefix="a"),
                   openai_reply(calls=[("final_answer", {"answer": "done"})], id_prefix="b")],
    "google.adk": [gemini_reply(calls=[READ]), gemini_reply("done")],
}


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """Each ```python block of a Markdown file: (its first line number, its code)."""
    found = re.finditer(r"^```python\n(.*?)^```$", path.read_text(), re.M | re.S)
    text = path.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in found]


def framework_of(code: str) -> str:
    """The framework a program imports (the first one of FRAMEWORKS it names)."""
    for module in FRAMEWORKS:
        if re.search(rf"^(from|import) {re.escape(module)}\b", code, re.M):
            return module
    raise AssertionError(f"a python block of {DOCS.name} imports no known framework:\n{code}")


BLOCKS = python_blocks(DOCS) if DOCS.exists() else []


def test_the_page_has_one_program_per_framework() -> None:
    assert sorted(framework_of(code) for _, code in BLOCKS) == sorted(FRAMEWORKS)


@pytest.mark.parametrize(("line", "code"), BLOCKS,
                         ids=[f"line{line}-{framework_of(code)}" for line, code in BLOCKS])
def test_the_program_runs_as_written(line: int, code: str, server: FakeModelServer,
                                     tmp_path: Path) -> None:
    framework = framework_of(code)
    if importlib.util.find_spec(framework.split(".")[0]) is None:
        pytest.skip(f"{framework} is not installed")
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text(NOTES)
    program = tmp_path / "program.py"
    program.write_text(code)
    server.queue(*FRAMEWORKS[framework])
    done = subprocess.run(
        [sys.executable, str(program)], cwd=project, capture_output=True, text=True,
        timeout=GUARD, env=_env(server, tmp_path))
    assert done.returncode == 0, f"line {line} ({framework}) failed:\n{done.stderr[-3000:]}"
    assert done.stdout.strip().splitlines()[-1] == "done", done.stdout + done.stderr[-2000:]
    posts = server.posts()
    assert len(posts) == 2, [r.path for r in server.requests]
    assert "1\\tThe release is on Friday." in json.dumps(posts[1])  # the tool ran
    paths = {r.path for r in server.requests if r.method == "POST"}
    if framework == "google.adk":
        assert all(p.endswith(":generateContent") for p in paths), paths
    else:
        assert paths == {"/v1/chat/completions"}, paths  # not the Responses API


def _env(server: FakeModelServer, tmp_path: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
            "PYTHONPATH": str(REPO / "src"),
            "OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-test",
            "OPENAI_MODEL": "gpt-fake", "OPENAI_AGENTS_DISABLE_TRACING": "1",
            "GOOGLE_API_KEY": "test-key", "GOOGLE_GEMINI_BASE_URL": server.url,
            "GOOGLE_GENAI_USE_VERTEXAI": "false", "GEMINI_MODEL": "gemini-fake",
            # frameworks that report usage home must not try to (no network here)
            "ANONYMIZED_TELEMETRY": "false", "DO_NOT_TRACK": "1"}

