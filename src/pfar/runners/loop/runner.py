"""The loop runner: an open-ended, tool-using agent whose every turn is durable.

`advance(task_id)` goes on from what the journal holds, like every runner:

* the last turn is the owner's (or pfar's) message or a results turn: the model's
  turn. Drift is checked, the context assembled, the request journaled as sent (to a
  remote model), and the answer appended in the commit that routes it: its tool
  calls (each numbered: its row in the task's steps) to run; an ended turn to the
  owner (`WaitingForUser`), or to the summary when the task runs `once`; an answer
  cut off at its token limit to pfar's own "continue".
* the last turn is the model's, with tool calls: each call not yet resolved runs
  through the step executor (layer 1 policy first, then the permission question),
  which journals its start before a write, replays a finished one, checks or asks
  about one a crash cut off. A tool's error is the call's result, not the task's
  failure. Once every call is resolved, their results are appended as one turn.

Nothing is held between calls but the journal: after a crash the same rules give
the same next step. Recovery's matrix (seed 001) falls out of the journal: a request
journaled as sent and no answer appended is made again; an answer appended is
routed without calling the model; a call marked started is the step executor's
(`in_flight_write`); a task waiting for the owner keeps waiting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...config import LoopConfig
from ...errors import PfarError, ProviderError, ToolFailed, VaultError
from ...hooks import HookPoint
from ...journal import (
    Journal,
    OwnerMessage,
    StepRecord,
    StepStatus,
    TaskRecord,
    TaskState,
    TaskUpdate,
)
from ...journal.payloads import Completed, Executing, Paused, Synthesizing, WaitingForUser
from ...journal.records import Idempotency, Semantics, now_rfc3339, parse_rfc3339
from ...journal.turns import (
    AssistantTurn,
    LoopCall,
    LoopResult,
    LoopSettings,
    PermissionRule,
    RejectedCall,
    ResultsTurn,
    StoredTurn,
    SummaryTurn,
    Turn,
    UserTurn,
)
from ...llm.events import EventSink
from ...llm.messages import ChatRequest, ChatResponse, Message, StopReason, ToolSchema
from ...policy.approvals import ApprovalRule
from ...tools import ToolRegistry
from .. import hooking
from ..asking import ask_owner
from ..services import Services
from ..step_rules import Ask
from ..steps import Done, Parked, StepCall, StepRules, ToolErrored, run_step
from . import anomalies, context, redirects, subtasks, taint, worktrees
from .answers import DRIFT
from .permissions import PERMISSION, Policy
from .tasks import TIERS

log = logging.getLogger("pfar.loop")

CONTINUE = "Your answer was cut off at its token limit. Continue exactly where you stopped."
# pfar's turn after an answer whose every call was rejected; the errors are their results
REJECTED = "None of your tool calls could be used: each one's result says why."
_NO_APPROVALS = ApprovalRule(require=frozenset(), tainted_writes=False, on_deny="skip")


async def advance(task_id: str, svc: Services) -> None:
    """Advance a loop task until it waits for the owner, parks, or ends."""
    settings = await svc.journal.loops.settings(task_id)
    convo: list[StoredTurn] = await svc.journal.loops.turns(task_id)
    if settings.parent_task_id and await _orphaned(task_id, settings, svc):
        return
    if settings.use_worktree and settings.worktree is None and settings.worktree_error is None:
        settings = await _workspace(task_id, settings, svc)
    if settings.git_dir is None:  # before any tool of the task runs: what pfar's git uses
        settings = await worktrees.pin(settings)
        await svc.journal.loops.update_settings(task_id, settings)
    env: context.Environment | None = None  # looked at once, when the model is first asked
    while True:
        task = await svc.journal.tasks.get(task_id)
        if task.state is TaskState.Blocked:
            if not await subtasks.settle(task, svc):
                return  # its subtask works on; the kernel wakes it when that ends
            continue
        if not task.state.working:
            return
        try:
            if task.state is TaskState.Synthesizing:
                await _conclude(task, settings, convo, svc)
                return
            if task.state is not TaskState.Executing:
                raise PfarError(f"a loop task is never {task.state.value}")
            last = convo[-1].turn
            if isinstance(last, AssistantTurn) and last.calls:
                going = await _tool_phase(task, settings, convo, last, svc)
            elif isinstance(last, AssistantTurn):
                going = await _route_held(task, settings, convo, svc)
            else:
                env = env or await context.environment(settings)
                going = await _model_phase(task, settings, convo, env, svc)
            if not going:
                return
        except (VaultError, asyncio.CancelledError):
            raise
        except PfarError as exc:
            await _fail(task, settings, svc, str(exc))
            return


# -- the model's turn -----------------------------------------------------------


async def _model_phase(
    task: TaskRecord,
    settings: LoopSettings,
    convo: list[StoredTurn],
    env: context.Environment,
    svc: Services,
) -> bool:
    if await _drifted(task, settings, convo, svc):
        return False
    model = svc.model.model_for(_tier(task, settings, convo, svc))
    tools = _schemas(svc, settings)
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
    system = context.system_prompt(settings, task.task_id, env, model, added=pre.context)
    msgs = await _fit(task, settings, convo, system, tools, svc)
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
            "estimated_tokens": context.size(system, msgs, 0),
        },
    )
    if post.blocked:
        raise PfarError(f"stopped before its model call: {post.blocked}")
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
    request = ChatRequest(
        model=call.changes.get("model", model),
        system=system,
        messages=msgs,
        tools=tools,
        max_tokens=call.changes.get("max_tokens", max_tokens),
        attempt_timeout=svc.loop.tool_seconds,
    )
    if svc.model.remote:  # request_sent: a crash before the answer makes the call again
        await svc.journal.tasks.llm_request_sent(task.task_id, "loop")
    try:
        response = await svc.model.chat(request, task_id=task.task_id, on_event=_viewer(svc, task))
    except ProviderError as exc:
        await _fail(task, settings, svc, f"the model call failed: {svc.redactor.text(str(exc))}")
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
    return await _answered(task, settings, convo, response, svc)


def _turn_key(convo: Sequence[StoredTurn]) -> str:
    """The model's turn a hook decides about: the last turn that is no summary (a summary
    made for this same turn does not make it another)."""
    for t in reversed(convo):
        if not isinstance(t.turn, SummaryTurn):
            return f"turn:{t.seq}"
    return "turn:0"


async def _iteration(task: TaskRecord, convo: Sequence[StoredTurn], svc: Services) -> None:
    """LoopIteration (seed 001, 3.4 and 4.6): the task's numbers, for drift watchers."""
    if not svc.hooks.wants(HookPoint.LoopIteration):
        return
    answers = [t.turn for t in convo if isinstance(t.turn, AssistantTurn)]
    await svc.hooks.observe(
        HookPoint.LoopIteration,
        {
            "task_id": task.task_id,
            "iteration": len(answers),
            "tokens_used": sum(a.input_tokens + a.output_tokens for a in answers),
            "tools_executed": sum(
                len(t.turn.results) for t in convo if isinstance(t.turn, ResultsTurn)
            ),
        },
    )


async def _answered(
    task: TaskRecord,
    settings: LoopSettings,
    convo: list[StoredTurn],
    response: ChatResponse,
    svc: Services,
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
        # an error a provider gave without the call it is about can only be told in words
        unusable=tuple(
            f"{r.tool_call_id}: {svc.redactor.text(r.content)}"
            for r in response.invalid_tool_calls
            if r.tool_call_id not in {c.id for c in response.rejected_calls}
        ),
    )
    added, to, messages = _route(task, settings, turn, convo[-1].seq + 1, first)
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
        await _iteration(task, convo, svc)
    return True


def _route(
    task: TaskRecord, settings: LoopSettings, turn: AssistantTurn, seq: int, first: int
) -> tuple[list[Turn], Executing | WaitingForUser | Synthesizing, list[OwnerMessage]]:
    """Where the model's answer (turn `seq`) takes the task: its calls to run; pfar's own
    "continue" or note when nothing in it can run; the summary (`once`); or the owner."""
    cut_off = turn.stop_reason in (StopReason.max_tokens.value, StopReason.partial.value)
    if turn.calls:
        return [], Executing(current_step=first), []
    if cut_off or turn.unusable or turn.rejected:
        # nothing to run: pfar's own message takes the user's turn and the loop goes on
        # (the errors of rejected calls go with it, as their tool results)
        note = CONTINUE if cut_off else _unusable_note(turn) if turn.unusable else REJECTED
        return [UserTurn(text=note, source="continue")], Executing(current_step=first), []
    if settings.once:
        return [], Synthesizing(), []
    to = WaitingForUser(after=seq, next_step=first)
    return [], to, [_reply_message(task, settings, turn.text, seq)]


async def _route_held(
    task: TaskRecord, settings: LoopSettings, convo: list[StoredTurn], svc: Services
) -> bool:
    """An answer of the model the task paused at (or a crash cut off from its route)
    before it was routed: routed now, without asking the model again."""
    last = convo[-1]
    assert isinstance(last.turn, AssistantTurn)
    added, to, messages = _route(task, settings, last.turn, last.seq, task.current_step)
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
    await _iteration(task, convo, svc)
    return True


def _tier(
    task: TaskRecord, settings: LoopSettings, convo: Sequence[StoredTurn], svc: Services
) -> str:
    """The task's tier, or one up after `escalate_after_failures` failed calls in a row
    (seed 001, 3.1). From the journal alone: a request made again after a crash goes
    to the same model."""
    after = svc.loop.escalate_after_failures
    failures = _failures_in_a_row(convo)
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


def _unusable_note(turn: AssistantTurn) -> str:
    lines = "\n".join(f"- {u}" for u in turn.unusable)
    return f"Some of your tool calls could not be used and did not run:\n{lines}"


def _reply_message(task: TaskRecord, settings: LoopSettings, text: str, seq: int) -> OwnerMessage:
    title = settings.title or task.task_id[:8]
    return OwnerMessage(
        message_key=f"loop-reply:{task.task_id}:{seq}",
        kind="notice",
        task_id=task.task_id,
        body=(
            f"Task {title} ({task.task_id[:8]}) waits for you:\n{text or '(no text)'}\n"
            f'  answer: pfar send {task.task_id[:8]} "MESSAGE"   |   '
            f"pfar send {task.task_id[:8]} /done"
        ),
    )


def _viewer(svc: Services, task: TaskRecord) -> EventSink | None:
    watch = svc.loop_events
    if watch is None:
        return None
    task_id = task.task_id
    return lambda event: watch(task_id, event)


def _schemas(svc: Services, settings: LoopSettings) -> tuple[ToolSchema, ...]:
    return offered_tools(svc.tools, svc.loop, settings)


def offered_tools(
    tools: ToolRegistry, loop: LoopConfig, settings: LoopSettings
) -> tuple[ToolSchema, ...]:
    """The tools offered, in `[loop] tools` order; Task only above the depth limit."""
    out = []
    for name in loop.tools:
        if name == subtasks.TASK:
            if settings.depth < loop.max_depth:
                out.append(subtasks.SCHEMA)
        elif name in tools:
            t = tools.get(name)
            out.append(ToolSchema(t.name, t.description, t.args_schema))
    return tuple(out)


async def _workspace(task_id: str, settings: LoopSettings, svc: Services) -> LoopSettings:
    """Phase 1.3: the task's own worktree, recorded before any tool runs in it."""
    made = await worktrees.make(task_id, settings)
    messages = []
    if made.notice is not None:
        title = settings.title or task_id[:8]
        messages.append(
            OwnerMessage(
                message_key=f"worktree:{task_id}",
                kind="notice",
                task_id=task_id,
                body=f"Task {title} ({task_id[:8]}) {made.notice}",
            )
        )
    await svc.journal.loops.update_settings(task_id, made.settings, messages)
    if messages:
        svc.notify_owner()
    return made.settings


async def _orphaned(task_id: str, settings: LoopSettings, svc: Services) -> bool:
    """A subtask whose parent has ended (cancelled while the kernel died between the
    two cancels, say) has no one to answer: it fails, saying so."""
    assert settings.parent_task_id is not None
    parent = await svc.journal.tasks.get(settings.parent_task_id)
    if not parent.state.terminal:
        return False
    task = await svc.journal.tasks.get(task_id)
    if task.state.terminal:
        return True
    await _fail(
        task,
        settings,
        svc,
        f"its parent task {parent.task_id[:8]} ended ({parent.state.value}) before it did",
    )
    return True


async def _fit(
    task: TaskRecord,
    settings: LoopSettings,
    convo: list[StoredTurn],
    system: str,
    tools: Sequence[ToolSchema],
    svc: Services,
) -> tuple[Message, ...]:
    """The conversation within the model's budget (Phase 2.5)."""
    budget = svc.loop.context_tokens - svc.loop.reserve_tokens
    schema_chars = sum(len(json.dumps(t.input_schema)) + len(t.description) for t in tools)
    shown = context.visible(convo)
    msgs = context.messages(shown)
    if context.size(system, msgs, schema_chars) <= budget:
        return msgs
    msgs = context.messages(shown, cut=context.KEEP_LINES)
    if context.size(system, msgs, schema_chars) <= budget:
        return msgs
    upto = context.summary_cut(shown, svc.loop.keep_recent_turns)
    if upto is not None:
        older = [t for t in shown if t.seq < upto]
        text = await _summarize(task, settings, older, svc)
        stored, _ = await svc.journal.loops.append(
            task.task_id,
            [SummaryTurn(text=text, upto=upto)],
            after=convo[-1].seq,
            point="loop_summary",
        )
        convo.extend(stored)
        shown = context.visible(convo)
        msgs = context.messages(shown, cut=context.KEEP_LINES)
    need = context.size(system, msgs, schema_chars)
    if need > budget:
        raise PfarError(
            f"the conversation needs about {need:,} tokens, over the model's budget of "
            f"{budget:,} ([loop] context_tokens {svc.loop.context_tokens:,} less "
            f"reserve_tokens {svc.loop.reserve_tokens:,}) even after cutting tool results "
            "and summarizing older turns"
        )
    return msgs


async def _summarize(
    task: TaskRecord, settings: LoopSettings, turns: Sequence[StoredTurn], svc: Services
) -> str:
    request = ChatRequest(
        model=svc.model.model_for("cheap"),
        system=(
            "Summarize this conversation between a user and a coding agent for the agent "
            "to continue from: the task, what was done (files changed, commands run and "
            "their outcome), what was learnt, and what is left. Be specific and brief."
        ),
        messages=(Message("user", context.transcript(turns)),),
        max_tokens=min(svc.model.max_tokens, 2048),
        attempt_timeout=svc.loop.tool_seconds,
        context={"phase": "loop_summary"},
    )
    response = await svc.model.chat(request, task_id=task.task_id)
    return svc.redactor.text(response.text) or "(no summary)"


async def context_stats(task_id: str, svc: Services) -> context.ContextStats:
    """`/context`: the task's context as its next model call would assemble it (without
    summarizing: a look changes nothing)."""
    return await context_stats_of(
        svc.journal, task_id, svc.model.model_for, lambda s: _schemas(svc, s), svc.loop
    )


async def context_stats_of(
    journal: Journal,
    task_id: str,
    model_for: Callable[[str], str],
    schemas: Callable[[LoopSettings], tuple[ToolSchema, ...]],
    loop: LoopConfig,
) -> context.ContextStats:
    """`context_stats` from its parts: also what a reader of a home with no kernel
    running answers (`pfar task context`), from the config and the built-in tools."""
    settings = await journal.loops.settings(task_id)
    convo = await journal.loops.turns(task_id)
    model = model_for(settings.tier)
    tools = schemas(settings)
    system = context.system_prompt(settings, task_id, await context.environment(settings), model)
    shown = context.visible(convo)
    schema_chars = sum(len(json.dumps(t.input_schema)) + len(t.description) for t in tools)
    msgs = context.messages(shown)
    summaries = [t.turn for t in shown if isinstance(t.turn, SummaryTurn)]
    answers = [t.turn for t in shown if isinstance(t.turn, AssistantTurn)]
    usage = await journal.tasks.llm_usage(task_id)
    return context.ContextStats(
        turns=len(convo),
        shown=len(shown),
        summarized_upto=summaries[-1].upto if summaries else None,
        estimated_tokens=context.size(system, msgs, schema_chars),
        budget=loop.context_tokens - loop.reserve_tokens,
        context_tokens=loop.context_tokens,
        reserve_tokens=loop.reserve_tokens,
        last_input_tokens=answers[-1].input_tokens if answers else 0,
        last_output_tokens=answers[-1].output_tokens if answers else 0,
        total_tokens=int(usage.get("input_tokens", 0) or 0)
        + int(usage.get("output_tokens", 0) or 0),
        cost_usd=float(usage.get("cost_usd", 0) or 0),
    )


# -- drift ----------------------------------------------------------------------


async def _drifted(
    task: TaskRecord, settings: LoopSettings, convo: Sequence[StoredTurn], svc: Services
) -> bool:
    """Seed 001's drift detector, from the journal: past a limit, the task stops on a
    question to the owner (continue, or fail), stating which limit and by how much."""
    since = _owner_spoke_at(convo)
    answered = since  # time waiting on the owner is no time without progress
    for a in await svc.journal.questions.approvals_for_task(task.task_id):
        decided = a.decided_at or ""
        if a.action_type == DRIFT and a.decision == "continue" and decided > since:
            since = decided
        answered = max(answered, decided)
    recent = [t for t in convo if t.at > since or (t.at == since and _is_owner(t))]
    iterations = sum(1 for t in recent if isinstance(t.turn, AssistantTurn))
    limits = svc.loop
    why = None
    if iterations >= limits.max_iterations:
        why = (
            f"it has taken {iterations} turns since you last spoke (limit {limits.max_iterations})"
        )
    elif (failures := _failures_in_a_row(recent)) >= limits.max_tool_failures:
        why = f"its last {failures} tool calls failed (limit {limits.max_tool_failures})"
    else:
        idle = _minutes_without_progress(recent, max(since, answered))
        if idle >= limits.max_minutes_without_progress:
            why = (
                f"it has made no progress for {idle:.0f} minutes "
                f"(limit {limits.max_minutes_without_progress:g})"
            )
    if why is None:
        return False
    title = settings.title or task.task_id[:8]
    await ask_owner(
        task,
        svc,
        action_type=DRIFT,
        step=task.current_step,
        tool=None,
        options=["continue", "fail"],
        description=f"Task {title} looks stuck: {why}. Let it continue, or fail it?",
    )
    return True


def _is_owner(t: StoredTurn) -> bool:
    return isinstance(t.turn, UserTurn) and t.turn.source in ("prompt", "owner")


def _owner_spoke_at(convo: Sequence[StoredTurn]) -> str:
    for t in reversed(convo):
        if _is_owner(t):
            return t.at
    return ""


def _failures_in_a_row(turns: Sequence[StoredTurn]) -> int:
    n = 0
    for t in reversed(turns):
        if isinstance(t.turn, ResultsTurn):
            for r in reversed(t.turn.results):
                if not r.is_error:
                    return n
                n += 1
    return n


def _minutes_without_progress(turns: Sequence[StoredTurn], since: str) -> float:
    """Minutes from the last meaningful output (a text answer, or a tool call that
    worked), or from the owner's last word, to the newest turn. Measured between turns,
    not to now: a task that waited (paused, or on a question) made no turn meanwhile."""
    mark = since
    for t in turns:
        turn = t.turn
        if (isinstance(turn, AssistantTurn) and turn.text.strip()) or (
            isinstance(turn, ResultsTurn) and any(not r.is_error for r in turn.results)
        ):
            mark = max(mark, t.at)
    if not mark or not turns:
        return 0.0
    newest = parse_rfc3339(turns[-1].at)
    return max(0.0, (newest - parse_rfc3339(mark)).total_seconds() / 60)


# -- tool calls -----------------------------------------------------------------


async def _tool_phase(
    task: TaskRecord,
    settings: LoopSettings,
    convo: list[StoredTurn],
    turn: AssistantTurn,
    svc: Services,
) -> bool:
    """Run every call of `turn` not yet resolved, in order; then append their results."""
    policy = svc.loop_policy or Policy.of(svc.loop)
    workdir = Path(settings.working_dir)
    for call in turn.calls:
        if call.step < task.current_step:
            continue  # resolved: its row holds its outcome
        after = await _run_call(task, settings, call, policy, workdir, svc, convo)
        if after is None:
            return False
        task = after
        if task.state is not TaskState.Executing:
            return False  # paused at this call's end, or moved by the owner meanwhile
    results = [await _result(task, call, svc) for call in turn.calls]
    notes = []
    if turn.unusable:
        notes.append(_unusable_note(turn))
    if turn.stop_reason in (StopReason.max_tokens.value, StopReason.partial.value):
        notes.append(CONTINUE)
    stored, _ = await svc.journal.loops.append(
        task.task_id,
        [ResultsTurn(results=tuple(results), note="\n\n".join(notes))],
        after=convo[-1].seq,
        point="tool_results",
    )
    convo.extend(stored)
    await _iteration(task, convo, svc)
    return True


async def _run_call(
    task: TaskRecord,
    settings: LoopSettings,
    call: LoopCall,
    policy: Policy,
    workdir: Path,
    svc: Services,
    convo: Sequence[StoredTurn] = (),
) -> TaskRecord | None:
    """One call through the layers and the step executor: the task as it is after the
    call's outcome was journaled, or None when it parked on the owner."""
    where = f"tool call {call.step + 1}"
    title = settings.title or task.task_id[:8]
    step_key = f"step:{call.step}"
    if call.name == subtasks.TASK and subtasks.TASK in svc.loop.tools:
        refusal = subtasks.refusal(call, settings, svc) or await _policy(
            task, title, call, policy, workdir, svc
        )
        if refusal is None:
            spawned = await hooking.decide(
                svc,
                task.task_id,
                title,
                HookPoint.SubtaskSpawned,
                step_key,
                {"parent_task_id": task.task_id, "depth": settings.depth + 1, "input": call.input},
            )
            refusal = spawned.blocked
        if refusal is not None:
            return await _record_refusal(task, call, refusal, svc)
        await subtasks.spawn(task, settings, call, svc)
        return None  # blocked on its subtask: woken when that ends
    refusal = _unusable(call, svc) or await _policy(task, title, call, policy, workdir, svc)
    if refusal is None and await _never(call, policy, svc):
        refusal = (
            f'The owner never allows {call.name} on this (a standing "never allow" '
            "answer); it did not run"
        )
    if refusal is not None:
        return await _record_refusal(task, call, refusal, svc)
    semantics = svc.tools.get(call.name).semantics(call.input)
    unusual = await anomalies.check(task, settings, call, semantics, svc)
    if unusual:
        flagged = await hooking.decide(
            svc,
            task.task_id,
            title,
            HookPoint.AnomalyDetected,
            step_key,
            {
                "tool": call.name,
                "input": call.input,
                "anomalies": [{"kind": a.kind, "detail": a.detail} for a in unusual],
            },
        )
        if flagged.blocked:
            return await _record_refusal(task, call, flagged.blocked, svc)
    ask_anyway = unusual if svc.loop.anomaly.action == "ask" else ()
    protection = policy.protection
    if policy.path_refusal(call.input, workdir) is not None:
        # a SecurityPolicyCheck hook overruled layer 1: the owner's patterns give way
        # for this call, pfar's built-in protected paths do not
        protection = protection.built_in_only()
    tainted = await taint.tainted_by(task, convo, call.step, svc) if policy.tainted_writes else None
    rules = StepRules(
        _NO_APPROVALS,
        svc.loop.tool_seconds,
        ask=_asker(policy, await svc.journal.loops.rules(), ask_anyway, tainted),
        workspace=workdir,
        hold=svc.hold,
        protection=protection,
        hosts=policy.hosts,
        redirected=redirects.judge(task, settings, call, policy, workdir, svc),
    )
    step = StepCall(call.step, call.name, call.input, title, where, call.step + 1, last=False)
    match await run_step(task, step, rules, svc, fresh=False):
        case Done(task=done):
            return done
        case Parked():
            return None
        case ToolErrored(record=rec):
            state = await svc.journal.tasks.step_finished(rec, next_step=call.step + 1)
            return dataclasses.replace(task, state=state, payload=_after(state, call.step + 1))


def _after(state: TaskState, next_step: int) -> Executing | Paused:
    going = Executing(current_step=next_step)
    return Paused(then=going) if state is TaskState.Paused else going


def _asker(
    policy: Policy,
    rules: Sequence[PermissionRule],
    unusual: Sequence[anomalies.Anomaly] = (),
    tainted: str | None = None,
) -> Callable[[str, dict[str, Any], Semantics], Ask | None]:
    """Layer 2's question for a call; an unusual call (layer 3, `action = "ask"`) is
    asked about even when a tool or a standing answer would let it run, and so is a
    write after outside data (`tainted`: taint.py)."""

    def ask(tool: str, args: dict[str, Any], semantics: Semantics) -> Ask | None:
        if unusual:
            return policy.ask_unusual(tool, args, [a.detail for a in unusual])
        return policy.ask(rules, tool, args, semantics, tainted)

    return ask


def _unusable(call: LoopCall, svc: Services) -> str | None:
    """Why a call cannot run at all: an unknown tool, or arguments its schema refuses.
    Each is the call's result; the model may try again."""
    if call.name not in svc.loop.tools or call.name not in svc.tools:
        offered = ", ".join(n for n in svc.loop.tools if n in svc.tools or n == subtasks.TASK)
        return f"Unknown tool: {call.name} (the tools are: {offered})"
    try:
        svc.tools.get(call.name).validate(call.input)
    except ToolFailed as exc:
        return f"Invalid parameters: {exc}"
    return None


async def _policy(
    task: TaskRecord, title: str, call: LoopCall, policy: Policy, workdir: Path, svc: Services
) -> str | None:
    """Layer 1 (seed 001, 4.1): the policy's refusal, as the SecurityPolicyCheck hook
    leaves it (a handler may add a check, or overrule the policy); a refusal is a
    SecurityViolation."""
    # off the event loop: parsing a long command costs about a microsecond a character
    refusal = await asyncio.to_thread(
        policy.refusal, call.name, call.input, workdir
    ) or await policy.url_refusal(call.input)
    checked = await hooking.decide(
        svc,
        task.task_id,
        title,
        HookPoint.SecurityPolicyCheck,
        f"step:{call.step}",
        {"tool": call.name, "input": call.input, "policy_refusal": refusal},
    )
    if checked.blocked:
        refusal = checked.blocked
    elif checked.allowed:
        refusal = None
    if refusal is not None:
        await hooking.observe(
            svc,
            HookPoint.SecurityViolation,
            {"task_id": task.task_id, "tool": call.name, "input": call.input, "reason": refusal},
        )
    return refusal


async def _never(call: LoopCall, policy: Policy, svc: Services) -> bool:
    return policy.standing(await svc.journal.loops.rules(), call.name, call.input) == "deny"


async def _record_refusal(task: TaskRecord, call: LoopCall, why: str, svc: Services) -> TaskRecord:
    known = await svc.journal.tasks.step(task.task_id, call.step)
    if known is None:  # one row per call: the steps stay numbered without a gap
        at = now_rfc3339()
        rec = StepRecord(
            task.task_id,
            call.step,
            call.name,
            Semantics.Read,
            Idempotency.none,
            StepStatus.failed,
            call.input,
            None,
            "Extracted",
            at,
            at,
            why,
        )
        state = await svc.journal.tasks.step_finished(rec, next_step=call.step + 1)
    else:
        state = await svc.journal.tasks.step_finished(known, next_step=call.step + 1)
    return dataclasses.replace(task, state=state, payload=_after(state, call.step + 1))


async def _result(task: TaskRecord, call: LoopCall, svc: Services) -> LoopResult:
    """What the model is told about a resolved call: the truth the journal holds."""
    rec = await svc.journal.tasks.step(task.task_id, call.step)
    if rec is None:  # cannot happen: every resolved call has its row
        raise PfarError(f"task {task.task_id}: tool call {call.step + 1} has no record")
    if rec.status is StepStatus.completed:
        text = await _retried(task, call, svc) + _text(rec.result)
        if svc.hooks.wants(HookPoint.PreToolUse, call.name):
            kept = await svc.journal.tasks.hook_verdict(
                task.task_id, f"{HookPoint.PreToolUse}:step:{call.step}"
            )
            if kept and kept.get("context"):
                text += "\n\n" + "\n".join(kept["context"])
        return LoopResult(call_id=call.id, step=call.step, content=text)
    if rec.status is StepStatus.failed:
        text = await _retried(task, call, svc) + (rec.error or "failed")
        return LoopResult(call_id=call.id, step=call.step, content=text, is_error=True)
    return LoopResult(
        call_id=call.id, step=call.step, content=await _skipped(task, call, svc), is_error=True
    )


async def _retried(task: TaskRecord, call: LoopCall, svc: Services) -> str:
    """What the model must know before a retried call's output: the runs a crash cut
    off, which may have had their effect too (a command run twice appends twice)."""
    retries = sum(
        1
        for a in await svc.journal.questions.approvals_for_task(task.task_id)
        if a.step == call.step and a.action_type == "write_in_doubt" and a.decision == "retry"
    )
    if not retries:
        return ""
    runs = "an earlier run was" if retries == 1 else f"{retries} earlier runs were"
    return (
        f"Note: {runs} cut off by a crash before pfar knew whether it finished: it may "
        "have had its effect (in part or in full). The owner chose to run the call again; "
        "what follows is the output of that last run only. Check for effects done twice "
        "before relying on them.\n\n"
    )


async def _skipped(task: TaskRecord, call: LoopCall, svc: Services) -> str:
    """Why the owner's answer left a call unrun, from the question it answered."""
    asked = [
        a
        for a in await svc.journal.questions.approvals_for_task(task.task_id)
        if a.step == call.step and a.decision is not None
    ]
    last = asked[-1] if asked else None
    if last is not None and last.action_type == "write_in_doubt":
        return (
            "This call was cut off by a crash before pfar knew whether it ran: it may or "
            "may not have had its effect. The owner chose not to run it again. Check its "
            "effect before relying on it."
        )
    if last is not None and last.action_type == PERMISSION:
        if last.status.value == "expired":
            return "Permission was not given (no answer from the owner in time); it did not run."
        if last.decision == "never":
            return "The owner denied permission, now and for later calls like it; it did not run."
        return "The owner denied permission for this call; it did not run."
    return "The owner chose to skip this call; it did not run."


def _text(result: Any) -> str:
    if isinstance(result, dict) and isinstance(text := result.get("text"), str):
        return text
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, sort_keys=True)


# -- the end --------------------------------------------------------------------


async def _conclude(
    task: TaskRecord, settings: LoopSettings, convo: Sequence[StoredTurn], svc: Services
) -> None:
    """Completed, with its summary (the last answer, or the cheap tier's), its cost and
    its iterations (Phase 6)."""
    answers = context.answers(convo)
    summary = next((a.text for a in reversed(answers) if a.text.strip()), "")
    if not summary:
        summary = await _summarize(task, settings, convo, svc)
    usage = await svc.journal.tasks.llm_usage(task.task_id)
    title = settings.title or task.task_id[:8]
    merge = ""
    if not settings.parent_task_id:  # a subtask works in its parent's worktree
        merge = await worktrees.finish(task.task_id, settings, succeeded=True, keep=True)
    await svc.journal.tasks.transition(
        task.task_id,
        Completed(),
        point="completed",
        update=TaskUpdate(
            execute_progress={
                "current_step": task.current_step,
                "result": summary[:2000],
                "iterations": len(answers),
                "cost_usd": usage["cost_usd"],
            }
        ),
        # a subtask's answer goes to its parent, which tells the owner in its own words
        messages=[]
        if settings.parent_task_id
        else [
            OwnerMessage(
                message_key=f"result:{task.task_id}",
                kind="result",
                task_id=task.task_id,
                body=f"Task {title} ({task.task_id[:8]}) finished:\n{summary}"
                + (f"\n\n{merge}" if merge else ""),
            )
        ],
    )
    svc.notify_owner()


async def _fail(task: TaskRecord, settings: LoopSettings, svc: Services, error: str) -> None:
    current = await svc.journal.tasks.get(task.task_id)
    if current.state.terminal or current.state.held:
        return
    title = settings.title or task.task_id[:8]
    kept = ""
    if not settings.parent_task_id:
        keep = svc.loop.keep_failed_worktrees
        kept = await worktrees.finish(task.task_id, settings, succeeded=False, keep=keep)
    await svc.journal.tasks.fail(
        task.task_id,
        error,
        [
            OwnerMessage(
                message_key=f"failed:{task.task_id}",
                kind="notice",
                task_id=task.task_id,
                body=f"Task {title} ({task.task_id[:8]}) failed: {error}"
                + (f"\n{kept}" if kept else ""),
            )
        ],
    )
    svc.notify_owner()
