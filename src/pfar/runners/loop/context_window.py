"""The context a loop task's model call is sent: the tools offered, the conversation
fitted to the model's budget (Phase 2.5: results cut, older turns summarized), and the
same measured for `/context` without changing anything."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ...config import LoopConfig
from ...errors import PfarError
from ...journal import TaskRecord
from ...journal.store import Store
from ...journal.turns import AssistantTurn, ContextFit, LoopSettings, StoredTurn, SummaryTurn
from ...llm import tokens
from ...llm.messages import ChatRequest, Message, ToolSchema
from ...llm.tokens import ESTIMATE, TokenCount
from ...tools import ToolRegistry
from ...tools.skills import SKILL
from ..services import Services
from . import context, subtasks

log = logging.getLogger("pfar.loop")


def schemas(svc: Services, settings: LoopSettings) -> tuple[ToolSchema, ...]:
    mcp = svc.mcp.offered() if svc.mcp is not None else ()
    return offered_tools(svc.tools, svc.loop, settings, mcp)


def offered_tools(
    tools: ToolRegistry, loop: LoopConfig, settings: LoopSettings, mcp: Sequence[str] = ()
) -> tuple[ToolSchema, ...]:
    """The tools offered, in `[loop] tools` order; Task only above the depth limit; then
    the tools of the MCP servers that run (`mcp`: their pfar names, docs/mcp.md)."""
    out = []
    for name in loop.tools:
        if name == subtasks.TASK:
            if settings.depth < loop.max_depth:
                out.append(subtasks.SCHEMA)
        elif name == SKILL and not settings.skills:
            continue  # no skill to load: its schema would only take room
        elif name in tools:
            t = tools.get(name)
            out.append(ToolSchema(t.name, t.description, t.args_schema))
    for name in mcp:
        if name in tools and name not in loop.tools:
            t = tools.get(name)
            out.append(ToolSchema(t.name, t.description, t.args_schema))
    return tuple(out)


# Below this share of the budget by the estimate (four characters a token), a request
# is not counted for real: a count of Anthropic's is an HTTP call, and the estimate is
# far from the real count only for unusual text (code and other languages run about
# three characters a token, so half the budget leaves room for them).
NEAR = 0.5


async def fit(
    task: TaskRecord,
    settings: LoopSettings,
    convo: list[StoredTurn],
    system: str,
    tools: Sequence[ToolSchema],
    model: str,
    svc: Services,
) -> tuple[tuple[Message, ...], ContextFit]:
    """The conversation within the model's budget (Phase 2.5), and how it was fitted
    (journaled with the answer: `AssistantTurn.fit`)."""
    budget = svc.loop.context_tokens - svc.loop.reserve_tokens
    schema_chars = tokens.tool_chars(tools)

    async def measure(msgs: tuple[Message, ...]) -> TokenCount:
        cheap = tokens.estimated(system, msgs, schema_chars)
        if cheap < budget * NEAR:
            return TokenCount(cheap, ESTIMATE)
        request = ChatRequest(model=model, system=system, messages=msgs, tools=tuple(tools))
        return await svc.model.count_tokens(request)

    def fitted(
        msgs: tuple[Message, ...], n: TokenCount, cut: bool
    ) -> tuple[tuple[Message, ...], ContextFit]:
        summaries = [t.turn.upto for t in shown if isinstance(t.turn, SummaryTurn)]
        upto = summaries[-1] if summaries else None
        decided = ContextFit(
            tokens=n.tokens, method=n.method, budget=budget, cut=cut, summarized_upto=upto
        )
        log.debug("task %s: context %s", task.task_id, decided)
        return msgs, decided

    shown = context.visible(convo)
    msgs = context.messages(shown)
    n = await measure(msgs)
    if n.tokens <= budget:
        return fitted(msgs, n, cut=False)
    msgs = context.messages(shown, cut=context.KEEP_LINES)
    n = await measure(msgs)
    if n.tokens <= budget:
        return fitted(msgs, n, cut=True)
    upto = context.summary_cut(shown, svc.loop.keep_recent_turns)
    if upto is not None:
        older = [t for t in shown if t.seq < upto]
        text = await summarize(task, settings, older, svc)
        stored, _ = await svc.journal.loops.append(
            task.task_id,
            [SummaryTurn(text=text, upto=upto)],
            after=convo[-1].seq,
            point="loop_summary",
        )
        convo.extend(stored)
        shown = context.visible(convo)
        msgs = context.messages(shown, cut=context.KEEP_LINES)
        n = await measure(msgs)
    if n.tokens > budget:
        raise PfarError(
            f"the conversation needs {n.tokens:,} tokens ({_how(n)}), over the model's "
            f"budget of {budget:,} ([loop] context_tokens {svc.loop.context_tokens:,} less "
            f"reserve_tokens {svc.loop.reserve_tokens:,}) even after cutting tool results "
            "and summarizing older turns"
        )
    return fitted(msgs, n, cut=True)


def _how(n: TokenCount) -> str:
    return "estimated" if n.method == ESTIMATE else f"counted by {n.method}"


async def summarize(
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
        svc.journal, task_id, svc.model.model_for, lambda s: schemas(svc, s), svc.loop
    )


async def context_stats_of(
    journal: Store,
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
    system = context.system_prompt(
        settings,
        task_id,
        await context.environment(settings),
        model,
        skill_tool=SKILL in loop.tools,
    )
    shown = context.visible(convo)
    msgs = context.messages(shown)
    summaries = [t.turn for t in shown if isinstance(t.turn, SummaryTurn)]
    answers = [t.turn for t in shown if isinstance(t.turn, AssistantTurn)]
    usage = await journal.tasks.llm_usage(task_id)
    return context.ContextStats(
        turns=len(convo),
        shown=len(shown),
        summarized_upto=summaries[-1].upto if summaries else None,
        estimated_tokens=tokens.estimated(system, msgs, tokens.tool_chars(tools)),
        budget=loop.context_tokens - loop.reserve_tokens,
        context_tokens=loop.context_tokens,
        reserve_tokens=loop.reserve_tokens,
        last_input_tokens=answers[-1].input_tokens if answers else 0,
        last_output_tokens=answers[-1].output_tokens if answers else 0,
        total_tokens=int(usage.get("input_tokens", 0) or 0)
        + int(usage.get("output_tokens", 0) or 0),
        cost_usd=float(usage.get("cost_usd", 0) or 0),
    )
