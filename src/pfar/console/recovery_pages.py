"""The console's Recoveries page: every kept start's recovery report, newest first,
each line's tasks linked to their pages (`Operator.recoveries`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from ..errors import BadRequest

if TYPE_CHECKING:
    from .app import Console

SHOWN = 20  # starts the page shows unless `?limit=` asks for more (or fewer)


async def recoveries(console: Console, request: Request) -> Response:
    asked = request.query_params.get("limit")
    limit = SHOWN
    if asked is not None:
        try:
            limit = int(asked)
        except ValueError:
            raise BadRequest("limit", f"{asked!r} is not a whole number") from None
    return console.render(
        request,
        "recoveries.html",
        boots=await console.operator.recoveries(limit),
        limit=limit,
    )
