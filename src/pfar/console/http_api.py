"""The operator API over HTTP: `POST /api/<op>` with the op's fields as a JSON object,
answered with the same reply the control socket gives (`{"ok": true, "result": ...}`
or `{"ok": false, "error": {"code", "message"}}`), described by `/openapi.json`.

A script sends the owner token as `Authorization: Bearer <token>`; a console page
sends its session cookie and a CSRF token in `X-CSRF-Token`. Every op of the control
socket is here but the ones that are the kernel's process's own (`shutdown`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..answers import Actor
from ..errors import BadRequest, NotTheOwner, PfarError, ShuttingDown
from ..kernel.api.requests import COMMANDS
from ..kernel.api.schema import api_schema
from .auth import COOKIE, CSRF_HEADER, same_site
from .bodies import read_json

if TYPE_CHECKING:
    from .app import Console

NOT_OVER_HTTP = frozenset({"shutdown", "wait_idle", "wait_task"})


def _error(status: int, code: str, message: str) -> Response:
    return JSONResponse(
        {"ok": False, "error": {"code": code, "message": message}},
        status_code=status,
        headers={"cache-control": "no-store"},
    )


def _actor(console: Console, request: Request) -> Actor | Response:
    """Who calls: the owner with the token as a bearer, or a console page's session
    with its CSRF token; otherwise the refusal."""
    gate = console.gate
    bearer = request.headers.get("authorization", "")
    if bearer.lower().startswith("bearer "):
        if gate.token_matches(bearer[7:]):
            return Actor("api", "bearer token")
        return _error(401, NotTheOwner.code, "the bearer token is not the owner token")
    session = gate.session(request.cookies.get(COOKIE))
    if session is None:
        return _error(401, NotTheOwner.code, "no session: log in, or send the owner token")
    if not same_site(dict(request.headers), request.headers.get("host", "")):
        return _error(403, NotTheOwner.code, "a request from another site")
    if not gate.spend_form(session, request.headers.get(CSRF_HEADER)):
        return _error(403, NotTheOwner.code, f"a fresh {CSRF_HEADER} header is required")
    return Actor("console", f"session {session.short}")


async def api_call(console: Console, request: Request) -> Response:
    from .pages import status_of

    actor = _actor(console, request)
    if isinstance(actor, Response):
        return actor
    op = request.path_params["op"]
    command = COMMANDS.get(op)
    if command is None or op in NOT_OVER_HTTP:
        return _error(404, BadRequest.code, f"op: unknown op {op!r}")
    operator = console.operator.acting_as(actor)
    try:
        body = await read_json(request, console.config.max_body_bytes)
        if not operator.accepting and not command.while_shutting_down:
            raise ShuttingDown()
        result: Any = await command.run(operator, command.parse(body))
    except PfarError as exc:
        return _error(status_of(exc), exc.code, str(exc))
    return JSONResponse({"ok": True, "result": result}, headers={"cache-control": "no-store"})


async def openapi(console: Console, request: Request) -> Response:
    return JSONResponse(openapi_document())


def openapi_document() -> dict[str, Any]:
    """OpenAPI 3.1 for `/api/<op>`: each op's request and reply from the API's schema."""
    schema = api_schema(ref_template="#/components/schemas/{model}")
    paths: dict[str, Any] = {}
    for op, parts in schema["ops"].items():
        if op in NOT_OVER_HTTP:
            continue
        paths[f"/api/{op}"] = {
            "post": {
                "operationId": op,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": parts["request"]}},
                },
                "responses": {
                    "200": {
                        "description": "done",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "ok": {"const": True},
                                        "result": parts["reply"],
                                    },
                                }
                            }
                        },
                    },
                    "default": {
                        "description": "refused",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                        },
                    },
                },
            }
        }
    components = dict(schema["$defs"])
    components["Error"] = {
        "type": "object",
        "properties": {
            "ok": {"const": False},
            "error": {
                "type": "object",
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                "required": ["code", "message"],
            },
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "pfar operator API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"owner": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"owner": []}],
    }
