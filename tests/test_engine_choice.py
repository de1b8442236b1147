"""Choosing an engine: explicit, LOKI_* variables, vendor keys, a local Ollama, or a clear error."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

import yggdrasil.loki.engine as engine_module
from fake_servers import (
    FakeModelServer,
    openai_reply,
)
from yggdrasil.loki import Loki
from yggdrasil.loki.engine import ENGINES, choose_engine, register_engine
from yggdrasil.loki.engines.anthropic import AnthropicEngine
from yggdrasil.loki.engines.openai import OpenAIEngine
from yggdrasil.loki.engines.scripted import ScriptedEngine
from yggdrasil.loki.errors import EngineConfigError


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_loki_variables_choose_and_configure(monkeypatch: pytest.MonkeyPatch,
                                             server: FakeModelServer, root: Path) -> None:
    monkeypatch.setenv("LOKI_ENGINE", "openai")
    monkeypatch.setenv("LOKI_MODEL", "qwen-local")
    monkeypatch.setenv("LOKI_BASE_URL", f"{server.url}/v1")
    server.queue(openai_reply("hello from the env"))
    loki = Loki()
    assert isinstance(loki.engine, OpenAIEngine)
    assert (loki.engine.model, loki.engine.base_url) == ("qwen-local", f"{server.url}/v1/")
    assert loki.act("hi", root=root).answer == "hello from the env"
    assert server.posts()[0]["model"] == "qwen-local"


def test_a_base_url_alone_means_an_openai_compatible_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOKI_BASE_URL", "http://127.0.0.1:8000/v1")
    engine = choose_engine(model="llama")
    assert isinstance(engine, OpenAIEngine) and engine.name == "openai"


def test_scripted_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                       root: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"done": True, "answer": "scripted"}) + "\n")
    monkeypatch.setenv("LOKI_ENGINE", "scripted")
    monkeypatch.setenv("LOKI_MODEL", str(script))
    result = Loki().act("x", root=root)
    assert (result.engine, result.model, result.answer) == ("scripted", str(script), "scripted")


def test_explicit_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOKI_ENGINE", "anthropic")
    monkeypatch.setenv("LOKI_MODEL", "from-env")
    engine = choose_engine("openai", api_key="k")
    assert isinstance(engine, OpenAIEngine) and engine.model == "gpt-4.1"


def test_vendor_keys_anthropic_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    assert isinstance(choose_engine(), OpenAIEngine)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-a")
    engine = choose_engine()
    assert isinstance(engine, AnthropicEngine) and engine.model == "claude-sonnet-4-5"


def test_a_local_ollama_is_found_and_used(monkeypatch: pytest.MonkeyPatch,
                                          server: FakeModelServer, root: Path) -> None:
    server.ollama_models = ["qwen2.5-coder:7b", "llama3.2:3b"]
    monkeypatch.setenv("OLLAMA_HOST", server.url.removeprefix("http://"))
    server.queue(openai_reply("hi from ollama"))
    loki = Loki()
    assert (loki.engine.name, loki.engine.model) == ("ollama", "qwen2.5-coder:7b")
    assert loki.act("hi", root=root).answer == "hi from ollama"
    post = next(r for r in server.requests if r.method == "POST")
    assert post.path == "/v1/chat/completions" and post.headers["authorization"] == "Bearer ollama"


def test_an_ollama_without_models_says_how_to_pull(monkeypatch: pytest.MonkeyPatch,
                                                   server: FakeModelServer) -> None:
    server.ollama_models = []
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    with pytest.raises(EngineConfigError, match="ollama pull"):
        Loki()


def test_nothing_configured_says_exactly_how(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{closed_port()}")
    with pytest.raises(EngineConfigError) as info:
        Loki()
    message = str(info.value)
    for hint in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ollama serve", "LOKI_BASE_URL",
                 "Loki(engine="):
        assert hint in message


@pytest.mark.parametrize(("engine", "match"), [
    ("gpt5", "unknown engine 'gpt5'; known engines: anthropic, ollama, openai, scripted"),
    ("scripted", "needs a script"),
    ("openai", "OPENAI_API_KEY"),
])
def test_config_errors(engine: str, match: str) -> None:
    with pytest.raises(EngineConfigError, match=match):
        Loki(engine)


def test_an_object_without_complete_is_refused() -> None:
    with pytest.raises(EngineConfigError, match="no complete"):
        Loki(object())  # type: ignore[arg-type]


def test_outside_engines_register_like_built_in_ones(monkeypatch: pytest.MonkeyPatch,
                                                     root: Path, tmp_path: Path) -> None:
    monkeypatch.setattr(engine_module, "ENGINES", dict(ENGINES))
    seen: dict[str, Any] = {}

    def factory(**settings: Any) -> ScriptedEngine:
        seen.update(settings)
        return ScriptedEngine([{"done": True, "answer": "mine"}])

    register_engine("mine", factory)
    result = Loki("mine", model="m1", timeout=5).act("x", root=root)
    assert result.answer == "mine" and seen["model"] == "m1" and seen["timeout"] == 5
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"done": True, "answer": "by path"}) + "\n")
    register_engine("lazy", "yggdrasil.loki.engines.scripted:ScriptedEngine")
    assert Loki("lazy", model=str(script)).act("x", root=root).answer == "by path"
