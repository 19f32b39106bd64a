"""Anthropic SDK and transport errors as the `AttemptFailed` pfar's retry table acts on.

Errors (seed 001, Phase 3):

* timeout or connection failure before the answer starts, 5xx  -> retry after the backoff
* 429 -> wait `retry-after-ms` / `retry-after` (seconds or an HTTP date), else the backoff
* 401 -> `ProviderCallFailed(unauthorized)` at once: the key is wrong (the kernel names
  the secret to fix)
* 400 and other 4xx -> `ProviderCallFailed(bad_request)` at once, with the API's message
* 529, or an `overloaded_error` event inside the stream -> `policy.overloaded_wait`
* the stream ends (or the connection drops) before message_stop -> the partial rule
  (see `provider`)

A connection that breaks mid-stream surfaces as the SDK's HTTP library's own
`TransportError` (`httpx`, or `httpx2` in newer SDKs), not as an SDK exception. That
library is the SDK's to choose and is not one of pfar's dependencies, so it is
recognised by its class name (`is_transport_error`) rather than imported.
"""

from __future__ import annotations

import anthropic

from ..retry import AttemptFailed, ErrorKind, retry_after_seconds


def status_failure(exc: anthropic.APIStatusError) -> AttemptFailed:
    status = exc.status_code
    error_type = exc.type or ""
    message = exc.api_message or str(exc)
    where = f"HTTP {status}" if status >= 400 else "error event in the stream"
    detail = f"{where} {error_type or 'error'}: {message}"
    if exc.request_id:
        detail += f" (request-id {exc.request_id})"
    if status == 529 or error_type == "overloaded_error":
        return AttemptFailed(ErrorKind.overloaded, detail)
    if status == 429 or error_type == "rate_limit_error":
        return AttemptFailed(
            ErrorKind.rate_limited, detail, retry_after_seconds(exc.response.headers)
        )
    if status == 408:
        return AttemptFailed(ErrorKind.timeout, detail)
    if status == 401 or error_type == "authentication_error":
        return AttemptFailed(ErrorKind.unauthorized, detail)
    if status >= 500 or (status < 400 and error_type in ("api_error", "")):
        return AttemptFailed(ErrorKind.server, detail)
    return AttemptFailed(ErrorKind.bad_request, detail)


def is_transport_error(exc: BaseException) -> bool:
    """An `httpx.TransportError` or `httpx2.TransportError`, whichever the SDK uses."""
    return any(
        cls.__name__ == "TransportError" and cls.__module__.split(".")[0] in ("httpx", "httpx2")
        for cls in type(exc).__mro__
    )


def describe_connection(exc: anthropic.APIConnectionError) -> str:
    cause = exc.__cause__
    reason = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
    if isinstance(exc, anthropic.APITimeoutError):
        return f"no answer in time{reason}"
    return f"could not connect{reason}"
