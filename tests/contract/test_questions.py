"""The question family's contract: approvals and credential prompts, parked with their
task in one commit, and answered once."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from pfar.answers import Approve, Deny, Retry
from pfar.errors import (
    AlreadyDecided,
    AmbiguousId,
    AnswerDoesNotFit,
    IdPrefixTooShort,
    UnknownApproval,
    UnknownCredentialPrompt,
)
from pfar.journal import (
    ApprovalStatus,
    CredentialStatus,
    TaskRecord,
    TaskState,
)
from pfar.journal import payloads as p
from pfar.journal.records import now_rfc3339
from pfar.journal.store import Store

from . import builders as b
from .helpers import created, parked, run
from .verbs import covers

S = TaskState


# -- approvals ---------------------------------------------------------------------


@covers(
    "questions.park_approval",
    "questions.approval",
    "questions.approvals",
    "questions.approvals_for_task",
    "questions.next_deadline",
)
def test_park_approval_is_one_commit(store: Store) -> None:
    t, a = parked(store)
    task = run(store.tasks.get(t.task_id))
    assert task.payload == p.AwaitingApproval(approval_id=a.approval_id, step=1)
    stored = run(store.questions.approval(a.approval_id))
    assert stored == replace(a, prompts_sent=1)
    assert run(store.questions.approvals()) == [stored]
    assert run(store.questions.approvals_for_task(t.task_id)) == [stored]
    assert [m.message_key.text for m in run(store.events.pending())] == [
        f"approval:{a.approval_id}:0"
    ]
    assert run(store.questions.next_deadline()) == a.expires_at


@covers("questions.park_approval", "questions.approval")
def test_a_question_parked_without_a_prompt_queues_none_and_counts_none(store: Store) -> None:
    t = created(store, p.Executing(current_step=1))
    a = b.approval(t.task_id)
    run(
        store.questions.park_approval(
            a, None, p.AwaitingApproval(approval_id=a.approval_id, step=1)
        )
    )
    assert run(store.tasks.get(t.task_id)).state.value == "AwaitingApproval"
    assert run(store.questions.approval(a.approval_id)) == a  # prompts_sent stays 0
    assert run(store.events.pending()) == []


@covers("questions.park_approval")
def test_park_approval_on_another_question_writes_nothing(store: Store) -> None:
    t = created(store, p.Executing(current_step=1))
    a = b.approval(t.task_id)
    with pytest.raises(ValueError, match="another approval"):
        run(
            store.questions.park_approval(
                a, b.message("q"), p.AwaitingApproval(approval_id="other", step=1)
            )
        )
    assert run(store.tasks.get(t.task_id)) == t
    with pytest.raises(UnknownApproval):
        run(store.questions.approval(a.approval_id))
    assert run(store.events.pending()) == []


@covers("questions.decide_approval")
def test_decide_approval_once(store: Store) -> None:
    t, a = parked(store)
    calls: list[str] = []

    def resume(task: TaskRecord, ap: Any, answer: Any) -> Any:
        calls.append(answer.kind)
        return b.resume_to(task, ap, answer)

    decided, changed = run(
        store.questions.decide_approval(a.approval_id, Approve(), resume_to=resume, by="cli")
    )
    assert changed is True
    assert (decided.status, decided.decision) == (ApprovalStatus.approved, "approve")
    assert decided.decided_at is not None
    after = run(store.tasks.get(t.task_id))
    assert after.payload == p.Executing(
        current_step=1, retry_step=1, approved=p.Grant(step=1, args_sha256=a.args_sha256)
    )
    # the same answer again: one effect
    again, changed2 = run(
        store.questions.decide_approval(a.approval_id, Approve(), resume_to=resume, by="cli")
    )
    assert (again, changed2) == (decided, False)
    assert run(store.tasks.get(t.task_id)) == after
    assert calls == ["approve"]
    # a different answer: AlreadyDecided, nothing moves
    with pytest.raises(AlreadyDecided, match="approved"):
        run(store.questions.decide_approval(a.approval_id, Deny(), resume_to=resume, by="cli"))
    assert run(store.questions.approval(a.approval_id)) == decided
    assert run(store.tasks.get(t.task_id)) == after
    assert run(store.questions.approvals()) == []


@covers("questions.decide_approval")
def test_an_answer_not_offered_does_not_fit(store: Store) -> None:
    t, a = parked(store)
    before = run(store.tasks.get(t.task_id))
    with pytest.raises(AnswerDoesNotFit):
        run(
            store.questions.decide_approval(a.approval_id, Retry(), resume_to=b.resume_to, by="cli")
        )
    assert run(store.questions.approval(a.approval_id)) == replace(a, prompts_sent=1)
    assert run(store.tasks.get(t.task_id)) == before


@covers("questions.decide_approval")
def test_a_deny_moves_the_task_where_resume_to_says(store: Store) -> None:
    t, a = parked(store)
    decided, _ = run(
        store.questions.decide_approval(a.approval_id, Deny(), resume_to=b.resume_to, by="cli")
    )
    assert decided.status is ApprovalStatus.denied
    task = run(store.tasks.get(t.task_id))
    assert (task.state, task.error) == (S.Failed, "denied by the owner")


@covers("questions.decide_approval")
def test_concurrent_identical_answers_have_one_effect(store: Store) -> None:
    _, a = parked(store)

    async def go() -> list[tuple[Any, bool]]:
        return await asyncio.gather(
            *(
                store.questions.decide_approval(
                    a.approval_id, Approve(), resume_to=b.resume_to, by="cli"
                )
                for _ in range(8)
            )
        )

    results = run(go())
    assert sum(changed for _, changed in results) == 1
    assert len({r.decided_at for r, _ in results}) == 1


@covers("questions.decide_approval", "questions.receive_credential", "questions.credential_prompt")
def test_unknown_questions_are_named(store: Store) -> None:
    with pytest.raises(UnknownApproval, match="'zzz'"):
        run(store.questions.decide_approval("zzz", Approve(), resume_to=b.resume_to, by="cli"))
    with pytest.raises(UnknownCredentialPrompt, match="'ppp'"):
        run(store.questions.receive_credential("ppp", "cli"))
    with pytest.raises(UnknownCredentialPrompt):
        run(store.questions.credential_prompt("ppp"))


@covers("questions.expire_due")
def test_expire_due_fails_the_tasks_of_lapsed_questions_once(store: Store) -> None:
    late, a = parked(store, expires_in=-1)
    _, live = parked(store)
    t = created(store, p.Executing(current_step=2))
    pr = b.prompt(t.task_id, expires_in=-1)
    run(
        store.questions.park_credential(pr, b.message(f"credential:{pr.prompt_id}:0", "credential"))
    )
    failed = run(store.questions.expire_due(now_rfc3339()))
    assert sorted(failed) == sorted(
        [(late.task_id, "approval timeout"), (t.task_id, "credential prompt timeout")]
    )
    assert run(store.tasks.get(late.task_id)).state is S.Failed
    assert run(store.tasks.get(t.task_id)).state is S.Failed
    # a deadline that passed is recoverable: a retry goes back to the step that asked
    lapsed = run(store.tasks.get(late.task_id)).payload
    assert lapsed == p.Failed(recoverable=True, then=p.Executing(current_step=1))
    assert run(store.tasks.get(t.task_id)).payload == p.Failed(
        recoverable=True, then=p.Executing(current_step=2)
    )
    assert run(store.questions.approval(a.approval_id)).status is ApprovalStatus.expired
    assert run(store.questions.credential_prompt(pr.prompt_id)).status is CredentialStatus.expired
    assert run(store.questions.approval(live.approval_id)).status is ApprovalStatus.pending
    with pytest.raises(AlreadyDecided, match="expired"):
        run(
            store.questions.decide_approval(
                a.approval_id, Approve(), resume_to=b.resume_to, by="cli"
            )
        )
    with pytest.raises(AlreadyDecided):
        run(store.questions.receive_credential(pr.prompt_id, "cli"))
    assert run(store.questions.expire_due(now_rfc3339())) == []


# -- credential prompts -----------------------------------------------------------


@covers(
    "questions.park_credential",
    "questions.receive_credential",
    "questions.credential_prompt",
    "questions.credential_prompts",
    "questions.credential_prompts_for_task",
)
def test_park_credential_and_receive_it_once(store: Store) -> None:
    t = created(store, p.Executing(current_step=2))
    pr = b.prompt(t.task_id, step=2)
    key = f"credential:{pr.prompt_id}:0"
    run(store.questions.park_credential(pr, b.message(key, "credential", task_id=t.task_id)))
    assert run(store.tasks.get(t.task_id)).payload == p.AwaitingCredential(
        prompt_id=pr.prompt_id, service="notion", prompt_message_id=key, step=2
    )
    stored = run(store.questions.credential_prompt(pr.prompt_id))
    assert stored == replace(pr, message_id=key)
    assert run(store.questions.credential_prompts()) == [stored]
    assert run(store.questions.credential_prompts_for_task(t.task_id)) == [stored]
    assert [m.message_key.text for m in run(store.events.pending())] == [key]
    done, changed = run(store.questions.receive_credential(pr.prompt_id, "cli"))
    assert changed and done.status is CredentialStatus.received
    assert done.received_at is not None
    task = run(store.tasks.get(t.task_id))
    assert task.payload == p.Executing(current_step=2)
    with pytest.raises(AlreadyDecided, match="received"):
        run(store.questions.receive_credential(pr.prompt_id, "cli"))
    assert run(store.tasks.get(t.task_id)) == task
    assert run(store.questions.credential_prompts()) == []


@covers("questions.resolve_approval_id", "questions.resolve_prompt_id")
def test_a_question_is_found_by_its_id_or_an_unambiguous_prefix(store: Store) -> None:
    for approval_id in ("aaaa1111-x", "aaaa1111-y"):
        t = created(store, p.Executing(current_step=1))
        a = replace(b.approval(t.task_id), approval_id=approval_id)
        parked_on = p.AwaitingApproval(approval_id=approval_id, step=1)
        run(store.questions.park_approval(a, b.message(f"q:{approval_id}"), parked_on))
    assert run(store.questions.resolve_approval_id("aaaa1111-x")) == "aaaa1111-x"
    assert run(store.questions.resolve_approval_id("aaaa1111-y")) == "aaaa1111-y"
    with pytest.raises(AmbiguousId):
        run(store.questions.resolve_approval_id("aaaa1111"))
    with pytest.raises(IdPrefixTooShort):
        run(store.questions.resolve_approval_id("aa"))
    with pytest.raises(UnknownApproval):
        run(store.questions.resolve_approval_id("bbbb"))
    t = created(store, p.Executing(current_step=2))
    pr = replace(b.prompt(t.task_id), prompt_id="cccc2222-z")
    run(store.questions.park_credential(pr, b.message("c:1", "credential")))
    assert run(store.questions.resolve_prompt_id("cccc")) == "cccc2222-z"
    assert run(store.questions.resolve_prompt_id("cccc2222-z")) == "cccc2222-z"
    with pytest.raises(IdPrefixTooShort):
        run(store.questions.resolve_prompt_id("cc"))
    with pytest.raises(UnknownCredentialPrompt):
        run(store.questions.resolve_prompt_id("aaaa1111"))  # an approval's, not a prompt's
