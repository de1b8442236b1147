"""The error hierarchy of yggdrasil.loki.

    LokiError
     ├── ToolError        the model asked for something a tool cannot do; Toolbox.call
     │    │               renders it as an observation, "ERROR: <message>"
     │    ├── PathError   a path escapes the root, is missing, or is not a regular file
     │    └── Refused     the user declined a confirmation: "REFUSED: user declined to ..."
     ├── ToolDefinitionError   a Tool was built wrong (caught when it is made, not called)
     └── EngineError      the brain failed (see yggdrasil.loki.engine)

Foreign errors (OSError, polars, SDK errors) are translated into these at the edge,
with ``raise ... from exc``, so callers catch one family.
"""

from __future__ import annotations


class LokiError(Exception):
    """Base of every error this package raises on purpose."""


class ToolError(LokiError):
    """A tool could not do what the model asked; the message says what is allowed."""

    prefix = "ERROR"

    def observation(self) -> str:
        return f"{self.prefix}: {self}"


class PathError(ToolError):
    """A path escapes the root, does not exist, or is not a regular file or folder."""


class Refused(ToolError):
    """The user declined a destructive operation through ``confirm``."""

    prefix = "REFUSED"

    def __init__(self, verb: str, path: str) -> None:
        super().__init__(f"user declined to {verb} {path}")
        self.verb = verb
        self.path = path


class ToolDefinitionError(LokiError, TypeError):
    """A Tool whose name, params or run function do not fit together."""


class EngineError(LokiError):
    """The engine (model behind an API) failed; subclasses say whether to retry."""
