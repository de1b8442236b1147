"""The error hierarchy of yggdrasil.loki.

    LokiError
     ├── ToolError        the model asked for something a tool cannot do; Toolbox.call
     │    │               renders it as an observation, "ERROR: <message>"
     │    ├── PathError   a path escapes the root, is missing, or is not a regular file
     │    └── Refused     the user declined a confirmation: "REFUSED: user declined to ..."
     ├── ToolDefinitionError   a Tool was built wrong (caught when it is made, not called)
     └── EngineError      the brain failed (see yggdrasil.loki.engine)
          ├── EngineConfigError    no engine configured, unknown name, missing SDK or model
          ├── EngineAuthError      401/403: the key is missing, wrong or not allowed
          ├── EngineRequestError   the request itself is wrong (400, 404, 422): not retried
          │    ├── ContextLengthError      the conversation is longer than the model takes
          │    └── ToolsUnsupportedError   the endpoint rejects native tool calling
          ├── EngineRateLimited    429: retried, honouring Retry-After
          ├── EngineUnavailable    5xx, overload, dropped connection: retried
          └── EngineTimeout        no answer within the timeout: retried

Foreign errors (OSError, polars, SDK errors) are translated into these at the edge,
with ``raise ... from exc``, so callers catch one family.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ContextLengthError",
    "EngineAuthError",
    "EngineConfigError",
    "EngineError",
    "EngineRateLimited",
    "EngineRequestError",
    "EngineTimeout",
    "EngineUnavailable",
    "LokiError",
    "PathError",
    "Refused",
    "ToolDefinitionError",
    "ToolError",
    "ToolsUnsupportedError",
]


class LokiError(Exception):
    """Base of every error this package raises on purpose."""


class ToolError(LokiError):
    """A tool could not do what the model asked; the message says what is allowed.

    ``category`` names the kind of failure for programs (``path``, ``denied``,
    ``argument``...; the ``ErrorResult`` a call answers with carries it), ``hint`` what
    to do instead when it is said apart, ``rule`` the command rule that refused.
    """

    prefix = "ERROR"
    category = "tool"

    def __init__(self, *args: object, category: str | None = None, hint: str = "",
                 rule: str | None = None) -> None:
        super().__init__(*args)
        if category is not None:
            self.category = category
        self.hint = hint
        self.rule = rule

    def observation(self) -> str:
        """What the model reads: ``ERROR: <message>`` (``REFUSED: ...`` for a refusal)."""
        return f"{self.prefix}: {self}"


class PathError(ToolError):
    """A path escapes the root, does not exist, or is not a regular file or folder."""

    category = "path"


class Refused(ToolError):
    """The user declined a destructive operation through ``confirm`` (or, with
    ``message``, it needed a confirmation nobody can give here)."""

    prefix = "REFUSED"
    category = "refused"

    def __init__(self, verb: str, path: str, message: str = "", *,
                 rule: str | None = None) -> None:
        super().__init__(message or f"user declined to {verb} {path}", rule=rule)
        self.verb = verb
        self.path = path


class ToolDefinitionError(LokiError, TypeError):
    """A Tool whose name, params or run function do not fit together."""


class EngineError(LokiError):
    """The engine (model behind an API) failed; subclasses say whether to retry.

    ``retryable`` tells the retry helper whether another attempt can help and
    ``retry_after`` is the server's requested wait in seconds, when it named one. When
    ``Loki.act`` stops on an engine error it attaches the partial run as ``result``.
    """

    retryable = False

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.result: Any = None


class EngineConfigError(EngineError):
    """No engine could be set up; the message says how to configure one."""


class EngineAuthError(EngineError):
    """The API refused the credentials (401/403); retrying cannot help."""


class EngineRequestError(EngineError):
    """The API rejected the request itself (bad request, unknown model)."""


class ContextLengthError(EngineRequestError):
    """The conversation no longer fits the model's context window."""


class ToolsUnsupportedError(EngineRequestError):
    """The endpoint or model does not accept native tool definitions."""


class EngineRateLimited(EngineError):
    """429: too many requests; retried after the server's Retry-After."""

    retryable = True


class EngineUnavailable(EngineError):
    """5xx, overload or a dropped connection: worth another attempt."""

    retryable = True


class EngineTimeout(EngineError):
    """The engine did not answer within the timeout."""

    retryable = True
