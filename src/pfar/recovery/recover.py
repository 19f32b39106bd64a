"""`recover_tasks`: decide what every unfinished task needs, journal it, report it.

Planning reads only unfinished tasks (a partial index), so its cost grows with
unfinished work, not with history. Applying it is journaling: resumption itself
is the ordinary `advance`, run by the kernel afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..journal import Journal, OwnerMessage, TaskRecord
from ..journal.records import parse_rfc3339
from ..runners.asking import approval_message, credential_message
from .actions import Decision, RecoveryAction, decide
from .cancelling import cancel_message
from .report import RecoveryReport


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    decisions: list[Decision]
    tasks: dict[str, TaskRecord]


def plan_recovery(
    journal: Journal, now: datetime, max_age: timedelta, max_attempts: int, crashed: bool
) -> RecoveryPlan:
    """What recovery would do. Changes nothing (this is `pfar recover --dry-run`)."""
    tasks = journal.unfinished()
    in_flight = journal.steps_in_flight()
    decisions = [
        decide(t, now, max_age, max_attempts, crashed, in_flight.get(t.task_id)) for t in tasks
    ]
    return RecoveryPlan(decisions, {t.task_id: t for t in tasks})


def describe(task: TaskRecord, title: str, decision: Decision, now: datetime) -> str:
    """How the report names a task (spec §7.4's wording)."""
    if decision.action in (RecoveryAction.ResumeExecution, RecoveryAction.AskOwner):
        total = len((task.plan or {}).get("steps", []))
        return f"{title} — step {task.current_step + 1} of {total}"
    if decision.action is RecoveryAction.Abandon:
        if task.recovery_attempts and "crashed the kernel" in decision.reason:
            return f"its recovery crashed the kernel {task.recovery_attempts} times: {title}"
        minutes = int((now - parse_rfc3339(task.last_activity)).total_seconds() // 60)
        return f"too old: {title} from {minutes} min ago"
    return title


async def recover_tasks(
    journal: Journal,
    plan: RecoveryPlan,
    now: datetime,
    title_of: Callable[[TaskRecord], str],
    *,
    count_attempts: bool,
    report_key: str,
    orphan_processes: int = 0,
    sessions_recovered: Sequence[str] = (),
) -> tuple[RecoveryReport, list[str]]:
    """Journal every decision and the owner's report in one commit; return the report
    and the task ids to resume.

    One commit, so that a task is never abandoned without the report that says so
    being queued with it: a kernel that dies here leaves either nothing decided or
    everything decided and the report waiting to be delivered. Re-sent prompts are
    queued after the report, so the owner reads the report first.
    """
    report = RecoveryReport(
        orphan_processes=orphan_processes, sessions_recovered=list(sessions_recovered)
    )
    prompts: list[OwnerMessage] = []
    to_resume: list[str] = []
    abandon: list[tuple[str, str]] = []
    pause: list[str] = []
    cancel: list[str] = []
    for d in plan.decisions:
        task = plan.tasks[d.task_id]
        report.descriptions[d.task_id] = describe(task, title_of(task), d, now)
        if d.action in (RecoveryAction.LeavePaused, RecoveryAction.Pause):
            if d.action is RecoveryAction.Pause:
                pause.append(d.task_id)
            report.paused.append(d.task_id)
        elif d.action is RecoveryAction.FinishCancel:
            # its processes were ended before this (orphan_processes): only the record is left
            cancel.append(d.task_id)
            report.cancelled.append(d.task_id)
            prompts.append(cancel_message(journal, task, title_of(task)))
        elif d.action is RecoveryAction.Abandon:
            abandon.append((d.task_id, d.reason or "Abandoned: unrecoverable state"))
            report.abandoned.append(d.task_id)
        elif d.action is RecoveryAction.RepromptApproval:
            approval_id = str(task.detail.get("approval_id", ""))
            a = journal.approval(approval_id)
            prompts.append(approval_message(a, a.prompts_sent))
            report.reprompted.append(d.task_id)
            report.reprompt_kinds[d.task_id] = "approval"
        elif d.action is RecoveryAction.RepromptCredential:
            for p in journal.credential_prompts_for_task(d.task_id):
                if p.status.value == "pending":
                    # the first prompt is :0, so the number sent so far is the next attempt
                    attempt = sum(
                        1
                        for m in journal.messages_for_task(d.task_id)
                        if m["message_key"].startswith(f"credential:{p.prompt_id}:")
                    )
                    prompts.append(credential_message(p, attempt))
            report.reprompted.append(d.task_id)
            report.reprompt_kinds[d.task_id] = "credential"
        elif d.action is RecoveryAction.AskOwner:
            report.asked.append(d.task_id)  # advance parks it on the question
            to_resume.append(d.task_id)
        else:
            (
                report.resumed
                if d.action in (RecoveryAction.ResumeExecution, RecoveryAction.Resynthesize)
                else report.retried
            ).append(d.task_id)
            to_resume.append(d.task_id)
    await journal.apply_recovery(
        abandon=abandon,
        attempted=to_resume if count_attempts else [],
        messages=[OwnerMessage(report_key, "report", report.render()), *prompts],
        pause=pause,
        cancel=cancel,
    )
    return report, to_resume
