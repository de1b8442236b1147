"""The one retry policy: what is retried, how long it waits, and when it gives up."""

from __future__ import annotations

import email.utils
import time

import pytest

from yggdrasil.loki.engines import RetryPolicy, parse_retry_after, retry_call, status_error
from yggdrasil.loki.errors import (
    EngineAuthError,
    EngineError,
    EngineRateLimited,
    EngineRequestError,
    EngineUnavailable,
)
from yggdrasil.loki.loop._conversation import Conversation


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None
    later = email.utils.formatdate(time.time() + 120, usegmt=True)
    assert 100 < (parse_retry_after({"retry-after": later}) or 0) <= 120


def test_delays_are_bounded() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0)
    assert policy.delay(1, 2.0) == 2.0 and policy.delay(1, 600.0) == 5.0
    assert 0.5 <= policy.delay(1, None) <= 1.0 and 2.0 <= policy.delay(3, None) <= 4.0
    assert policy.delay(10, None) <= 5.0


@pytest.mark.parametrize(("status", "kind"), [
    (401, EngineAuthError), (403, EngineAuthError), (400, EngineRequestError),
    (404, EngineRequestError), (422, EngineRequestError), (429, EngineRateLimited),
    (500, EngineUnavailable), (503, EngineUnavailable), (529, EngineUnavailable),
    (408, EngineUnavailable),
])
def test_status_meanings(status: int, kind: type[EngineError]) -> None:
    error = status_error(status, "m", where="the x engine", headers={"retry-after": "2"})
    assert type(error) is kind
    assert error.retryable == (kind in (EngineRateLimited, EngineUnavailable))


def test_retry_call_retries_only_what_can_heal() -> None:
    waits: list[float] = []
    policy = RetryPolicy(attempts=4, base_delay=0, sleep=waits.append)
    failures = iter([RuntimeError("503"), RuntimeError("429")])

    def flaky() -> str:
        error = next(failures, None)
        if error is not None:
            raise error
        return "ok"

    def translate(exc: Exception) -> EngineError | None:
        if str(exc) == "429":
            return EngineRateLimited("429", retry_after=7)
        return EngineUnavailable(str(exc))

    assert retry_call(flaky, policy, translate) == "ok" and waits == [0.0, 7.0]
    calls: list[int] = []

    def refused() -> str:
        calls.append(1)
        raise RuntimeError("401")

    with pytest.raises(EngineAuthError):
        retry_call(refused, policy, lambda exc: EngineAuthError("no"))
    assert calls == [1]
    def broken() -> str:
        raise KeyError("x")

    with pytest.raises(KeyError):  # not an engine failure: not ours to judge
        retry_call(broken, policy, lambda exc: None)


def test_shrink_gives_up_the_newest_observations_last() -> None:
    conv = Conversation("system", budget=10_000, keep_recent=2)
    conv.add({"role": "user", "content": "task"})
    for n in (1, 2):
        conv.add_observation({"role": "tool", "tool_call_id": f"c{n}", "content": "z" * 4000},
                             step=n, tool="read_file")
    assert conv.fit() == 0  # within budget
    assert conv.shrink()  # only the kept ones are left: they go too
    assert conv.messages[1]["content"].startswith("[elided to save context: the 4000-character")
    assert not Conversation("s", budget=10).shrink()  # nothing at all to elide
