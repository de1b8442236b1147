"""What the openai and anthropic SDKs raise alike, translated once.

Both SDKs share one generated error hierarchy (APITimeoutError, APIConnectionError,
APIResponseValidationError, APIStatusError with a JSON ``body``); each engine passes its
SDK module here and only handles the status codes that mean something vendor-specific.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import EngineError, EngineTimeout, EngineUnavailable


def transport_error(sdk: Any, exc: Exception, where: str, timeout: float) -> EngineError | None:
    """A timeout, a dropped connection or a malformed body; None for anything else."""
    if isinstance(exc, sdk.APITimeoutError):
        return EngineTimeout(f"{where} did not answer within {timeout}s")
    if isinstance(exc, sdk.APIConnectionError):
        return EngineUnavailable(f"could not reach {where}: {exc}")
    if isinstance(exc, sdk.APIResponseValidationError):
        return EngineUnavailable(f"{where} sent a malformed response: {exc}")
    return None


def error_message(exc: Any) -> str:
    """The human message inside an API error body (``{"error": {"message": ...}}``)."""
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", exc))
