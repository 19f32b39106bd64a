"""The console's pages and forms: each reads or acts through the operator API."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..answers import parse_answer
from ..errors import (
    AlreadyDecided,
    AmbiguousId,
    BadRequest,
    KnowledgeUnavailable,
    NotALoopTask,
    PfarError,
    TaskStateRefused,
    UnknownApproval,
    UnknownCredentialPrompt,
    UnknownTask,
)
from ..journal import TaskState
from ..kernel.api.wire import wire_json
from ..kernel.holds import allowed_holds, describe
from .auth import COOKIE, same_site
from .bodies import read_form
from .conversation import arguments_text, folded

if TYPE_CHECKING:
    from .app import Console


def status_of(exc: PfarError) -> int:
    if isinstance(exc, UnknownTask | UnknownApproval | UnknownCredentialPrompt):
        return 404
    if isinstance(exc, AlreadyDecided | TaskStateRefused | AmbiguousId):
        return 409
    if isinstance(exc, BadRequest):
        return 400
    return 500


def _form(request: Request) -> dict[str, str]:
    form: dict[str, str] = request.scope["pfar.form"]
    return form


def _back(path: str, **said: str) -> Response:
    return RedirectResponse(f"{path}?{urlencode(said)}" if said else path, status_code=303)


# -- login ---------------------------------------------------------------------------


async def login_page(console: Console, request: Request) -> Response:
    return console.render(request, "login.html")


async def login(console: Console, request: Request) -> Response:
    if not same_site(dict(request.headers), request.headers.get("host", "")):
        return console.render(request, "error.html", 403, error="a request from another site")
    try:
        form = await read_form(request, console.config.max_body_bytes)
    except BadRequest as exc:
        return console.render(request, "login.html", 400, problem=str(exc))
    gate = console.gate
    if not gate.token_matches(form.get("token", "")):
        return console.render(
            request,
            "login.html",
            401,
            problem="that is not the owner token: `pfar console token` shows it",
        )
    _session, cookie = gate.open_session()
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        COOKIE, cookie, max_age=int(console.config.session_hours * 3600), **console.cookie_flags()
    )
    return response


async def logout(console: Console, request: Request) -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, **console.cookie_flags())
    return response


# -- needs you -----------------------------------------------------------------------


async def needs_you(console: Console, request: Request) -> Response:
    questions = await console.operator.questions(answered=False)
    return console.render(
        request,
        "needs_you.html",
        approvals=questions.approvals,
        credentials=questions.credentials,
        recovery=console.operator.last_recovery(),
        said=request.query_params.get("said"),
    )


async def answer(console: Console, request: Request) -> Response:
    session = request.scope["pfar.session"]
    approval_id = request.path_params["approval_id"]
    decision = _form(request).get("decision", "")
    if not decision:
        raise BadRequest("decision", "is required")
    try:
        answered = await console.acting(session).answer(approval_id, parse_answer(decision))
    except AlreadyDecided as exc:  # someone answered first (the CLI, a chat): say so
        return _back("/", said=f"answered already: {exc}")
    if answered.changed:
        task = f"task {answered.task_id[:8]} {answered.task_state}"
        said = f"{answered.approval_id[:8]}: {decision}; {task}"
    else:
        said = (
            f"{answered.approval_id[:8]} was answered already ({answered.status}); nothing changed"
        )
    return _back("/", said=said)


async def credential(console: Console, request: Request) -> Response:
    session = request.scope["pfar.session"]
    prompt_id = request.path_params["prompt_id"]
    secret = _form(request).get("secret", "")
    if not secret.strip():
        raise BadRequest("secret", "is empty; nothing was stored")
    done = await console.acting(session).provide_credential(prompt_id, secret)
    return _back("/", said=f"credential stored; task {done.task_id[:8]} {done.state}")


# -- tasks ---------------------------------------------------------------------------


async def task(console: Console, request: Request) -> Response:
    operator = console.operator
    timeline = await operator.timeline(request.path_params["task_id"])
    task_id = timeline.task.task_id
    try:  # a loop task's conversation, followed live from its last turn (conversation.py)
        conversation = await operator.conversation(task_id)
    except NotALoopTask:
        conversation = None
    return console.render(
        request,
        "task.html",
        timeline=timeline,
        # the journal as a traced workflow's trace.md, and the record whole, for the curious
        trace=await operator.trace(task_id),
        raw=json.dumps(wire_json(timeline), indent=2, sort_keys=True),
        said=request.query_params.get("said"),
        conversation=conversation,
        holds=_holds_of(timeline.task.state) + (("retry",) if timeline.task.retryable else ()),
        folded=folded,
        arguments=arguments_text,
    )


def _holds_of(state: TaskState | str) -> tuple[str, ...]:
    """What the task's page offers: what its state allows, and Resume for a working
    task too (a pause it was asked for may not have been reached yet: resuming
    withdraws it)."""
    allowed = allowed_holds(state)
    if isinstance(state, TaskState) and state.working and "resume" not in allowed:
        allowed = (allowed[0], "resume", *allowed[1:])
    return allowed


async def kernel(console: Console, request: Request) -> Response:
    """What the kernel holds besides tasks: its channels, its model providers, what
    waits and the cron slots, sessions, the hooks it listens with, and what tasks
    learned."""
    operator = console.operator
    status = await operator.status()
    try:
        learnings = await operator.learnings(limit=20)
    except KnowledgeUnavailable:
        learnings = []
    return console.render(
        request,
        "kernel.html",
        kernel=status,
        channels=await operator.channels(),
        providers=await operator.providers(),
        waiting=await operator.queue(),
        locks=await operator.locks(),
        sessions=await operator.sessions(),
        hooks=operator.hooks(),
        learnings=learnings,
    )


_HOLDS = {"cancel", "pause", "resume", "retry"}


async def hold(console: Console, request: Request) -> Response:
    action = request.path_params["action"]
    if action not in _HOLDS:
        raise BadRequest("action", f"{action!r}: one of {', '.join(sorted(_HOLDS))}")
    operator = console.acting(request.scope["pfar.session"])
    if action == "retry":  # a Failed task whose failure is recoverable (its page offers it)
        retried = await operator.retry(request.path_params["task_id"])
        return _back(f"/tasks/{retried.task_id}", said=retried.text())
    verb = {"cancel": operator.cancel, "pause": operator.pause, "resume": operator.resume}
    result = await verb[action](request.path_params["task_id"])
    back = _form(request).get("back", "")
    if back == "/tasks" or back.startswith("/tasks?"):  # the list it was asked from
        sep = "&" if "?" in back else "?"
        return RedirectResponse(f"{back}{sep}{urlencode({'said': describe(result)})}", 303)
    return _back(f"/tasks/{result.task_id}", said=describe(result))
