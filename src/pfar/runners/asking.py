"""Asking the owner: parking a task on a persisted question, and what the answer does.

A parked task holds no coroutine: the question is an approval record (or a
credential prompt) in the journal, its message is in the outbox, and the
answer moves the task on from the journal (`answer_outcome`).
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from ..answers import Answer, Approve, Continue, Deny, Fail, Retry, Skip
from ..errors import AnswerDoesNotFit, TaskStateRefused
from ..hooks import HookPoint
from ..journal import (
    ApprovalRecord,
    ApprovalStatus,
    CredentialPromptRecord,
    CredentialStatus,
    Move,
    OwnerMessage,
    TaskRecord,
    TaskState,
    TaskUpdate,
)
from ..journal.message_keys import ApprovalKey, CredentialKey, MessageKind
from ..journal.payloads import EMPTY, AwaitingApproval, Executing, Failed, Grant, Payload
from ..journal.question_kinds import QuestionKind
from ..journal.records import args_digest, now_rfc3339, rfc3339
from ..tools.admin import PromptCredential
from .services import Services


def _deadline(seconds: float) -> str:
    return rfc3339(datetime.now(UTC) + timedelta(seconds=seconds))


async def ask_owner(
    task: TaskRecord,
    svc: Services,
    *,
    action_type: QuestionKind,
    step: int,
    tool: str | None,
    options: list[str],
    description: str,
    preview: Any = None,
    taint: str | None = None,
    on_deny: Literal["fail", "skip"] = "fail",
    timeout: float | None = None,
    resume_to: Literal["Extracting", "Planning", "Synthesizing"] | None = None,
    template_seen: str | None = None,
) -> None:
    """Park the task on a question to the owner (an approval record); no coroutine waits."""
    if svc.hooks.wants(HookPoint.PreUserPrompt, tool):
        # the question kept is the one asked: a changed description is not asked again
        before = await svc.hooks.fire(
            HookPoint.PreUserPrompt,
            {
                "task_id": task.task_id,
                "kind": action_type.value,
                "step": step,
                "tool": tool,
                "options": options,
                "description": description,
            },
        )
        description = before.changes.get("description", description)
    text_preview = digest = None
    if preview is not None:
        # the whole action, never a prefix: what is cut for a chat message says so there
        text_preview = json.dumps(svc.redactor.value(preview), sort_keys=True, ensure_ascii=False)
        digest = args_digest(preview)
    approval = new_question(
        task.task_id,
        action_type=action_type,
        step=step,
        tool=tool,
        options=options,
        description=description,
        timeout=timeout or svc.approval_timeout_seconds,
        preview=text_preview,
        taint=taint,
        args_sha256=digest,
    )
    parked = AwaitingApproval(
        approval_id=approval.approval_id,
        step=step,
        on_deny=on_deny,
        resume_to=resume_to,
        template_seen=template_seen,
        approved=kept_grant(task.payload, step),
    )
    await svc.journal.questions.park_approval(approval, approval_message(approval, 0), parked)
    svc.notify_owner()


def kept_grant(payload: Payload, step: int) -> Grant | None:
    """The owner's grant for `step` (and the arguments it covers) outlives a later question
    about the same step, until the run it allows starts: that start spends it."""
    grant = payload.approved if isinstance(payload, Executing | AwaitingApproval) else None
    return grant if grant is not None and grant.step == step else None


def new_question(
    task_id: str,
    *,
    action_type: QuestionKind,
    step: int,
    tool: str | None,
    options: list[str],
    description: str,
    timeout: float,
    preview: str | None = None,
    taint: str | None = None,
    args_sha256: str | None = None,
) -> ApprovalRecord:
    """A pending question to the owner about `task_id`, not yet journaled; `options[0]` is
    what `pfar approve` answers."""
    return ApprovalRecord(
        approval_id=str(uuid.uuid4()),
        task_id=task_id,
        action_type=action_type,
        description=description,
        data_preview=preview,
        taint_level=taint,
        target_sink=tool,
        tool=tool,
        step=step,
        created_at=now_rfc3339(),
        expires_at=_deadline(timeout),
        status=ApprovalStatus.pending,
        options=options,
        decision=None,
        decided_at=None,
        prompts_sent=0,
        args_sha256=args_sha256,
    )


def approval_message(a: ApprovalRecord, attempt: int) -> OwnerMessage:
    """The prompt for an approval; `attempt` > 0 for a re-send after a restart."""
    first, *_ = a.options
    lines = [
        ("Approval needed" if attempt == 0 else "Approval re-sent after restart")
        + f" [{a.approval_id[:8]}]: {a.description}"
    ]
    if a.data_preview:
        lines.append("  action: " + preview_text(a.data_preview, a.approval_id))
    answers = [f"pfar approve {a.approval_id[:8]}  ({first})"]
    if "deny" in a.options or "fail" in a.options:
        deny = "deny" if "deny" in a.options else "fail"
        answers.append(f"pfar deny {a.approval_id[:8]}  ({deny})")
    answers += [
        f"pfar answer {a.approval_id[:8]} {o}" for o in a.options[1:] if o not in ("deny", "fail")
    ]
    lines.append("  answer: " + " | ".join(answers))
    lines.append(f"  expires: {a.expires_at}")
    return OwnerMessage(
        message_key=ApprovalKey(a.approval_id, attempt),
        kind=MessageKind.approval,
        task_id=a.task_id,
        body="\n".join(lines),
    )


# A chat message shows this much of an action; `pfar approval show` shows all of it.
PREVIEW_HEAD, PREVIEW_TAIL = 600, 200
_BLANK_RUN = re.compile(r"\s{8,}")


def preview_text(preview: str, approval_id: str) -> str:
    """An action as the owner reads it: whole when it is short, else its head and its
    tail around a plain statement of what was cut and how to see all of it. A run of
    blanks that could push a tail out of sight is shown as its length."""
    shown = _BLANK_RUN.sub(lambda m: f"⟨{len(m.group(0))} blanks⟩", preview)
    if len(shown) <= PREVIEW_HEAD + PREVIEW_TAIL:
        return shown
    cut = len(shown) - PREVIEW_HEAD - PREVIEW_TAIL
    return (
        f"{shown[:PREVIEW_HEAD]} … [cut: {cut} of {len(preview)} characters not shown here; "
        f"`pfar approval show {approval_id[:8]}` prints the whole action] … "
        f"{shown[-PREVIEW_TAIL:]}"
    )


def was_cut(preview: str | None) -> bool:
    """`preview_text` shows only part of this action (a chat shows no Yes for it until
    the owner has seen it whole: adapters/whole_action.py)."""
    if not preview:
        return False
    shown = _BLANK_RUN.sub(lambda m: f"⟨{len(m.group(0))} blanks⟩", preview)
    return len(shown) > PREVIEW_HEAD + PREVIEW_TAIL


async def park_credential(task: TaskRecord, svc: Services, i: int, args: dict[str, Any]) -> None:
    prompt = CredentialPromptRecord(
        prompt_id=str(uuid.uuid4()),
        task_id=task.task_id,
        service=str(args["service"]),
        credential_type=str(args.get("credential_type", "api_key")),
        instructions=str(args.get("instructions", f"Provide a {args['service']} credential.")),
        vault_ref=PromptCredential.vault_ref(args),
        message_id=None,
        created_at=now_rfc3339(),
        expires_at=_deadline(svc.credential_timeout_seconds),
        status=CredentialStatus.pending,
        step=i,
        received_at=None,
    )
    await svc.journal.questions.park_credential(prompt, credential_message(prompt, 0))
    svc.notify_owner()


def credential_message(p: CredentialPromptRecord, attempt: int) -> OwnerMessage:
    head = "Credential needed" if attempt == 0 else "Credential request re-sent after restart"
    body = (
        f"{head} [{p.prompt_id[:8]}]: {p.service} ({p.credential_type}).\n"
        f"  {p.instructions}\n"
        f"  answer: pfar credential {p.prompt_id[:8]}   (reads the secret from stdin)\n"
        f"  expires: {p.expires_at}"
    )
    return OwnerMessage(
        message_key=CredentialKey(p.prompt_id, attempt),
        kind=MessageKind.credential,
        task_id=p.task_id,
        body=body,
    )


def answer_outcome(task: TaskRecord, approval: ApprovalRecord, answer: Answer) -> Move:
    """Where the owner's answer sends a pipeline task parked on `approval` (runs inside
    the decision's commit): one dispatch over the answers the pipeline asks with."""
    parked = task.payload
    if not isinstance(parked, AwaitingApproval):  # the kernel refuses such an answer first
        raise TaskStateRefused(task.task_id, task.state.value, "answered", "it asks nothing")
    step = approval.step if approval.step is not None else parked.step
    if approval.action_type is QuestionKind.cloud_routing:
        return _cloud_routing(parked, answer)
    if approval.action_type is QuestionKind.spend_cap:
        return _spend_cap(parked, approval, step, answer)
    match answer:
        case Deny() if parked.on_deny == "skip":
            return _skip(step)
        case Deny() | Fail():
            return _fail(approval, "denied by the owner" if answer == Deny() else None)
        case Skip():
            return _skip(step)
        case Continue():
            # the owner accepted the template as it is now: that becomes the task's template
            return Move(
                Executing(current_step=step, approved=kept_grant(parked, step)),
                TaskUpdate(template_hash=parked.template_seen or ""),
            )
        case Approve() | Retry():
            # this step may run once more, with exactly the arguments shown
            granted = Grant(step=step, args_sha256=approval.args_sha256)
            return Move(Executing(current_step=step, approved=granted, retry_step=step))
        case _:
            raise AnswerDoesNotFit(approval.approval_id, answer.kind, approval.options)


def _skip(step: int) -> Move:
    return Move(Executing(current_step=step, skip_step=step))


def _fail(approval: ApprovalRecord, why: str | None) -> Move:
    why = why or "failed by the owner's decision"
    # the drift question's "fail" stops a task that looked stuck: the owner may still
    # retry it; any other "fail" or "deny" is the owner's answer to that very step
    failed = Failed(recoverable=approval.action_type is QuestionKind.drift)
    return Move(failed, TaskUpdate(error=f"{why}: {approval.description}"))


def _spend_cap(
    parked: AwaitingApproval, approval: ApprovalRecord, step: int, answer: Answer
) -> Move:
    """Back to the model call the cap held (what "continue" adds is the answer itself,
    kept with its question, which the spend gate sums: runners/spend_gate.py), or
    Failed, saying which cap."""
    match answer:
        case Continue() | Approve() | Retry():  # retry: a day's or month's cap was raised
            if parked.resume_to is not None:
                return Move(EMPTY[TaskState(parked.resume_to)])
            return Move(Executing(current_step=step, approved=kept_grant(parked, step)))
        case Deny() | Fail():
            return _fail(approval, "stopped at a spend cap by the owner")
        case _:
            raise AnswerDoesNotFit(approval.approval_id, answer.kind, approval.options)


def _cloud_routing(parked: AwaitingApproval, answer: Answer) -> Move:
    """Back to the thinking phase it was in; the approval itself is the permission."""
    if isinstance(answer, Deny | Fail):
        return Move(Failed(), TaskUpdate(error="cloud routing denied by the owner"))
    return Move(EMPTY[TaskState(parked.resume_to or "Extracting")])
