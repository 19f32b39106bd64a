"""The error table of the loop design (seed 001, Phase 3), as data and one decision.

| error                    | what happens                                         |
|--------------------------|------------------------------------------------------|
| network timeout, 5xx     | retry: immediately, then after 1 s, then after 5 s    |
| 429 rate limited         | wait Retry-After (or the next backoff), requeue       |
| 400 bad request          | fail the task with the reason                         |
| 401 unauthorized         | fail the task at once: the key is wrong, not the call |
| 529 / overloaded         | wait 30 s, retry (at most 3)                          |
| stream cut off           | keep the partial answer if more than half arrived,    |
|                          | else retry                                            |

After the last retry the task fails with the error's details. The waits come
from config, so tests run fast.

A request's `attempt_timeout` bounds each attempt (the request and its whole
answer); an attempt that runs out of it is a timeout like any other, retried by
the table. The waits between attempts are never counted against it: a 30 s
overload wait cannot use up the time of the answer that follows it.

A streamed call is told of each retry (`events.Retrying`, before the wait), so whoever
shows its text knows that what the failed attempt streamed is void.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TypeVar

from ..errors import ProviderError
from .events import EventSink, Retrying

T = TypeVar("T")


class ErrorKind(StrEnum):
    timeout = "timeout"  # no answer in time, or the connection failed
    server = "server"  # 5xx other than 529
    rate_limited = "rate_limited"  # 429
    bad_request = "bad_request"  # 400 and other 4xx: the request itself is wrong
    unauthorized = "unauthorized"  # 401: the API key was refused; retrying cannot help
    overloaded = "overloaded"  # 529, or an "overloaded_error" event mid-stream
    stream_cut = "stream_cut"  # the stream ended before message_stop


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Waits before attempt 2, 3, ...; `overloaded_wait` replaces them for 529."""

    backoff: tuple[float, ...] = (0.0, 1.0, 5.0)
    overloaded_wait: float = 30.0
    max_retries: int = 3


class ProviderCallFailed(ProviderError):
    """The provider could not answer after the retries the error table allows."""

    code = "provider_call_failed"

    def __init__(self, provider: str, kind: ErrorKind, detail: str, attempts: int) -> None:
        super().__init__(
            f"{provider}: {kind.value} after {attempts} attempt{'s' if attempts != 1 else ''}: "
            f"{detail}"
        )
        self.provider, self.kind, self.detail, self.attempts = provider, kind, detail, attempts


def next_wait(
    policy: RetryPolicy, kind: ErrorKind, retries_done: int, retry_after: float | None = None
) -> float | None:
    """Seconds to wait before the next attempt, or None: give up (fail the task)."""
    if kind in (ErrorKind.bad_request, ErrorKind.unauthorized):
        return None
    if retries_done >= policy.max_retries:
        return None
    if kind is ErrorKind.overloaded:
        return policy.overloaded_wait
    if kind is ErrorKind.rate_limited and retry_after is not None:
        return max(0.0, retry_after)
    return policy.backoff[min(retries_done, len(policy.backoff) - 1)]


class AttemptFailed(Exception):
    """One attempt failed: what kind, what the server said, and any Retry-After."""

    def __init__(self, kind: ErrorKind, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.kind, self.detail, self.retry_after = kind, detail, retry_after


async def call_with_retries(
    provider: str,
    policy: RetryPolicy,
    sleep: Callable[[float], Awaitable[object]],
    attempt: Callable[[], Awaitable[T]],
    scrub: Callable[[str], str],
    attempt_timeout: float | None = None,
    on_event: EventSink | None = None,
) -> T:
    """Run `attempt` until it answers or the error table says to give up; each attempt
    gets `attempt_timeout` seconds of its own. `on_event` hears of each retry."""
    retries = 0
    while True:
        try:
            return await _bounded(attempt, attempt_timeout)
        except AttemptFailed as failed:
            wait = next_wait(policy, failed.kind, retries, failed.retry_after)
            if wait is None:
                raise ProviderCallFailed(
                    provider, failed.kind, scrub(failed.detail), retries + 1
                ) from None
            retries += 1
            if on_event is not None:
                on_event(Retrying(retries, failed.kind.value, scrub(failed.detail), wait))
            await sleep(wait)


async def _bounded(attempt: Callable[[], Awaitable[T]], seconds: float | None) -> T:
    if seconds is None:
        return await attempt()
    bound = asyncio.timeout(seconds)
    try:
        async with bound:
            return await attempt()
    except TimeoutError:
        if not bound.expired():  # a TimeoutError of the attempt's own, not this bound's
            raise
        raise AttemptFailed(
            ErrorKind.timeout, f"no complete answer within {seconds:g}s (llm_seconds)"
        ) from None


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms`, or `retry-after` (seconds or an HTTP date)."""
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if math.isfinite(seconds):
            return max(0.0, seconds)
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
