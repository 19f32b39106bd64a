"""The task list's filter and cursor as a caller gives them, checked once: a refusal
names the field as the control socket, the CLI and the console call it (`since`,
`until`, `template`, `text`, `cursor`), and nothing is read."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime

from ...errors import BadRequest
from ...journal.records import rfc3339
from ...journal.task_pages import TaskCursor, TaskFilter

MAX_TEXT = 200  # a piece of a task's text to look for, not a document
MAX_TEMPLATE = 200
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def checked(wanted: TaskFilter) -> TaskFilter:
    """`wanted` with its times as the journal writes them (UTC, microseconds, 'Z'); a
    time may be RFC 3339 with its zone, or a date alone (that day's first moment, UTC).

    Raises:
        BadRequest: naming `since`, `until`, `template` or `text`.
    """
    since = _moment("since", wanted.created_since)
    until = _moment("until", wanted.created_until)
    if since is not None and until is not None and until <= since:
        raise BadRequest("until", f"{wanted.created_until!r} is not after since")
    template = wanted.template_id
    if template is not None and not 0 < len(template) <= MAX_TEMPLATE:
        raise BadRequest("template", f"must be 1 to {MAX_TEMPLATE} characters")
    text = wanted.text
    if text is not None and len(text) > MAX_TEXT:
        raise BadRequest("text", f"is {len(text)} characters; at most {MAX_TEXT} are looked for")
    return dataclasses.replace(
        wanted,
        created_since=None if since is None else rfc3339(since),
        created_until=None if until is None else rfc3339(until),
        text=text or None,
    )


def cursor(text: str | None) -> TaskCursor | None:
    """The cursor a page gave (None: the first page).

    Raises:
        BadRequest: naming `cursor`, for any text no page gave.
    """
    if text is None:
        return None
    try:
        return TaskCursor.decode(text)
    except ValueError as exc:
        raise BadRequest("cursor", f"{exc}: start again from the first page") from None


def _moment(name: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    # a day alone is its first moment, in UTC; a refusal quotes what was given
    whole = text + "T00:00:00Z" if _DATE.fullmatch(text) else text
    try:
        moment = datetime.fromisoformat(whole.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadRequest(
            name, f"{text[:40]!r} is no RFC 3339 time (e.g. 2030-05-01T12:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise BadRequest(name, f"{text[:40]!r} has no time zone (add Z for UTC)")
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-05:00 is past the last year there is
        raise BadRequest(name, f"{text[:40]!r} is beyond the year 9999 in UTC") from None
