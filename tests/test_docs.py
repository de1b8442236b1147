"""Every code block of the documentation runs, as written (no snippet drifts again).

The pages are docs/**/*.md (but docs/_incoming, drafts not yet in the site) and
README.md; a new page under docs/ is collected without a change here.

- Each ```python block is one test: it runs in a fresh copy of the sample project of
  tests/docs_kit.py as its working folder, against a model server on 127.0.0.1 (see
  there), and must not raise.
- Each ```bash block with `loki ...` lines is one test: those lines run in order, in
  one fresh sample project (also at ~/src/app), as a shell would run them, and each must
  exit 0. Other lines (pip install, claude mcp add) are not run.
- Each ```text block that starts with `>>> tool(arg=value, ...)` is a transcript of tool
  calls: each call runs on `filesystem_toolbox(".")` in a fresh sample project, and the
  lines under it must be its observation's lines. A `...` line stands for any lines, a
  line ending in `...` for any line starting with what precedes it; a call with no lines
  under it must not answer `ERROR:`.
- A block that truly cannot run here says why in a marker on the line right above its
  fence, which the site does not show and this test reports as a skip:

      <!-- not run: it reaches the internet -->

  and a block that a test of its own runs (with assertions on what it printed) names it:

      <!-- tested by tests/test_docs_frameworks.py -->

Other fences name their language (text, json, console for a terminal session shown with its
output, ...) and are not run.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

import docs_kit
from cli_run import SRC, loki
from docs_kit import AnswerEverything, make_project
from fake_servers import clear_engine_env, served
from yggdrasil.loki import engine as engine_module
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md",
         *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_incoming" not in p.parts)]
FENCE = re.compile(r"^(\s*)(`{3,})(\S*)")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(.+?)\s*-->\s*$")
TESTED_BY = re.compile(r"^\s*<!--\s*tested by\s+(tests/\S+\.py)\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the first line of code
    lang: str
    code: str
    not_run: str | None
    tested_by: str | None = None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page; a fence indented under a list item counts too."""
    found: list[Block] = []
    lines = page.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.groups()
        end = next(j for j in range(i + 1, len(lines))
                   if lines[j].strip() == ticks and lines[j].startswith(indent))
        code = "\n".join(line[len(indent):] for line in lines[i + 1:end]) + "\n"
        before = next((line for line in reversed(lines[:i]) if line.strip()), "")
        marker, elsewhere = NOT_RUN.match(before), TESTED_BY.match(before)
        found.append(Block(page, i + 2, lang, code, marker.group(1) if marker else None,
                           elsewhere.group(1) if elsewhere else None))
        i = end + 1
    return found


def loki_lines(code: str) -> list[str]:
    """The command lines of a shell block that start with `loki` (continuations joined)."""
    lines = code.replace("\\\n", " ").split("\n")
    return [line.strip() for line in lines if line.strip().startswith("loki ")]


ALL = [b for page in PAGES for b in blocks(page)]
PYTHON = [b for b in ALL if b.lang in ("python", "py")]
TRANSCRIPTS = [b for b in ALL if b.lang == "text" and b.code.startswith(">>> ")]
SHELL = [b for b in ALL if b.lang in ("bash", "sh") and loki_lines(b.code)]


def test_the_pages_have_python_blocks() -> None:
    """The collector finds what it should (a broken pattern would pass every page)."""
    assert len(PYTHON) >= 20
    assert {b.page.name for b in PYTHON} >= {"README.md", "getting-started.md", "agent.md"}


def test_every_fence_names_its_language() -> None:
    """A bare fence could hide a Python block from the tests."""
    bare = [b.name for b in ALL if not b.lang]
    assert bare == [], f"say ```python, ```bash, ```text ... at {bare}"


def test_few_blocks_are_not_run() -> None:
    """The marker is for what truly cannot run here; it must stay rare."""
    not_run = [f"{b.name} ({b.not_run})" for b in ALL if b.not_run]
    assert len(not_run) <= 12, not_run


def test_blocks_tested_elsewhere_name_a_test_that_reads_their_page() -> None:
    for block in (b for b in ALL if b.tested_by):
        test = ROOT / block.tested_by
        assert test.is_file(), f"{block.name} names {block.tested_by}, which does not exist"
        assert block.page.name in test.read_text(), f"{test.name} does not read {block.name}"


def test_readme_is_a_front_page() -> None:
    """README is short, and keeps the set-up commands people and CI copy."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert "pip install -e '.[all]' && loki tools --root . && loki call read_file" in readme
    assert "pip install -e '.[dev]' && python -m pytest -q" in readme
    # what a new user needs before those: which Python, a checkout, a venv, how long
    for said in ("Python 3.11 or newer", "`yggdrasil-loki`", "git clone", "python3 -m venv",
                 "minutes"):
        assert said in readme, said
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11" and project["name"] == "yggdrasil-loki"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install --quiet -e '.[dev]'" in ci and "python3 -m pytest -q" in ci


def _documented_events() -> dict[str, list[tuple[str, str]]]:
    """The events table of docs/agent.md: type -> [(field, what the page says of it)]."""
    page = (ROOT / "docs" / "agent.md").read_text()
    table = page[page.index("| type | when | fields |"):]
    rows: dict[str, list[tuple[str, str]]] = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("| `"):
            break
        kind, _, fields = (cell.strip() for cell in line.strip("|").split(" | "))
        said = []
        for item in re.findall(r"`(\w+)`( \([^()]*\))?(?:, |$)", fields):
            said.append((item[0], item[1].strip(" ()")))
        rows[kind.strip("`")] = said
    return rows


def test_the_events_page_and_the_events_agree(tmp_path: Path) -> None:
    """Every field the page lists is in the event a real run emits (and no other), and a
    field the page calls a count ("how many") is a number, not the messages or schemas."""
    from yggdrasil.loki import Loki
    from yggdrasil.loki.engines.scripted import ScriptedEngine
    from yggdrasil.loki.loop._transcript import EVENT_KINDS

    (tmp_path / "cli.py").write_text("print('hi')\n")
    events: list[dict[str, object]] = []
    engine = ScriptedEngine([{"thought": "look", "tool": "read_file", "args": {"path": "cli.py"}},
                             "not a decision",
                             {"thought": "fine", "done": True, "answer": "ok"}])
    Loki(engine).act("check cli.py", root=str(tmp_path), on_event=events.append)
    documented = _documented_events()
    assert set(documented) == set(EVENT_KINDS)
    request = dict(documented["request"])
    assert "how many" in request["messages"] and "how many" in request["tools"]
    common = {"type", "run", "time", "elapsed"}
    optional = {"error"}  # finished, on an engine failure
    seen = set()
    for event in events:
        kind = str(event["type"])
        seen.add(kind)
        fields = dict(documented[kind])
        assert set(event) - common == set(fields) - (optional - set(event)), kind
        for name, said in fields.items():
            if "how many" in said:
                assert type(event[name]) is int, (kind, name, event[name])
    assert seen == set(EVENT_KINDS)
    assert all(type(e["tools"]) is list for e in events if e["type"] == "run_started")


def test_the_fleets_page_shows_the_sample_files_its_commands_run_on() -> None:
    """The tasks file and the answer the fleets page shows are the sample project's
    (its first commands run on them, by test_loki_commands_run and test_python_block_runs)."""
    page = (ROOT / "docs" / "fleets.md").read_text()
    texts = re.findall(r"^```text\n(.*?)^```$", page, re.M | re.S)
    assert texts[0] == docs_kit.TASKS and len(texts[0].splitlines()) == 3
    assert texts[1] == docs_kit.ANSWER
    first_heading = page.index("\n## ")
    assert page.index("loki fleet tasks.jsonl") < first_heading  # first on the page


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh sample project as the working folder, a home of its own (with the project
    at ~/src/app too), a system temp folder apart from it (so edits there are confirmed,
    as in a real checkout) and the engines' SDKs pointed at a local model server."""
    project, home, scratch = tmp_path / "project", tmp_path / "home", tmp_path / "system-tmp"
    for folder in (project, home / "src" / "app", home / ".cache" / "pip", scratch):
        folder.mkdir(parents=True)
    make_project(project)
    make_project(home / "src" / "app")
    bin_dir = tmp_path / "bin"  # `loki` is this checkout's, whatever is installed
    bin_dir.mkdir()
    (bin_dir / "loki").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m yggdrasil.loki "$@"\n')
    (bin_dir / "loki").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(SRC))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    clear_engine_env(monkeypatch)
    monkeypatch.setattr(engine_module, "ENGINES", dict(engine_module.ENGINES))  # a page's
    monkeypatch.chdir(project)                          # register_engine stays in its test
    with served(AnswerEverything()) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-docs")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs")
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        yield project


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.name)
def test_python_block_runs(block: Block, project: Path) -> None:
    if block.not_run:
        pytest.skip(f"not run: {block.not_run}")
    if block.tested_by:
        pytest.skip(f"run by {block.tested_by}")
    # the line numbers of a traceback are the page's
    code = compile("\n" * (block.line - 1) + block.code, str(block.page), "exec")
    namespace: dict[str, object] = {"__name__": "__docs__"}
    try:
        exec(code, namespace)
    finally:
        for value in namespace.values():
            if isinstance(value, Toolbox):
                value.close()


@pytest.mark.parametrize("block", SHELL, ids=lambda b: b.name)
def test_loki_commands_run(block: Block, project: Path) -> None:
    if block.not_run:
        pytest.skip(f"not run: {block.not_run}")
    if block.tested_by:
        pytest.skip(f"run by {block.tested_by}")
    for line in loki_lines(block.code):
        done = run_line(line, project)
        if done.returncode == 127 and "command not found" in done.stderr:
            continue  # a helper the page pipes into (jq) is not installed here
        assert done.returncode == 0, (
            f"{block.name}: `{line}` exited {done.returncode}\n{done.stdout[-2000:]}\n"
            f"{done.stderr[-2000:]}")


# bash's own words for a line: `loki` a function that prints its arguments
WORDS = "loki() { printf '%s\\0' \"$@\"; }\n"


def run_line(line: str, project: Path) -> subprocess.CompletedProcess[str]:
    """A page's `loki ...` line run as a user's shell would. A line that pipes or
    redirects runs whole in bash (with the project's `loki`); any other is one `loki`
    command: bash expands its words (quotes, ~, $(...)), the CLI runs them in this
    process (cli_run.loki: a Python start-up saved)."""
    shell = line.split(" # ", 1)[0]
    if not any(mark in shell for mark in ("|", ">", "<", ";", "&")):
        words = subprocess.run(["bash", "-c", WORDS + line], cwd=project, capture_output=True,
                               stdin=subprocess.DEVNULL, timeout=120)
        assert words.returncode == 0, (line, words.stderr)
        return loki(project.parent, *words.stdout.decode().split("\0")[:-1])
    return subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=project,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)


def transcript(code: str) -> list[tuple[str, dict[str, object], list[str]]]:
    """(tool, args, expected lines) per `>>> tool(...)` line of a transcript block."""
    calls: list[tuple[str, dict[str, object], list[str]]] = []
    for line in code.rstrip("\n").split("\n"):
        if line.startswith(">>> "):
            call = ast.parse(line[4:], mode="eval").body
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name), line
            args = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
            calls.append((call.func.id, args, []))
        else:
            calls[-1][2].append(line)
    return [(tool, args, _trim(lines)) for tool, args, lines in calls]


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def shown(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` reads as ``expected``: `...` is any lines, `text...` a prefix."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head == "...":
        return any(shown(rest, actual[i:]) for i in range(len(actual) + 1))
    if not actual:
        return False
    matches = actual[0].startswith(head[:-3]) if head.endswith("...") else actual[0] == head
    return matches and shown(rest, actual[1:])


def test_transcript_matching_can_fail() -> None:
    assert shown(["a", "...", "d..."], ["a", "b", "c", "done"])
    assert not shown(["a", "c"], ["a", "b", "c"])
    assert not shown(["a"], ["a", "b"])
    assert not shown(["d..."], ["x"])


@pytest.mark.parametrize("block", TRANSCRIPTS, ids=lambda b: b.name)
def test_transcript_shows_what_the_tools_answer(block: Block, project: Path) -> None:
    if block.not_run:
        pytest.skip(f"not run: {block.not_run}")
    with filesystem_toolbox(".") as box:
        for tool, args, expected in transcript(block.code):
            answer = box.call(tool, args)
            if expected:
                assert shown(expected, _trim(answer.split("\n"))), (
                    f"{block.name}: {tool}({args}) answered:\n{answer}")
            else:
                assert not answer.startswith("ERROR:"), f"{block.name}: {answer}"
