"""`recover_tasks`: decide what every unfinished task needs, journal it, report it.

Planning reads only unfinished tasks (a partial index), so its cost grows with
unfinished work, not with history. Applying it is journaling: resumption itself
is the ordinary `advance`, run by the kernel afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..journal import ApprovalRecord, OwnerMessage, TaskKind, TaskRecord, UnreadableTask
from ..journal.costs_sql import Spent
from ..journal.message_key_parse import read_message_key
from ..journal.message_keys import CredentialKey, MessageKey, MessageKind, ReportKey
from ..journal.payloads import AwaitingApproval
from ..journal.store import Store
from ..money import dollars
from ..runners.asking import approval_message, credential_message
from .actions import (
    Decision,
    InFlightDeaths,
    PauseRequested,
    RecoveryAction,
    TooOld,
    Unrecoverable,
    WriteCutOff,
    WriteInDoubt,
    decide,
)
from .cancelling import cancel_message
from .in_flight import in_flight_question
from .report import RecoveryReport


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    decisions: list[Decision]
    tasks: dict[str, TaskRecord]
    # unfinished rows that cannot be read as tasks: reported, left exactly as they are
    malformed: list[UnreadableTask] = field(default_factory=list)


async def plan_recovery(
    journal: Store,
    now: datetime,
    max_age: timedelta,
    max_deaths: int,
    crashed: bool,
    *,
    claim: bool = False,
) -> RecoveryPlan:
    """What recovery would do. Changes nothing (`pfar recover --dry-run`) unless
    `claim`: a kernel about to recover claims the unfinished tasks it plans for (on a
    store shared by many kernels, a lease each; see `store.TaskStore`).

    `max_deaths` is `[recovery] max_recovery_attempts`: kernel deaths in a row with a
    task in flight and no progress before the owner is asked about it.
    """
    look = journal.tasks.claim_unfinished if claim else journal.tasks.unfinished
    tasks, malformed = await look()
    in_flight = await journal.tasks.steps_in_flight()
    decisions = [
        decide(t, now, max_age, max_deaths, crashed, in_flight.get(t.task_id)) for t in tasks
    ]
    return RecoveryPlan(decisions, {t.task_id: t for t in tasks}, malformed)


_GOES_ON = (
    RecoveryAction.RetryFromScratch,
    RecoveryAction.ResumeExecution,
    RecoveryAction.AskOwner,
)


def describe(task: TaskRecord, title: str, decision: Decision, turns: int = 0) -> str:
    """How the report names a task (spec §7.4's wording). A loop task is named with its
    conversation's length and the tool call it is at (`turns`: how many are journaled)."""
    if isinstance(decision.why, PauseRequested) and decision.why.cut is not None:
        return f"{title} — {_cut_off(task, decision.why.cut, turns)}"
    if task.kind is TaskKind.loop and decision.action in _GOES_ON:
        cut_off = decision.action is RecoveryAction.AskOwner or isinstance(
            decision.why, WriteCutOff
        )
        at = f", tool call {task.current_step + 1}" if cut_off else ""
        return f"{title} — at turn {turns}{at}"
    if decision.action in (RecoveryAction.ResumeExecution, RecoveryAction.AskOwner):
        return f"{title} — step {task.current_step + 1} of {len(task.plan_steps)}"
    if isinstance(decision.why, TooOld):
        return f"too old: {title} from {decision.why.minutes} min ago"
    return title


def _cut_off(task: TaskRecord, cut: WriteInDoubt | WriteCutOff, turns: int) -> str:
    """A paused task's write the crash cut off, and what its resume does with it."""
    if task.kind is TaskKind.loop:
        where = f"at turn {turns}, tool call {cut.step + 1} ({cut.tool})"
    else:
        where = f"step {cut.step + 1} of {cut.total} ({cut.tool})"
    if isinstance(cut, WriteInDoubt):
        then = "it may have had its effect; once resumed, you are asked to retry, skip or fail it"
    elif cut.checked:
        then = "once resumed, its effect is checked and it runs again only if it did not happen"
    else:
        then = "once resumed, it is sent again under the same idempotency key"
    return f"{where} was cut off by the crash: {then}"


def _spent(s: Spent | None) -> str:
    """What a task's model calls cost so far, as its line of the report says it."""
    if s is None or not s.tokens:
        return ""
    if s.unpriced >= s.calls:  # no call had a price: say so, never "$0.00 spent"
        return f", cost unknown ({s.tokens:,} tokens; its model has no price)"
    unknown = f", {s.unpriced} call(s) of unknown cost" if s.unpriced else ""
    return f", {dollars(s.cost_usd)} spent ({s.tokens:,} tokens{unknown})"


async def recover_tasks(
    journal: Store,
    plan: RecoveryPlan,
    title_of: Callable[[TaskRecord], str],
    *,
    count_attempts: bool,
    report_key: ReportKey,
    question_timeout: float,
    orphan_processes: int = 0,
    sessions_recovered: Sequence[str] = (),
    channel_doubts: int = 0,
    orphan_sandboxes: int = 0,
    schedules: Sequence[str] = (),
    vault: Sequence[str] = (),
) -> tuple[RecoveryReport, list[str]]:
    """Journal every decision and the owner's report in one commit; return the report
    and the task ids to resume.

    One commit, so that a task is never abandoned or parked without the report that
    says so being queued with it (and kept with its boot, `kernel_boots.report_json`):
    a kernel that dies here leaves either nothing decided or everything decided and the
    report waiting to be delivered. Prompts (re-sent ones, and the questions about tasks
    parked here, `question_timeout` seconds to answer) are queued after the report, so
    the owner reads the report first.
    """
    report = RecoveryReport(
        orphan_processes=orphan_processes,
        channel_doubts=channel_doubts,
        orphan_containers=orphan_sandboxes,
        sessions_recovered=list(sessions_recovered),
        schedules=list(schedules),
        vault=list(vault),
        malformed={m.task_id: f"{m.field}: {m.problem}" for m in plan.malformed},
    )
    prompts: list[OwnerMessage] = []
    to_resume: list[str] = []
    abandon: list[tuple[str, str]] = []
    park: list[tuple[ApprovalRecord, AwaitingApproval]] = []
    pause: list[str] = []
    cancel: list[str] = []
    # what each task's model calls cost so far (one read for them all): said with it
    spent = await journal.tasks.spent_by_tasks([d.task_id for d in plan.decisions])
    for d in plan.decisions:
        task = plan.tasks[d.task_id]
        turns = await journal.loops.turn_count(d.task_id) if task.kind is TaskKind.loop else 0
        report.descriptions[d.task_id] = describe(task, title_of(task), d, turns) + _spent(
            spent.get(d.task_id)
        )
        if d.action in (RecoveryAction.LeavePaused, RecoveryAction.Pause):
            if d.action is RecoveryAction.Pause:
                pause.append(d.task_id)
            report.paused.append(d.task_id)
        elif d.action is RecoveryAction.AwaitInput:
            report.waiting.append(d.task_id)
        elif d.action is RecoveryAction.Requeue:
            report.queued.append(d.task_id)
            to_resume.append(d.task_id)  # back in the queue, in its turn
        elif d.action is RecoveryAction.AwaitSubtask:
            report.blocked.append(d.task_id)
            to_resume.append(d.task_id)  # its runner looks at the subtask and waits on
        elif d.action is RecoveryAction.FinishCancel:
            # its processes were ended before this (orphan_processes): only the record is left
            cancel.append(d.task_id)
            report.cancelled.append(d.task_id)
            prompts.append(await cancel_message(journal, task, title_of(task)))
        elif d.action is RecoveryAction.Abandon:
            abandon.append((d.task_id, (d.why or Unrecoverable()).text()))
            report.abandoned.append(d.task_id)
        elif d.action is RecoveryAction.ParkInFlight:
            if not isinstance(d.why, InFlightDeaths):  # decide() always says how many
                raise TypeError(f"task {d.task_id}: ParkInFlight without its deaths")
            question, parked = in_flight_question(
                task, d.why.deaths, title_of(task), question_timeout
            )
            park.append((question, parked))
            prompts.append(approval_message(question, 0))
            report.parked[d.task_id] = d.why.deaths
        elif d.action is RecoveryAction.RepromptApproval:
            if not isinstance(task.payload, AwaitingApproval):  # its state says it is
                raise TypeError(f"task {d.task_id}: AwaitingApproval without its approval")
            a = await journal.questions.approval(task.payload.approval_id)
            prompts.append(approval_message(a, a.prompts_sent))
            report.reprompted.append(d.task_id)
            report.reprompt_kinds[d.task_id] = "approval"
        elif d.action is RecoveryAction.RepromptCredential:
            for p in await journal.questions.credential_prompts_for_task(d.task_id):
                if p.status.value == "pending":
                    # the first prompt is :0, so the number sent so far is the next attempt
                    attempt = sum(
                        1
                        for m in await journal.events.for_task(d.task_id)
                        if _asks(read_message_key(m["message_key"]), p.prompt_id)
                    )
                    prompts.append(credential_message(p, attempt))
            report.reprompted.append(d.task_id)
            report.reprompt_kinds[d.task_id] = "credential"
        elif d.action is RecoveryAction.AskOwner:
            report.asked.append(d.task_id)  # advance parks it on the question
            to_resume.append(d.task_id)
        else:
            (
                report.at_cut_off_write
                if isinstance(d.why, WriteCutOff)
                else report.resumed
                # a loop task goes on from its journaled conversation: never from scratch
                if d.action in (RecoveryAction.ResumeExecution, RecoveryAction.Resynthesize)
                or task.kind is TaskKind.loop
                else report.retried
            ).append(d.task_id)
            to_resume.append(d.task_id)
    kept = report.stored()  # the text sent and the lines kept, made once
    await journal.tasks.apply_recovery(
        abandon=abandon,
        park=park,
        attempted=to_resume if count_attempts else [],
        messages=[OwnerMessage(report_key, MessageKind.report, kept.text), *prompts],
        pause=pause,
        cancel=cancel,
        # kept with the boot, in the commit that queues it: every restart's report stays
        # readable (the console's recoveries) for as long as its boot is kept
        report=(report_key.boot_id, kept),
        recovered=[(d.task_id, d.action.value, d.reason) for d in plan.decisions],
    )
    return report, to_resume


def _asks(key: MessageKey, prompt_id: str) -> bool:
    """`key` is one of the prompts for the credential `prompt_id`."""
    return isinstance(key, CredentialKey) and key.prompt_id == prompt_id
