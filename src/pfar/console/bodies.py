"""A request's body, bounded: a form or a JSON object, refused past the console's limit
(a declared length over it is refused unread) or when it is not what it claims."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request

from ..adapters import listener
from ..errors import BadRequest


class TooLarge(BadRequest):
    code = "too_large"

    def __init__(self, limit: int) -> None:
        super().__init__("body", f"over {limit} bytes; nothing was done")


async def read_body(request: Request, limit: int) -> bytes:
    """The body, bounded as the webhook listener bounds one, its refusals told as
    the operator API tells them."""
    try:
        return await listener.read_body(request, limit)
    except listener.TooLarge:
        raise TooLarge(limit) from None
    except listener.Gone:
        raise BadRequest("body", "the connection closed before the body arrived") from None


async def read_form(request: Request, limit: int) -> dict[str, str]:
    """An urlencoded form's fields (the last of a repeated name)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    body = await read_body(request, limit)
    if kind != "application/x-www-form-urlencoded":
        raise BadRequest("content-type", f"{kind or 'none'}: a form is sent urlencoded")
    try:
        text = body.decode()
    except UnicodeDecodeError:
        raise BadRequest("body", "not UTF-8") from None
    return dict(parse_qsl(text, keep_blank_values=True, strict_parsing=False))


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    body = await read_body(request, limit)
    if not body.strip():
        return {}
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise BadRequest("body", f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise BadRequest("body", f"a JSON object, not {type(value).__name__}")
    return value
