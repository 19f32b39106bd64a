"""A loop task's conversation on its page: the turns so far, rendered with the page,
then `/tasks/{id}/conversation/live`, server-sent events that follow it while it runs.

Each turn goes out as it is journaled, rendered here by the same template as the page
(so model output is escaped in one place), numbered by its `seq` (the SSE `id`): a
browser that lost the connection reconnects with `Last-Event-ID` and is given the
turns after the last one it showed. Between turns, the model's text goes out as it
streams (`text`, no id: the answer's turn replaces it). Following moves nothing: it
is not `pfar attach`, whose viewer's mark stays where it was.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..errors import BadRequest
from ..kernel.api.conversation_records import RetryNote, StateChange, Streamed
from ..kernel.api.wire import wire_json
from .live import RETRY_MS

if TYPE_CHECKING:
    from ..kernel.api.conversation import Followed
    from .app import Console

FOLD_CHARS = 600  # a text longer than this (or of more lines) is folded in <details>
FOLD_LINES = 12


def folded(text: str) -> bool:
    return len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES


def arguments_text(arguments: object) -> str:
    return json.dumps(arguments, indent=2, ensure_ascii=False, sort_keys=True)


def _after(request: Request) -> int:
    given = request.headers.get("last-event-id") or request.query_params.get("after")
    if given is None or given == "":
        return -1
    if not ((given.isdecimal() and len(given) <= 18) or given == "-1"):
        raise BadRequest("after", f"{given!r} is not a turn number")
    return int(given)


def _event(name: str, data: object, seq: int | None = None) -> str:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def conversation_live(console: Console, request: Request) -> Response:
    followed = await console.operator.follow_conversation(
        request.path_params["task_id"], _after(request)
    )
    turns = console.templates.get_template("turns.html")

    def one(item: Followed) -> str:
        match item:
            case Streamed(text=text):
                return _event("text", {"text": text})
            case RetryNote(text=text):
                return _event("retry", {"text": text})
            case StateChange(state=state):
                return _event("state", {"state": state.value})
            case turn:
                html = turns.render(turns=(turn,), folded=folded, arguments=arguments_text)
                data = {"seq": turn.seq, "kind": turn.kind, "html": html, "turn": wire_json(turn)}
                return _event("turn", data, turn.seq)

    async def stream() -> AsyncIterator[str]:
        yield f"retry: {RETRY_MS}\n: connected\n\n"
        try:
            async for item in followed:
                yield one(item)
            yield _event("ended", {})
        finally:
            await followed.aclose()  # type: ignore[attr-defined]

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
