"""The journal's timestamps: RFC 3339 text in UTC, which sorts in the order it happened."""

from __future__ import annotations

import time
from datetime import UTC, datetime

# the last whole second formatted, and its text: one tuple, swapped whole, so a
# stamp made on another thread never pairs one second with another's text
_second: list[tuple[int, str]] = [(-1, "")]


def now_rfc3339() -> str:
    """UTC, microseconds, 'Z': sorts as text in the order it happened."""
    now = time.time()
    seconds = int(now)
    # a journal write stamps several times a millisecond: format each second once
    last = _second[0]
    if last[0] != seconds:
        last = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
        _second[0] = last
    return f"{last[1]}.{int((now - seconds) * 1_000_000):06d}Z"


def parse_rfc3339(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
