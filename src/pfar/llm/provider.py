"""The LLM provider interface the pipeline's thinking phases call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Phase = Literal["extract", "plan", "synthesize"]


@dataclass(frozen=True, slots=True)
class LLMRequest:
    phase: Phase
    template_id: str
    input_text: str
    task_id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    step_results: list[Any] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    data_label: str = "internal"  # the task's data: decides whether it may go to the cloud
    cloud_approved: bool = False  # the owner approved sending it to the cloud anyway
    priority: int = 0  # at the shared rate limit, higher goes first
    # seconds each attempt of each model call may take (retry waits not included)
    attempt_timeout: float | None = None


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """Structured output (`data`, for extract and plan) or prose (`text`, for synthesize)."""

    data: dict[str, Any] | None = None
    text: str | None = None


class Provider(Protocol):
    name: str

    async def complete(self, request: LLMRequest) -> LLMResponse: ...
