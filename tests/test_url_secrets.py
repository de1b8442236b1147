"""A password or token in an engine's URL is never shown or stored: not in the run's events,
the transcript, stderr, an engine error, `loki config`, nor the engine's own ``base_url``."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from cli_run import loki
from fake_servers import openai_error, openai_reply, serve
from yggdrasil.loki.engines import shown_url
from yggdrasil.loki.errors import EngineError

SECRETS = ("S3cretPW", "T0kenQ", "SigV4abc")


@pytest.mark.parametrize(("url", "shown"), [
    ("http://alice:S3cretPW@host/v1", "http://***@host/v1"),
    ("https://T0kenQ@host/v1", "https://***@host/v1"),
    ("http://a:p@ss@w0rd@host:8/v1", "http://***@host:8/v1"),  # a raw @ inside the password
    ("https://host/v1?api_key=T0kenQ&model=m", "https://host/v1?api_key=***&model=m"),
    ("https://h/o?X-Amz-Signature=SigV4abc&X-Amz-Date=1",
     "https://h/o?X-Amz-Signature=***&X-Amz-Date=1"),
    ("https://h/cb#access_token=T0kenQ&state=s", "https://h/cb#access_token=***&state=s"),
    ("at http://u:S3cretPW@h/v1 (model m): bad", "at http://***@h/v1 (model m): bad"),
    ("git@github.com:owner/repo.git", "git@github.com:owner/repo.git"),
    ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
])
def test_shown_url_masks_userinfo_and_credential_parameters(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def _leaks(*texts: str) -> list[str]:
    return [s for s in SECRETS if any(s in t for t in texts)]


def test_loki_do_never_writes_the_password(root: Path) -> None:
    state = root.parent / "loki-state"
    with serve() as server:
        server.queue(openai_reply(calls=[("write_file", {"path": "a.txt", "content": "x\n"})]),
                     openai_error(401, "Incorrect API key provided"))
        url = server.url.replace("http://", "http://alice:S3cretPW@") + "/v1"
        done = loki(root.parent, "do", "make a", "--root", str(root), "--engine", "openai",
                    "--base-url", url, "--model", "gpt-fake", "--yes", "--events", "-")
        assert server.requests, "the engine reached the server"
    assert done.returncode == 1, done.stderr
    assert "at http://***@127.0.0.1:" in done.stderr  # the start line and the engine error
    assert "engine error" in done.stderr
    stored = [p.read_bytes().decode("utf-8", "replace") for p in state.rglob("*") if p.is_file()]
    assert any('"base_url": "http://***@127.0.0.1:' in t for t in stored)  # the transcript
    assert not _leaks(done.stdout, done.stderr, *stored)
    started = [json.loads(line) for line in done.stdout.splitlines() if "run_started" in line]
    assert started and started[0]["base_url"].startswith("http://***@127.0.0.1:")


def test_an_unreachable_engine_error_hides_the_token(tmp_path: Path) -> None:
    from yggdrasil.loki.engines.openai import OpenAIEngine

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        engine = OpenAIEngine("m", base_url=f"http://u:S3cretPW@127.0.0.1:{port}/v1?key=T0kenQ",
                              timeout=5)
        assert not _leaks(engine.base_url)
        with pytest.raises(EngineError) as caught:
            engine.complete([{"role": "user", "content": "hi"}], system="s")
    assert "could not reach" in str(caught.value) and not _leaks(str(caught.value))


def test_loki_config_masks_a_url_setting(tmp_path: Path) -> None:
    (tmp_path / "loki.toml").write_text("")
    import os
    os.environ["LOKI_BASE_URL"] = "https://alice:S3cretPW@h/v1?api_key=T0kenQ"
    try:
        shown = loki(tmp_path, "config", "--root", str(tmp_path))
    finally:
        del os.environ["LOKI_BASE_URL"]
    assert shown.returncode == 0, shown.stderr
    assert 'agent.base_url = "https://***@h/v1?api_key=***"' in shown.stdout
    assert not _leaks(shown.stdout, shown.stderr)
