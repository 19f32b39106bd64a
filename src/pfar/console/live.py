"""`/live`: the task events a console page listens to, as server-sent events.

Each event of the bus goes out as it is committed, numbered by its `seq` (the SSE
`id`), so a browser that lost the connection (a kernel restart, a phone that slept)
reconnects with `Last-Event-ID` and is given exactly what it missed. The page says
that it lost the kernel and that it is back, and reloads what it shows.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..errors import BadRequest
from ..kernel.api.wire import wire_json

if TYPE_CHECKING:
    from .app import Console

RETRY_MS = 2000  # how soon a browser reconnects after the stream ends


def _after(request: Request) -> int | None:
    given = request.headers.get("last-event-id") or request.query_params.get("after")
    if given is None or given == "":
        return None
    if not given.isdigit():
        raise BadRequest("after", f"{given!r} is not an event number")
    return int(given)


async def live(console: Console, request: Request) -> Response:
    events = await console.operator.subscribe(_after(request))

    async def stream() -> AsyncIterator[str]:
        yield f"retry: {RETRY_MS}\n: connected\n\n"
        try:
            async for event in events:
                data = json.dumps(wire_json(event), separators=(",", ":"))
                yield f"id: {event.seq}\nevent: task\ndata: {data}\n\n"
        finally:
            await events.aclose()  # type: ignore[attr-defined]

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
