"""Context assembly (seed 001, Phase 2): the system prompt, the conversation as the model
is shown it, and keeping it within the model's budget.

Tokens are estimated at four characters each (the inference proxy's own estimate), so
the budget holds without a tokenizer per provider. Over budget, two strategies run in
order: large tool results in older turns are cut to their first and last lines with
"[truncated, N lines omitted]", then older turns are summarized by the cheap tier (a
`SummaryTurn` appended to the journal, so the summary is made once). A conversation
that still does not fit fails with an error that says by how much.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...journal.turns import (
    AssistantTurn,
    DiscardTurn,
    LoopSettings,
    ResultsTurn,
    StoredTurn,
    SummaryTurn,
    UserTurn,
)
from ...llm.messages import NO_TEXT, Message, ThinkingBlock, ToolCall, ToolResult
from ...tools import git_safe
from . import worktrees

log = logging.getLogger("pfar.loop")

KEEP_LINES = 40  # lines kept at each end of a tool result cut to fit


def tokens(text: str) -> int:
    return len(text) // 4 + 1


@dataclass(frozen=True, slots=True)
class Environment:
    """What the system prompt says of where the task works. Looked at once each time a
    task is taken up (not every turn): a system prompt that stays the same from turn to
    turn is one a provider can cache, and `git status` is a process to start."""

    working_dir: str
    git: str
    date: str


async def environment(settings: LoopSettings) -> Environment:
    return Environment(
        settings.working_dir,
        await git_state(settings),
        datetime.date.today().isoformat(),
    )


async def git_state(settings: LoopSettings) -> str:
    """Branch and clean/dirty state, or "not a git repository": pfar's own `git status`
    on the repository pinned for the task (`worktrees.pinned`), running nothing the
    repository names (`tools.git_safe`)."""
    try:
        repo = await worktrees.pinned(settings)
    except git_safe.Refused as exc:
        log.warning("git status not run: %s", exc)
        return f"not looked at ({exc})"
    except git_safe.Failed:
        return "not a git repository"
    if repo is None:
        return "not a git repository"
    try:
        out = await git_safe.run(
            Path(settings.working_dir),
            "status",
            "--porcelain=v1",
            "--branch",
            "--ignore-submodules=all",
            repo=repo,
            timeout=5,
        )
    except git_safe.Failed as exc:
        return "unknown (git took too long)" if "took over" in str(exc) else f"unknown ({exc})"
    lines = out.splitlines()
    head = lines[0].removeprefix("## ") if lines else "?"
    changed = len(lines) - 1
    return f"branch {head.split('...')[0]}, " + (
        f"dirty ({changed} changed file{'s' if changed != 1 else ''})" if changed else "clean"
    )


def system_prompt(
    settings: LoopSettings,
    task_id: str,
    env: Environment,
    model: str,
    added: Sequence[str] = (),
    *,
    skill_tool: bool = False,
) -> str:
    """The system prompt: the same from turn to turn for a task (its parts come from the
    journal: its settings, and what a hook added to this turn). `skill_tool`: the Skill
    tool is offered, so the task's skills are listed (names and descriptions only)."""
    lines = [
        "You are pfar's agent, working on your owner's task with the tools you are given.",
        "Work in small, checked steps: read before you change, run what you changed.",
        "When the task is done (or you need the owner), reply with a short plain summary "
        "of what you did and what is left, and call no tool.",
        "A tool result that says a call was cut off by a crash tells you exactly what is "
        "known about it: believe it, and check the effect before relying on it.",
        "",
        "Environment:",
        f"- Working directory: {env.working_dir}",
        f"- Git: {env.git}",
        f"- Date: {env.date}",
        f"- Model: {model}",
        f"- Task: {task_id}" + (f" ({settings.title})" if settings.title else ""),
    ]
    if settings.parent_task_id:
        lines.append(
            f"- A subtask of {settings.parent_task_id} (depth {settings.depth}): your final "
            "reply is its result"
        )
    if settings.learnings:
        lines += ["", "Relevant learnings from previous tasks:"]
        lines += [f"- {learning}" for learning in settings.learnings]
    if skill_tool and settings.skills:
        lines += [
            "",
            "Skills (instructions for kinds of work, with their scripts and files): when "
            "one's description fits what you are about to do, load it with the Skill tool "
            "first and follow it. Its scripts run with Bash, under the same rules as any "
            "command.",
        ]
        lines += [f"- {s.name}: {' '.join(s.description.split())}" for s in settings.skills]
    if added:  # PreContextAssembly hooks' context, kept with the turn
        lines += ["", "From the owner's hooks:"]
        lines += list(added)
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ContextStats:
    """`/context`: how full the task's context is, as its next model call would be sent."""

    turns: int  # in the journal
    shown: int  # sent to the model (after summaries and discarded answers)
    summarized_upto: int | None  # the seq before which turns are summarized
    estimated_tokens: int  # the next request: system prompt, tools and conversation
    budget: int  # context_tokens less reserve_tokens
    context_tokens: int
    reserve_tokens: int
    last_input_tokens: int  # as the provider counted the last call
    last_output_tokens: int
    total_tokens: int  # every call of the task
    cost_usd: float

    def text(self) -> str:
        share = self.estimated_tokens / self.budget if self.budget else 0.0
        lines = [
            f"context: about {self.estimated_tokens:,} of {self.budget:,} tokens "
            f"({share:.0%}; the model takes {self.context_tokens:,}, "
            f"{self.reserve_tokens:,} kept for its answer)",
            f"turns: {self.turns} in the journal, {self.shown} shown to the model",
        ]
        if self.summarized_upto is not None:
            lines.append(f"summarized: the turns before #{self.summarized_upto}")
        lines.append(
            f"last call: {self.last_input_tokens:,} in, {self.last_output_tokens:,} out; "
            f"task: {self.total_tokens:,} tokens, ${self.cost_usd:.4f}"
        )
        return "\n".join(lines)


def answers(turns: Sequence[StoredTurn]) -> list[AssistantTurn]:
    """Every answer of the model in the journal that the owner did not discard."""
    dropped = {t.turn.of for t in turns if isinstance(t.turn, DiscardTurn)}
    return [t.turn for t in turns if isinstance(t.turn, AssistantTurn) and t.seq not in dropped]


def visible(turns: Sequence[StoredTurn]) -> list[StoredTurn]:
    """The turns the model is shown: from the latest summary on (the summary itself
    standing for everything before `upto`), without answers the owner discarded."""
    dropped = {t.turn.of for t in turns if isinstance(t.turn, DiscardTurn)}
    if dropped:
        turns = [t for t in turns if t.seq not in dropped and not isinstance(t.turn, DiscardTurn)]
    start = 0
    for i, stored in enumerate(turns):
        if isinstance(stored.turn, SummaryTurn):
            start = i
    if start == 0:
        return list(turns)
    summary = turns[start]
    assert isinstance(summary.turn, SummaryTurn)
    kept = [t for t in turns[:start] if t.seq >= summary.turn.upto]
    return [summary, *kept, *turns[start + 1 :]]


def messages(turns: Sequence[StoredTurn], *, cut: int | None = None) -> tuple[Message, ...]:
    """The conversation as provider-neutral messages. Consecutive user-side turns merge
    into one message. `cut`: tool results longer than that many lines, except in the
    last two turns, keep their first and last lines."""
    out: list[Message] = []
    last_two = {t.seq for t in turns[-2:]}
    # the errors of the last answer's rejected calls: they open the next user message
    owed: tuple[ToolResult, ...] = ()
    for stored in turns:
        turn = stored.turn
        if isinstance(turn, AssistantTurn):
            calls = tuple(ToolCall(c.id, c.name, c.input) for c in turn.calls)
            calls += tuple(ToolCall(r.id, r.name, r.input) for r in turn.rejected)
            thinking = tuple(
                ThinkingBlock(t.kind, thinking=t.thinking, signature=t.signature, data=t.data)
                for t in turn.thinking
            )
            out.append(Message("assistant", _said(turn), tool_calls=calls, thinking=thinking))
            owed = tuple(ToolResult(r.id, r.error, is_error=True) for r in turn.rejected)
            continue
        if isinstance(turn, UserTurn):
            msg = Message("user", turn.text)
        elif isinstance(turn, SummaryTurn):
            msg = Message("user", f"Summary of the conversation so far:\n{turn.text}")
        else:
            assert isinstance(turn, ResultsTurn)
            short = cut if cut is not None and stored.seq not in last_two else None
            results = tuple(
                ToolResult(r.call_id, truncate(r.content, short), r.is_error) for r in turn.results
            )
            msg = Message("user", turn.note, tool_results=results)
        if owed:
            msg = Message("user", msg.text, tool_results=owed + msg.tool_results)
            owed = ()
        if out and out[-1].role == "user":
            prev = out.pop()
            text = "\n\n".join(t for t in (prev.text, msg.text) if t)
            msg = Message("user", text, tool_results=prev.tool_results + msg.tool_results)
        out.append(msg)
    return tuple(out)


def _said(turn: AssistantTurn) -> str:
    """An answer's text as the model is shown it. An answer with no text and no usable
    call (an empty one, or a lone call of an unknown tool, which the API's message may
    not carry) is never sent empty: the APIs refuse it and the task would fail."""
    if turn.text.strip() or turn.calls or turn.rejected:
        return turn.text
    if turn.unusable:
        ids = ", ".join(u.split(":", 1)[0] for u in turn.unusable)
        return f"(tool calls that could not be used: {ids})"
    return NO_TEXT


def truncate(text: str, keep: int | None) -> str:
    if keep is None:
        return text
    lines = text.splitlines()
    if len(lines) <= 2 * keep:
        return text
    omitted = len(lines) - 2 * keep
    return "\n".join([*lines[:keep], f"[truncated, {omitted} lines omitted]", *lines[-keep:]])


def summary_cut(turns: Sequence[StoredTurn], keep: int) -> int | None:
    """Where a summary may end: the seq of an assistant turn at least `keep` turns from
    the end, so that what is kept starts with the model's turn and no tool result is
    parted from its call. None when there is nothing old enough to summarize."""
    for i in range(len(turns) - keep, 0, -1):
        if isinstance(turns[i].turn, AssistantTurn):
            return turns[i].seq
    return None


def transcript(turns: Sequence[StoredTurn], limit: int = 200_000) -> str:
    """The turns as plain text, for the cheap tier to summarize."""
    parts: list[str] = []
    for stored in turns:
        turn = stored.turn
        if isinstance(turn, UserTurn):
            parts.append(f"USER: {turn.text}")
        elif isinstance(turn, SummaryTurn):
            parts.append(f"EARLIER SUMMARY: {turn.text}")
        elif isinstance(turn, AssistantTurn):
            calls = "; ".join(f"{c.name}({c.input})" for c in turn.calls)
            parts.append(f"ASSISTANT: {turn.text}" + (f" [calls: {calls}]" if calls else ""))
            parts.extend(f"RESULT (error): {r.name}({r.input}): {r.error}" for r in turn.rejected)
        else:
            assert isinstance(turn, ResultsTurn)
            for r in turn.results:
                parts.append(f"RESULT{' (error)' if r.is_error else ''}: {truncate(r.content, 10)}")
    text = "\n".join(parts)
    return text if len(text) <= limit else text[: limit // 2] + "\n…\n" + text[-limit // 2 :]
