from __future__ import annotations

from pathlib import Path

import pytest

from yggdrasil.loki.tools import Toolbox, filesystem_toolbox


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
