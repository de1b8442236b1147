"""The public import paths stay where users find them, whatever moves behind them."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")

PUBLIC = {
    "yggdrasil.loki": ["Loki", "ActResult", "ActStep", "Tool", "Toolbox", "filesystem_toolbox"],
    "yggdrasil.loki.tools": ["Tool", "Toolbox", "filesystem_toolbox", "sandbox_status"],
    "yggdrasil.loki.agent": ["Loki", "ActResult", "ActStep"],
    "yggdrasil.loki.engine": ["Engine", "Completion", "ToolCall", "Message", "Decision",
                              "NotADecision", "RetryPolicy", "ENGINES", "DEFAULT_TIMEOUT",
                              "choose_engine", "create_engine", "register_engine",
                              "decisions_from", "parse_decision"],
    "yggdrasil.loki.engines.openai": ["OpenAIEngine", "ollama_engine"],
    "yggdrasil.loki.engines.anthropic": ["AnthropicEngine"],
    "yggdrasil.loki.engines.scripted": ["ScriptedEngine"],
    "yggdrasil.loki.errors": ["LokiError", "ToolError", "PathError", "Refused",
                              "ToolDefinitionError", "EngineError", "EngineConfigError"],
    "yggdrasil.loki.fleet": ["Fleet", "Task", "TaskResult", "FleetStatus", "read_run",
                             "write_report"],
    "yggdrasil.io": ["preview_table", "scan_table", "query_tables", "TableError", "FORMATS"],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_names_import_from_their_documented_module(module: str) -> None:
    loaded = importlib.import_module(module)
    for name in PUBLIC[module]:
        assert getattr(loaded, name) is not None, f"{module}.{name}"


def test_only_public_modules_sit_at_the_top_of_the_package() -> None:
    top = Path(SRC) / "yggdrasil" / "loki"
    modules = sorted(p.name for p in top.glob("*.py"))
    assert modules == ["__init__.py", "__main__.py", "agent.py", "engine.py", "errors.py",
                       "tools.py"]


def test_importing_the_package_loads_nothing_else() -> None:
    code = ("import sys, yggdrasil.loki; "
            "print(sorted(m for m in sys.modules if m.startswith('yggdrasil.loki.')))")
    done = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": SRC},
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_console_script_and_module_entry_points() -> None:
    from yggdrasil.loki.cli import main

    assert callable(main)
    done = subprocess.run([sys.executable, "-m", "yggdrasil.loki", "--help"],
                          env={"PYTHONPATH": SRC}, capture_output=True, text=True, check=True)
    assert "loki" in done.stdout and "exit codes:" in done.stdout
    pyproject = (Path(SRC).parent / "pyproject.toml").read_text()
    assert 'loki = "yggdrasil.loki.cli:main"' in pyproject
    script = shutil.which("loki")  # installed by `pip install -e .`, as README says
    assert script is not None, "the loki console script is not on PATH"
    done = subprocess.run([script, "--help"], capture_output=True, text=True, check=True)
    assert "exit codes:" in done.stdout


def test_toolbox_names_lists_the_tools_in_catalog_order(tmp_path: Path) -> None:
    from yggdrasil.loki.tools import filesystem_toolbox

    box = filesystem_toolbox(tmp_path, read_only=True)
    assert box.names() == ["list_dir", "read_file", "find", "grep", "outline", "find_symbol",
                           "repo_map", "read_table", "query_table", "diagnostics"]
    assert box.names() == [tool.name for tool in box]


EXPORTS = {  # each public module's __all__, exactly: a new public name is a decision
    "yggdrasil.loki.agent": ["ActResult", "ActStep", "Loki", "Session"],
    "yggdrasil.loki.engine": ["DEFAULT_TIMEOUT", "ENGINES", "Completion", "Decision", "Engine",
                              "Message", "NotADecision", "RetryPolicy", "ToolCall",
                              "choose_engine", "create_engine", "decisions_from",
                              "parse_decision", "register_engine"],
    "yggdrasil.loki.fleet": ["BACKENDS", "Fleet", "FleetStatus", "RunReport", "Task",
                             "TaskResult", "iter_results", "read_run", "write_report"],
    "yggdrasil.loki.mcp": ["MAX_MESSAGE_BYTES", "HttpApp", "Sdk", "allowed_hosts",
                           "allowed_origins", "build_server", "call_result", "http_app",
                           "load_sdk", "mcp_tool", "new_token", "run_call", "serve",
                           "serve_http"],
    "yggdrasil.loki.adapters": ["ToolFailedError", "google_adk", "langchain", "openai_agents",
                                "pydantic_ai", "smolagents"],
    "yggdrasil.io": ["FORMATS", "Cell", "PreviewData", "QueryData", "QueryResult", "TableError",
                     "TablePreview", "TableRef", "find_table_refs", "human_size",
                     "preview_table", "preview_text", "query_tables", "query_text",
                     "scan_table"],
    "yggdrasil.loki.errors": ['ContextLengthError', 'EngineAuthError', 'EngineConfigError', 'EngineError', 'EngineRateLimited', 'EngineRequestError', 'EngineTimeout', 'EngineUnavailable', 'LokiError', 'PathError', 'Refused', 'ToolDefinitionError', 'ToolError', 'ToolsUnsupportedError'],
}


@pytest.mark.parametrize("module", sorted(EXPORTS))
def test_public_all_is_pinned(module: str) -> None:
    loaded = importlib.import_module(module)
    assert loaded.__all__ == EXPORTS[module]
    assert all(getattr(loaded, name, None) is not None for name in loaded.__all__)
