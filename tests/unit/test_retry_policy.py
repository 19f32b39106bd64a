from __future__ import annotations

from pfar.llm.retry import ErrorKind, RetryPolicy, next_wait

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
