"""One retry policy for every engine: bounded backoff, honouring Retry-After.

An engine translates each failure of its SDK into an :class:`EngineError` (see
``errors.py``); the class says whether another attempt can help. :func:`retry_call`
retries the retryable ones (429, 5xx, dropped connections, timeouts) and raises the rest
at once (auth, bad request, context length). The SDKs' own retries are switched off
(``max_retries=0``) so this is the only policy and a run never waits twice.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ..errors import (
    EngineAuthError,
    EngineError,
    EngineRateLimited,
    EngineRequestError,
    EngineUnavailable,
)
from ._urls import shown_url

log = logging.getLogger("yggdrasil.loki.engine")

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a failing engine call.

    ``attempts`` counts the first try. Without a Retry-After the wait doubles from
    ``base_delay`` (with jitter), and no wait is longer than ``max_delay``.
    """

    attempts: int = 5
    base_delay: float = 1.0
    max_delay: float = 60.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry ``attempt``: the server's ``retry_after`` (capped at
        ``max_delay``) when it said one, else exponential backoff with jitter."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_delay))
        backoff = self.base_delay * 2 ** (attempt - 1)
        return min(backoff, self.max_delay) * random.uniform(0.5, 1.0)

    def wait_for(self, error: EngineError, attempt: int) -> float | None:
        """Seconds to wait before trying again after ``error`` ended try ``attempt``; None
        to give up (a retryable error's message then says after how many attempts)."""
        if not error.retryable:
            return None
        if attempt >= self.attempts:
            error.args = (f"{error} (gave up after {attempt} attempts)",)
            return None
        return self.delay(attempt, error.retry_after)


def retry_call(
    call: Callable[[], T], policy: RetryPolicy,
    translate: Callable[[Exception], EngineError | None],
) -> T:
    """``call()``, retried while ``translate`` maps its failure to a retryable EngineError.

    A failure that ``translate`` does not recognise (returns None) is not ours to judge
    and propagates unchanged.
    """
    attempt = 1
    while True:
        try:
            return call()
        except EngineError:
            raise
        except Exception as exc:
            error = translate(exc)
            if error is None:
                raise
            # the SDK's message, the server's body and ``where`` may all quote the URL
            error.args = (shown_url(str(error)),)
            wait = policy.wait_for(error, attempt)
            if wait is None:
                raise error from exc
            log.warning("%s; attempt %d of %d, retrying in %.1fs",
                        error, attempt, policy.attempts, wait)
            policy.sleep(wait)
            attempt += 1


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return float(millis) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def status_error(
    status: int, message: str, *, where: str, headers: Mapping[str, str] | None = None,
    key_hint: str = "",
) -> EngineError:
    """The EngineError an HTTP status means, the same way for every engine."""
    text = f"{where} answered {status}: {message}"
    if status in (401, 403):
        return EngineAuthError(f"{text}. The API key was refused; {key_hint}".rstrip("; "))
    if status == 429:
        return EngineRateLimited(text, retry_after=parse_retry_after(headers))
    if status in (408, 409) or status >= 500:
        return EngineUnavailable(text, retry_after=parse_retry_after(headers))
    if status == 404:
        return EngineRequestError(f"{text}. Check the model name and the base URL")
    return EngineRequestError(text)
