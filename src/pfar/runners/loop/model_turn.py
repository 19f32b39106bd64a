"""The model's turn of a loop task: drift checked, the context assembled (with the
hooks around it), the request journaled as sent to a remote model, and the answer
appended in the commit that routes it (routing.py)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from ...errors import PfarError, ProviderError
from ...hooks import HookPoint
from ...journal import TaskRecord, TaskState
from ...journal.payloads import Executing
from ...journal.turns import (
    AssistantTurn,
    ContextFit,
    LoopCall,
    LoopSettings,
    RejectedCall,
    StoredTurn,
    SummaryTurn,
    Thought,
)
from ...llm.events import EventSink
from ...llm.messages import ChatRequest, ChatResponse, Message
from ...tools.skills import SKILL
from .. import hooking
from ..services import Services
from ..spend_caps import SpendCapReached
from ..spend_gate import ask_about_cap
from . import context, context_window, drift, endings, routing
from .tasks import TIERS

log = logging.getLogger("pfar.loop")


async def model_phase(
    task: TaskRecord,
    settings: LoopSettings,
    convo: list[StoredTurn],
    env: context.Environment,
    svc: Services,
) -> bool:
    if await drift.drifted(task, settings, convo, svc):
        return False
    tier = _tier(task, settings, convo, svc)
    model = svc.model.model_for(tier)
    tools = context_window.schemas(svc, settings)
    title = settings.title or task.task_id[:8]
    key = _turn_key(convo)
    about = {"turn": key, "title": title, "working_dir": settings.working_dir}
    pre = await hooking.decide(
        svc,
        task.task_id,
        title,
        HookPoint.PreContextAssembly,
        key,
        {**about, "tier": settings.tier},
    )
    if pre.blocked:
        raise PfarError(f"stopped before its model call: {pre.blocked}")
    system = context.system_prompt(
        settings, task.task_id, env, model, added=pre.context, skill_tool=SKILL in svc.loop.tools
    )
    try:  # a summary of older turns is a model call too (the cheap tier's)
        msgs, fitted = await context_window.fit(task, settings, convo, system, tools, model, svc)
    except SpendCapReached as exc:
        await ask_about_cap(task, svc, exc, title=title)
        return False
    post = await hooking.decide(
        svc,
        task.task_id,
        title,
        HookPoint.PostContextAssembly,
        key,
        {
            **about,
            "system": system,
            "messages": len(msgs),
            "estimated_tokens": fitted.tokens,
        },
    )
    if post.blocked:
        raise PfarError(f"stopped before its model call: {post.blocked}")
    fitted_system = system
    system = post.changes.get("system", system)
    max_tokens = min(svc.model.max_tokens, svc.loop.reserve_tokens)
    call = await hooking.decide(
        svc,
        task.task_id,
        title,
        HookPoint.PreLLMCall,
        key,
        {**about, "model": model, "max_tokens": max_tokens, "tools": [t.name for t in tools]},
    )
    if call.blocked:
        raise PfarError(f"stopped before its model call: {call.blocked}")
    asked = call.changes.get("model", model)
    budget = _thinking(svc, tier, call.changes.get("max_tokens", max_tokens))
    msgs, budget = _thinking_allowed(task, convo, msgs, asked, budget)
    request = ChatRequest(
        model=asked,
        system=system,
        messages=msgs,
        tools=tools,
        max_tokens=call.changes.get("max_tokens", max_tokens),
        attempt_timeout=svc.loop.tool_seconds,
        thinking_budget=budget,
        # the fit's measure travels with the request, unless a hook changed what it
        # measured or the model it was counted for
        input_tokens=fitted.tokens if system == fitted_system and asked == model else None,
    )
    if svc.model.remote:  # request_sent: a crash before the answer makes the call again
        await svc.journal.tasks.llm_request_sent(task.task_id, "loop")
    try:
        response = await svc.model.chat(request, task_id=task.task_id, on_event=_viewer(svc, task))
    except SpendCapReached as exc:  # held before it went out: the owner decides
        await ask_about_cap(task, svc, exc, title=title)
        return False
    except ProviderError as exc:
        error = f"the model call failed: {svc.redactor.text(str(exc))}"
        await endings.fail(task, settings, svc, error, recoverable=True)
        return False
    if (
        response.usage.input_tokens + response.usage.output_tokens
        > svc.loop.max_tokens_per_iteration
    ):
        log.warning(
            "task %s: one iteration used %d tokens (over %d)",
            task.task_id,
            response.usage.input_tokens + response.usage.output_tokens,
            svc.loop.max_tokens_per_iteration,
        )
    if svc.hooks.wants(HookPoint.PostLLMCall):
        # what it changes is what the answer's turn keeps: replayed from the journal
        after = await svc.hooks.fire(
            HookPoint.PostLLMCall,
            {
                **about,
                "task_id": task.task_id,
                "model": response.model,
                "text": svc.redactor.text(response.text),  # a hook sees what the journal keeps
                "stop_reason": response.stop_reason.value,
                "tool_calls": [
                    {"id": c.id, "name": c.name, "input": svc.redactor.value(c.input)}
                    for c in response.tool_calls
                ],
                "usage": {
                    "input_tokens": response.usage.input_tokens,
                    "output_tokens": response.usage.output_tokens,
                },
            },
        )
        if "text" in after.changes:
            response = dataclasses.replace(response, text=after.changes["text"])
    return await _answered(task, settings, convo, response, svc, fitted, request.model)


def _thinking(svc: Services, tier: str, max_tokens: int) -> int | None:
    """The tier's thinking budget, which must leave the answer room (the API's rule)."""
    budget = svc.model.thinking_for(tier)
    if budget is not None and budget >= max_tokens:
        raise PfarError(
            f"llm.tiers.{tier}.thinking.budget_tokens ({budget}) must be less than the "
            f"call's max_tokens ({max_tokens}: the least of llm.max_tokens and "
            "loop.reserve_tokens)"
        )
    return budget


def _thinking_allowed(
    task: TaskRecord,
    convo: Sequence[StoredTurn],
    msgs: tuple[Message, ...],
    model: str,
    budget: int | None,
) -> tuple[tuple[Message, ...], int | None]:
    """The messages and the thinking budget this request may go with. The API takes one
    thinking setting per tool-use exchange: with thinking on, the exchange's last
    assistant message must start with its own thinking, signed by the model asked now;
    it accepts thinking off mid-exchange. So a request whose last answer made calls
    without such thinking (a block kept redacted for a secret, an answer of another
    tier's or a fallback's model) goes without thinking, and no block goes back to a
    model other than the one that wrote it."""
    if budget is None:  # the provider sends no block to a request that does not think
        return msgs, None
    answers = [t.turn for t in context.visible(convo) if isinstance(t.turn, AssistantTurn)]
    said = [i for i, m in enumerate(msgs) if m.role == "assistant"]
    # the assistant messages are the last answers shown, in order
    mine = {
        i: _signed_for(turn, model)
        for i, turn in zip(reversed(said), reversed(answers), strict=False)
    }
    if said and msgs[said[-1]].tool_calls and not mine.get(said[-1], False):
        log.info(
            "task %s: the exchange's last answer has no thinking %s can take; asking "
            "without thinking until the exchange ends",
            task.task_id,
            model,
        )
        return msgs, None
    kept = tuple(
        dataclasses.replace(m, thinking=())
        if m.role == "assistant" and m.thinking and not mine.get(i, False)
        else m
        for i, m in enumerate(msgs)
    )
    return kept, budget


def _signed_for(turn: AssistantTurn, model: str) -> bool:
    """The answer's thinking can go back whole to `model`: it has some, each block keeps
    its signature (or its encrypted data), and `model` wrote it."""
    return (
        bool(turn.thinking)
        and all(t.signature or t.data for t in turn.thinking)
        and (turn.asked or turn.model) == model
    )


def _thoughts(task: TaskRecord, response: ChatResponse, svc: Services) -> tuple[Thought, ...]:
    """The answer's thinking as the journal keeps it: each block exactly as the API sent
    it (it wants it back so), logged at debug through the redactor; a block whose text
    held a secret is kept redacted, without its signature (it is not sent back)."""
    kept = []
    for block in response.thinking:
        text = svc.redactor.text(block.thinking)
        log.debug("task %s: the model thought: %s", task.task_id, text)
        signature = block.signature if text == block.thinking else ""
        kept.append(Thought(kind=block.kind, thinking=text, signature=signature, data=block.data))
    return tuple(kept)


def _turn_key(convo: Sequence[StoredTurn]) -> str:
    """The model's turn a hook decides about: the last turn that is no summary (a summary
    made for this same turn does not make it another)."""
    for t in reversed(convo):
        if not isinstance(t.turn, SummaryTurn):
            return f"turn:{t.seq}"
    return "turn:0"


async def _answered(
    task: TaskRecord,
    settings: LoopSettings,
    convo: list[StoredTurn],
    response: ChatResponse,
    svc: Services,
    fitted: ContextFit,
    asked: str,
) -> bool:
    """Append the model's answer and its route, in one commit (response_received)."""
    first = task.current_step
    calls = tuple(
        LoopCall(id=c.id, name=c.name, input=svc.redactor.value(c.input), step=first + n)
        for n, c in enumerate(response.tool_calls)
    )
    turn = AssistantTurn(
        text=svc.redactor.text(response.text),
        calls=calls,
        stop_reason=response.stop_reason.value,
        model=response.model,
        input_tokens=response.usage.input_tokens,
        output_tokens=response.usage.output_tokens,
        rejected=_rejected(response, svc),
        thinking=_thoughts(task, response, svc),
        # an error a provider gave without the call it is about can only be told in words
        unusable=tuple(
            f"{r.tool_call_id}: {svc.redactor.text(r.content)}"
            for r in response.invalid_tool_calls
            if r.tool_call_id not in {c.id for c in response.rejected_calls}
        ),
        fit=fitted,
        asked=asked,
    )
    added, to, messages = routing.route(task, settings, turn, convo[-1].seq + 1, first)
    # the model's turn is a boundary: a pause asked for while it answered stops the task
    # here, before any of the answer's calls runs (resuming routes the answer then)
    stored, state = await svc.journal.loops.append(
        task.task_id,
        [turn, *added],
        after=convo[-1].seq,
        to=to,
        point="llm_response_received",
        messages=messages,
        at_pause=Executing(current_step=first),
    )
    convo.extend(stored)
    if state is TaskState.Paused:
        return False
    if messages:
        svc.notify_owner()
    if not calls:
        await drift.observe_iteration(task, convo, svc)
    return True


async def route_held(
    task: TaskRecord, settings: LoopSettings, convo: list[StoredTurn], svc: Services
) -> bool:
    """An answer of the model the task paused at (or a crash cut off from its route)
    before it was routed: routed now, without asking the model again."""
    last = convo[-1]
    assert isinstance(last.turn, AssistantTurn)
    added, to, messages = routing.route(task, settings, last.turn, last.seq, task.current_step)
    stored, _ = await svc.journal.loops.append(
        task.task_id,
        added,
        after=last.seq,
        to=to,
        point="llm_response_received",
        messages=messages,
    )
    convo.extend(stored)
    if messages:
        svc.notify_owner()
    await drift.observe_iteration(task, convo, svc)
    return True


def _tier(
    task: TaskRecord, settings: LoopSettings, convo: Sequence[StoredTurn], svc: Services
) -> str:
    """The task's tier, or one up after `escalate_after_failures` failed calls in a row
    (seed 001, 3.1). From the journal alone: a request made again after a crash goes
    to the same model."""
    after = svc.loop.escalate_after_failures
    failures = drift.failures_in_a_row(convo)
    if not after or failures < after or settings.tier == TIERS[-1]:
        return settings.tier
    up = TIERS[TIERS.index(settings.tier) + 1] if settings.tier in TIERS else settings.tier
    log.info(
        "task %s: %d tool calls failed in a row; asking the %s tier", task.task_id, failures, up
    )
    return up


def _rejected(response: ChatResponse, svc: Services) -> tuple[RejectedCall, ...]:
    """The calls of the answer that cannot run, each with the error it is answered by."""
    errors = {r.tool_call_id: r.content for r in response.invalid_tool_calls}
    return tuple(
        RejectedCall(
            id=c.id,
            name=c.name,
            input=svc.redactor.value(c.input),
            error=svc.redactor.text(errors.get(c.id, f"tool {c.name!r} could not be used")),
        )
        for c in response.rejected_calls
    )


def _viewer(svc: Services, task: TaskRecord) -> EventSink | None:
    watch = svc.loop_events
    if watch is None:
        return None
    task_id = task.task_id
    return lambda event: watch(task_id, event)
