"""The console's HTTP surface: its routes, each a thin shell over the operator API.

Pages are rendered on the server; a form is an ordinary POST (it works without
JavaScript), answered with a redirect back to the page it came from. Every request
but the login page and the static files needs the owner's session (or the token as
a bearer, for the JSON API); every POST needs a CSRF token spent once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..answers import Actor
from ..config import ConsoleConfig
from ..errors import PfarError
from ..kernel.api import Operator
from . import pages, recovery_pages, task_list
from .activity import activity_page
from .auth import COOKIE, CSRF_FIELD, NO_TOKEN, Gate, Session, same_site
from .bodies import read_form
from .conversation import conversation_live
from .http_api import api_call, openapi
from .live import live

log = logging.getLogger("pfar.console")

HERE = Path(__file__).parent
Handler = Callable[[Request], Awaitable[Response]]


class Console:
    """The console of one kernel: its operator, the gate of the current owner token."""

    def __init__(self, operator: Operator, config: ConsoleConfig) -> None:
        self.operator = operator
        self.config = config
        self._gate: tuple[str, Gate] | None = None
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )

    @property
    def gate(self) -> Gate:
        """The gate of the token in the vault now: a rotation is in force at once. Until
        the owner asks for a token (`pfar console token`) there is none: no login."""
        token = self.operator.console_token(make=False).token
        if not token:
            return NO_TOKEN
        if self._gate is None or self._gate[0] != token:
            self._gate = (token, Gate(token, self.config.session_hours * 3600))
        return self._gate[1]

    def acting(self, session: Session) -> Operator:
        return self.operator.acting_as(Actor("console", f"session {session.short}"))

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        session: Session | None = request.scope.get("pfar.session")
        gate: Gate = request.scope.get("pfar.gate") or self.gate

        def csrf() -> str:  # a token for each form the page shows, spent by its POST
            assert session is not None, "a form is shown only to a session"
            return gate.issue_form(session)

        html = self.templates.get_template(name).render(
            request=request,
            session=session,
            csrf=csrf,
            csrf_field=CSRF_FIELD,
            **context,
        )
        return HTMLResponse(html, status_code=status, headers=_NO_STORE)

    def cookie_flags(self) -> dict[str, Any]:
        return {
            "httponly": True,
            "samesite": "strict",
            "secure": self.config.tls,
            "path": "/",
        }


# pages may show what an owner would not leave in a shared cache
_NO_STORE = {"cache-control": "no-store", "x-frame-options": "DENY"}


def build(console: Console) -> Starlette:
    def owner_only(handler: Callable[[Console, Request], Awaitable[Response]]) -> Handler:
        async def guarded(request: Request) -> Response:
            gate = console.gate  # the token is read once a request
            request.scope["pfar.gate"] = gate
            session = gate.session(request.cookies.get(COOKIE))
            if session is None:
                if request.method == "GET":
                    return RedirectResponse("/login", status_code=303)
                return _refused(console, request, 401, "log in first")
            request.scope["pfar.session"] = session
            try:
                if request.method == "POST":
                    if not same_site(dict(request.headers), request.headers.get("host", "")):
                        return _refused(console, request, 403, "a request from another site")
                    form = await read_form(request, console.config.max_body_bytes)
                    if not gate.spend_form(session, form.get(CSRF_FIELD)):
                        return _refused(
                            console,
                            request,
                            403,
                            "this form was sent already, or is from before a restart or a "
                            "login: reload the page and try again",
                        )
                    request.scope["pfar.form"] = form
                return await handler(console, request)
            except PfarError as exc:
                return console.render(request, "error.html", pages.status_of(exc), error=exc)

        return guarded

    def open_to_all(handler: Callable[[Console, Request], Awaitable[Response]]) -> Handler:
        async def endpoint(request: Request) -> Response:  # the page checks what it takes
            return await handler(console, request)

        return endpoint

    routes = [
        Route("/login", open_to_all(pages.login_page), methods=["GET"]),
        Route("/login", open_to_all(pages.login), methods=["POST"]),
        Route("/logout", owner_only(pages.logout), methods=["POST"]),
        Route("/", owner_only(pages.needs_you), methods=["GET"]),
        Route("/tasks", owner_only(task_list.tasks), methods=["GET"]),
        Route("/kernel", owner_only(pages.kernel), methods=["GET"]),
        Route("/activity", owner_only(activity_page), methods=["GET"]),
        Route("/recoveries", owner_only(recovery_pages.recoveries), methods=["GET"]),
        Route("/tasks/{task_id}", owner_only(pages.task), methods=["GET"]),
        Route(
            "/tasks/{task_id}/conversation/live",
            owner_only(conversation_live),
            methods=["GET"],
        ),
        Route("/tasks/{task_id}/{action}", owner_only(pages.hold), methods=["POST"]),
        Route("/questions/{approval_id}", owner_only(pages.answer), methods=["POST"]),
        Route("/credentials/{prompt_id}", owner_only(pages.credential), methods=["POST"]),
        Route("/live", owner_only(live), methods=["GET"]),
        Route("/api/{op}", open_to_all(api_call), methods=["POST"]),
        Route("/openapi.json", open_to_all(openapi), methods=["GET"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes)


def _refused(console: Console, request: Request, status: int, why: str) -> Response:
    return console.render(request, "error.html", status, error=why)
