"""Rows the store passes as plain dicts with fixed keys: a model call and a task's usage,
a step's process, a task's decided learnings, a kernel's boot, a task's messages.

TypedDicts, not dataclasses: their readers index them (`usage["calls"]`), tests compare
them with dict literals, and a row goes to JSON (the audit log, the API) as it is.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class LlmCall(TypedDict):
    """One model call's usage and cost, as `llm_calls` keeps it."""

    task_id: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    time_to_first_token: float | None
    total_time: float
    cost_usd: float
    queued_seconds: float
    granted_at: NotRequired[float]  # wall clock when the limiter let it go (0.0: not told)
    at: NotRequired[str]  # when it was made, RFC 3339 in UTC (now, when not told)
    priced: NotRequired[bool]  # False: its model had no price, its cost is unknown (True)


class LlmCallMade(TypedDict):
    """One model call of a task, as its timeline tells it: when, which model, its usage."""

    at: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    priced: NotRequired[bool]  # False: its model had no price, its cost is unknown


class LlmUsage(TypedDict):
    """A task's model calls summed: how many, their tokens and their cost."""

    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


class StepProcess(TypedDict):
    """The process a running step started (tools/processes.py): a pid and its start time
    (clock ticks since boot) name one process, so a restart can end that one only."""

    pid: int
    start_time: int


class DecidedLearning(TypedDict):
    """One of a completed task's learnings, as decided before it is stored."""

    content: str
    tags: list[str]


class KernelBoot(TypedDict):
    """A kernel's start; `clean` once it ended by stopping (not by a crash)."""

    boot_id: str
    pid: int
    started_at: str
    ended_at: str | None
    clean: bool


class TaskMessage(TypedDict):
    """A message to the owner about a task, with how far its delivery got."""

    message_key: str
    kind: str
    body: str
    status: str
    created_at: str
    delivered_at: str | None
