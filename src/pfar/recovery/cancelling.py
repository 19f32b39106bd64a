"""What the owner is told when a task's cancel is finished (by the kernel, or by recovery
after a crash cut the cancel short): one short message, truthful about side effects."""

from __future__ import annotations

from ..journal import (
    ApprovalStatus,
    CredentialStatus,
    OwnerMessage,
    StepStatus,
    TaskRecord,
)
from ..journal.message_keys import CancelledKey, MessageKind
from ..journal.store import Store


async def cancel_message(journal: Store, task: TaskRecord, title: str) -> OwnerMessage:
    """Read before the commit that cancels: the steps it names are still marked running."""
    tid = task.task_id
    parts = [f"Task {title} ({tid[:8]}) was cancelled."]
    questions = [
        a.approval_id[:8]
        for a in await journal.questions.approvals_for_task(tid)
        if a.status is ApprovalStatus.withdrawn
    ] + [
        p.prompt_id[:8]
        for p in await journal.questions.credential_prompts_for_task(tid)
        if p.status is CredentialStatus.withdrawn
    ]
    if questions:
        parts.append(
            f"Its question{'s' if len(questions) > 1 else ''} [{', '.join(questions)}] "
            f"{'are' if len(questions) > 1 else 'is'} withdrawn."
        )
    total = len(task.plan_steps)
    for s in await journal.tasks.steps(tid):
        if s.status is StepStatus.started:
            of = f" of {total}" if total else ""
            parts.append(
                f"Step {s.step + 1}{of} ({s.tool}) was cut off while it ran: "
                "it may have had (some of) its effects."
            )
    return OwnerMessage(CancelledKey(tid), MessageKind.notice, " ".join(parts), tid)
