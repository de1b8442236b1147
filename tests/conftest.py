from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_servers import FakeModelServer, clear_engine_env, serve
from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


@pytest.fixture(autouse=True)
def _no_engine_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real model API through the developer's own keys or settings."""
    clear_engine_env(monkeypatch)


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    """A fake model API on 127.0.0.1 speaking the OpenAI and Anthropic wire formats."""
    with serve() as fake:
        yield fake


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An agent root with a sibling folder outside it that must stay unreachable."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP SECRET\n")
    (tmp_path / "root-secrets").mkdir()  # shares a name prefix with the root
    (tmp_path / "root-secrets" / "key.txt").write_text("PREFIX SECRET\n")
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.fixture
def box(root: Path) -> Toolbox:
    return filesystem_toolbox(root)
