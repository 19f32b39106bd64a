from __future__ import annotations

import asyncio
import tomllib
from importlib import resources

import pytest

from pfar.config import Config
from pfar.llm.retry import (
    AttemptFailed,
    ErrorKind,
    ProviderCallFailed,
    RetryPolicy,
    call_with_retries,
    next_wait,
)
from pfar.runners.templates import TimeoutSection

POLICY = RetryPolicy(backoff=(0.0, 1.0, 5.0), overloaded_wait=30.0, max_retries=3)


def test_timeouts_and_server_errors_back_off_immediately_then_1s_then_5s() -> None:
    for kind in (ErrorKind.timeout, ErrorKind.server, ErrorKind.stream_cut):
        assert [next_wait(POLICY, kind, n) for n in range(4)] == [0.0, 1.0, 5.0, None]


def test_rate_limits_honour_retry_after() -> None:
    assert next_wait(POLICY, ErrorKind.rate_limited, 0, retry_after=7.5) == 7.5
    assert next_wait(POLICY, ErrorKind.rate_limited, 1, retry_after=None) == 1.0
    assert next_wait(POLICY, ErrorKind.rate_limited, 3, retry_after=2.0) is None


def test_overloaded_waits_30s_at_most_three_times() -> None:
    assert [next_wait(POLICY, ErrorKind.overloaded, n) for n in range(4)] == [30.0] * 3 + [None]


def test_bad_requests_are_never_retried() -> None:
    assert next_wait(POLICY, ErrorKind.bad_request, 0) is None


def test_a_refused_key_is_never_retried() -> None:
    assert next_wait(POLICY, ErrorKind.unauthorized, 0) is None


# -- which timeout bounds what -------------------------------------------------------------


class Waits:
    """The retry loop's sleep: recorded, not slept (the point is which waits happen)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def _shipped_llm_seconds(template: str) -> float:
    text = (
        resources.files("pfar.kernel")
        .joinpath("assets", "templates", f"{template}.toml")
        .read_text(encoding="utf-8")
    )
    timeouts = tomllib.loads(text).get("timeouts", {})
    return float(timeouts.get("llm_seconds", TimeoutSection().llm_seconds))


def test_the_shipped_defaults_let_one_overloaded_answer_be_retried() -> None:
    """With the shipped config and every shipped template, one 529 then an answer succeeds:
    the template's llm_seconds bounds each attempt, and the 30 s overload wait between
    attempts is not counted against it (it was, and a `note` task failed)."""
    retry = Config().llm.retry
    policy = RetryPolicy(
        tuple(retry.backoff_seconds), retry.overloaded_wait_seconds, retry.max_retries
    )
    assert policy.overloaded_wait == 30.0 and policy.max_retries >= 1
    for template in ("note", "run_command"):
        per_attempt = _shipped_llm_seconds(template)
        # an answer still streaming is never cut off before a silent server would be
        assert per_attempt >= Config().llm.timeout_seconds, template
        attempts = 0

        async def attempt() -> str:
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                raise AttemptFailed(ErrorKind.overloaded, "HTTP 529 overloaded_error")
            return "answer"

        waits = Waits()
        got = asyncio.run(call_with_retries("anthropic", policy, waits, attempt, str, per_attempt))
        assert (got, waits.seconds) == ("answer", [30.0]), template


def test_the_attempt_bound_is_per_attempt_and_a_slow_attempt_is_a_retried_timeout() -> None:
    attempts = 0

    async def attempt() -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await asyncio.sleep(10)  # far past the bound: cut off, retried
        return "answer"

    waits = Waits()
    got = asyncio.run(call_with_retries("openai", POLICY, waits, attempt, str, 0.05))
    assert (got, attempts, waits.seconds) == ("answer", 2, [0.0])


def test_every_attempt_too_slow_fails_as_a_timeout_naming_the_bound() -> None:
    async def attempt() -> str:
        await asyncio.sleep(10)
        return "never"

    policy = RetryPolicy(backoff=(0.0,), overloaded_wait=0.0, max_retries=1)
    with pytest.raises(ProviderCallFailed, match=r"timeout after 2 attempts: .*within 0.05s"):
        asyncio.run(call_with_retries("openai", policy, Waits(), attempt, str, 0.05))
