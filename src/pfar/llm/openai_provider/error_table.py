"""OpenAI SDK errors as the `AttemptFailed` pfar's retry table acts on.

* no answer in time / connection failed before the stream began -> timeout: backoff
* 5xx (not overloaded)                                 -> server: backoff
* 429                                                  -> rate_limited: Retry-After
* 529, or a 503 / in-stream error that says "overloaded" -> overloaded: overloaded_wait
* 401                                                  -> unauthorized: fail at once
* 400 and other 4xx (408 counts as a timeout)          -> bad_request: fail at once
* stream cut off                                       -> see `provider`
"""

from __future__ import annotations

import openai

from ..retry import AttemptFailed, ErrorKind, retry_after_seconds


def classify(exc: openai.APIError, *, chunks: int = 0) -> AttemptFailed:
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = f"HTTP {status}: {_server_message(exc)}"
        if status == 429:
            return AttemptFailed(
                ErrorKind.rate_limited, detail, retry_after_seconds(exc.response.headers)
            )
        if status == 529 or (status >= 500 and _says_overloaded(exc)):
            return AttemptFailed(ErrorKind.overloaded, detail)
        if status >= 500:
            return AttemptFailed(ErrorKind.server, detail)
        if status == 408:
            return AttemptFailed(ErrorKind.timeout, detail)
        if status == 401:
            return AttemptFailed(ErrorKind.unauthorized, detail)
        return AttemptFailed(ErrorKind.bad_request, detail)
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        what = "timed out" if isinstance(exc, openai.APITimeoutError) else "connection failed"
        if chunks:
            return AttemptFailed(ErrorKind.stream_cut, f"stream {what} after {chunks} chunk(s)")
        return AttemptFailed(ErrorKind.timeout, f"request {what}")
    # an error event inside a 200 stream
    detail = f"error in stream: {_server_message(exc)}"
    if _says_overloaded(exc):
        return AttemptFailed(ErrorKind.overloaded, detail)
    return AttemptFailed(ErrorKind.server, detail)


def _server_message(exc: openai.APIError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return exc.message


def _says_overloaded(exc: openai.APIError) -> bool:
    words = [exc.message, str(exc.type or ""), str(exc.code or "")]
    return any("overload" in w.lower() for w in words)
