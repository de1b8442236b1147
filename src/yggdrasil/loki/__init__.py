"""yggdrasil.loki: the agent's toolbox and its reason -> act -> observe loop.

Importing this package does no work: names are loaded on first use. It imports only
what the interpreter has loaded at startup (no ``from __future__``): ``python -m
yggdrasil.loki`` runs it before ``__main__`` can take the working folder off ``sys.path``.
"""

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["ActResult", "ActStep", "Loki", "Tool", "Toolbox", "filesystem_toolbox"]

_LAZY = {
    "ActResult": "yggdrasil.loki.agent",
    "ActStep": "yggdrasil.loki.agent",
    "Loki": "yggdrasil.loki.agent",
    "Tool": "yggdrasil.loki.tools",
    "Toolbox": "yggdrasil.loki.tools",
    "filesystem_toolbox": "yggdrasil.loki.tools",
}

if TYPE_CHECKING:
    from .agent import ActResult, ActStep, Loki
    from .tools import Tool, Toolbox, filesystem_toolbox


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'yggdrasil.loki' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
