"""The console's task list: its filter form read from the query (a GET: a filtered
list is a link the owner can keep), a page of the operator API's task_page, and per
row the holds the task's state allows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from ..errors import BadRequest
from ..journal import TaskKind, TaskState
from ..journal.task_pages import TaskFilter
from ..kernel.holds import allowed_holds

if TYPE_CHECKING:
    from .app import Console

PAGE = 50  # tasks a page of the list shows, unless the query asks for fewer or more
MAX_PAGE = 200
_FIELDS = ("state", "kind", "template", "since", "until", "text", "limit")


@dataclass(frozen=True, slots=True)
class ListQuery:
    """The filter form as given (empty fields left out), and where the page starts."""

    given: dict[str, str]
    wanted: TaskFilter
    cursor: str | None
    limit: int = PAGE

    def link(self, **more: str) -> str:
        """/tasks with this filter, and `more`."""
        return f"/tasks?{urlencode({**self.given, **more})}"


def read_query(request: Request) -> ListQuery:
    """The list's query parameters, each checked.

    Raises:
        BadRequest: naming the parameter (`state`, `kind`, `since`, `until`, ...).
    """
    params = request.query_params
    given = {name: params[name].strip() for name in _FIELDS if params.get(name, "").strip()}
    state = given.get("state")
    if state is not None and state not in TaskState._value2member_map_:
        raise BadRequest("state", f"{state!r} is not a task state")
    kind = given.get("kind")
    if kind is not None and kind not in TaskKind._value2member_map_:
        known = ", ".join(k.value for k in TaskKind)
        raise BadRequest("kind", f"{kind!r} is not one of {known}")
    since = _day("since", given.get("since"))
    until = _day("until", given.get("until"))
    wanted = TaskFilter(
        states=(TaskState(state),) if state else (),
        kind=TaskKind(kind) if kind else None,
        template_id=given.get("template"),
        created_since=since.isoformat() if since else None,
        # the last day asked for is shown whole: until the next one begins
        created_until=_day_after(until) if until else None,
        text=given.get("text"),
    )
    return ListQuery(given, wanted, params.get("cursor") or None, _limit(given.get("limit")))


def _limit(text: str | None) -> int:
    if text is None:
        return PAGE
    # isdecimal, not isdigit: "²" is a digit int() refuses
    if not (text.isdecimal() and len(text) <= 6) or not 1 <= int(text) <= MAX_PAGE:
        raise BadRequest("limit", f"{text[:20]!r}: tasks a page shows, 1 to {MAX_PAGE}")
    return int(text)


def _day_after(day: date) -> str:
    """The start of the day after `day`: a filter up to the end of time for the last day."""
    return (day + timedelta(days=1)).isoformat() if day < date.max else "9999-12-31T23:59:59Z"


def _day(name: str, text: str | None) -> date | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise BadRequest(name, f"{text[:40]!r} is not a date (YYYY-MM-DD)") from None


async def tasks(console: Console, request: Request) -> Response:
    query = read_query(request)
    operator = console.operator
    page = await operator.task_page(query.wanted, query.cursor, query.limit)
    counts = (await operator.status()).counts
    here = query.link(cursor=query.cursor) if query.cursor else query.link()
    return console.render(
        request,
        "tasks.html",
        tasks=page.tasks,
        holds={t.task_id: allowed_holds(t.state) for t in page.tasks},
        older=query.link(cursor=page.next_cursor) if page.next_cursor else None,
        newest=query.link() if query.cursor else None,
        here=here,
        # the counts link to their state, the rest of the filter kept
        state_link=lambda state: query.link(state=state),
        all_states=ListQuery(
            {k: v for k, v in query.given.items() if k != "state"}, query.wanted, None
        ).link(),
        given=query.given,
        counts=counts,
        wanted=query.given.get("state"),
        filtered=any(k != "limit" for k in query.given),
        states=[s.value for s in TaskState],
        kinds=[k.value for k in TaskKind],
        said=request.query_params.get("said"),
    )
