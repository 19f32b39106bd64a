"""What to do with a plan step when a task resumes (persistence spec §7.3, sharpened).

The spec's rule is "a write that was in progress asks the owner". pfar asks
only when it must: a write in doubt is retried on its own when its tool is
idempotent by construction (it carries an idempotency key the far side
honours), and checked first when the tool can see its own effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from ..journal.question_kinds import QuestionKind
from ..journal.records import Idempotency, Semantics, StepRecord, StepStatus


class StepRecovery(StrEnum):
    SkipWithCachedResult = "SkipWithCachedResult"  # done: use the journaled result
    Retry = "Retry"  # a read, or a write whose retry the far side recognises
    Execute = "Execute"  # never started: run it normally
    CheckEffect = "CheckEffect"  # a write in doubt that can check whether it happened
    RequireOwnerConfirmation = "RequireOwnerConfirmation"  # may have happened: ask


def should_retry_step(
    step: StepRecord | None, semantics: Semantics, idempotency: Idempotency
) -> StepRecovery:
    if step is not None and step.status in (StepStatus.completed, StepStatus.skipped):
        return StepRecovery.SkipWithCachedResult
    if semantics is Semantics.Read:
        return StepRecovery.Retry
    was_in_progress = step is not None and step.status is StepStatus.started
    if not was_in_progress:
        return StepRecovery.Execute
    if idempotency is Idempotency.key:
        return StepRecovery.Retry
    if idempotency is Idempotency.check:
        return StepRecovery.CheckEffect
    return StepRecovery.RequireOwnerConfirmation


def may_run_again(failed: StepRecord) -> bool:
    """Whether a step that failed may run again when the owner retries its task: a read,
    or a write whose far side recognises the same call again (its idempotency key). A
    write of no key, or one only checked after the fact, may have had part of its
    effect before it failed: its task's failure is not recoverable."""
    return failed.semantics is Semantics.Read or failed.idempotency is Idempotency.key


def retry_hint(task_id: str) -> str:
    """What the owner is told of a failure they may retry."""
    return f"It can be retried from where it failed: pfar task retry {task_id[:8]}"


@dataclass(frozen=True, slots=True)
class Ask:
    """A runner's own question before a call runs (the agentic loop's permission prompt):
    `options[0]` lets it run; `on_deny` says what its "no" does to the step."""

    action_type: QuestionKind  # pfar's own: a template names none (it sets the rule)
    description: str
    options: tuple[str, ...]
    on_deny: Literal["fail", "skip"] = "skip"
    timeout: float | None = None
