"""Typed state payloads: stored as JSON with a kind tag, validated when read, reported by
task id and field when malformed; and the upgrade of rows written before they existed."""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pfar.answers import Approve
from pfar.errors import IllegalTransition, MalformedTaskRow, TaskStateRefused
from pfar.journal import (
    ApprovalRecord,
    ApprovalStatus,
    OwnerMessage,
    TaskKind,
    TaskRecord,
    TaskState,
)
from pfar.journal import payloads as p
from pfar.journal.message_keys import CancelledKey, MessageKind
from pfar.journal.payloads import Payload
from pfar.journal.records import UnreadableTask
from pfar.journal.sqlite import open_journal
from pfar.kernel.answering import _answer_outcome
from pfar.kernel.api import HomeReader
from pfar.vault.driver import sqlite
from pfar.vault.home import Home
from tests.contract.builders import task

_steps = st.integers(min_value=0, max_value=500)
_sha = st.none() | st.text("0123456789abcdef", min_size=64, max_size=64)
_grants = st.none() | st.builds(p.Grant, step=_steps, args_sha256=_sha)
_requests = st.none() | st.builds(
    p.LlmRequest, phase=st.sampled_from(["extract", "plan", "synthesize"]), sent_at=st.text()
)
_working = st.one_of(
    st.builds(p.Extracting, pause_requested=st.booleans(), llm_request=_requests),
    st.builds(p.Planning, pause_requested=st.booleans(), llm_request=_requests),
    st.builds(
        p.Executing,
        current_step=_steps,
        retry_step=st.none() | _steps,
        skip_step=st.none() | _steps,
        approved=_grants,
        workflow_answer=st.none()
        | st.builds(
            p.WorkflowAnswer,
            option=st.sampled_from(["rerun", "skip", "continue"]),
            question=st.just("workflow_interrupted"),
            step=_steps,
            approval_id=st.uuids().map(str),
        ),
        pause_requested=st.booleans(),
    ),
    st.builds(p.Synthesizing, pause_requested=st.booleans(), llm_request=_requests),
)
payloads = st.one_of(
    _working,
    st.builds(
        p.AwaitingApproval,
        approval_id=st.uuids().map(str),
        step=_steps,
        on_deny=st.sampled_from(["fail", "skip"]),
        resume_to=st.none() | st.sampled_from(["Extracting", "Planning", "Synthesizing"]),
        template_seen=st.none() | st.text(max_size=20),
        approved=_grants,
        in_flight=st.none()
        | st.builds(p.InFlight, deaths=st.integers(min_value=1, max_value=99), then=_working),
    ),
    st.builds(
        p.AwaitingCredential,
        prompt_id=st.uuids().map(str),
        service=st.text(min_size=1, max_size=20),
        prompt_message_id=st.text(min_size=1, max_size=20),
        step=_steps,
    ),
    st.builds(p.WaitingForUser, after=_steps, next_step=_steps),
    st.builds(p.Blocked, step=_steps, child_task_id=st.uuids().map(str)),
    st.builds(p.Paused, then=_working),
    st.builds(p.Cancelling, cancelled_from=st.sampled_from(list(TaskState)), step=_steps),
    st.sampled_from([p.Completed(), p.Failed(), p.Abandoned(), p.Cancelled()]),
    st.builds(
        p.Failed,
        recoverable=st.booleans(),
        retry_count=st.integers(min_value=0, max_value=99),
        then=st.none() | _working,
    ),
)


@given(payloads)
def test_every_payload_reads_back_as_written(payload: Payload) -> None:
    text = p.dumps(payload)
    assert json.loads(text)["kind"] == payload.kind
    assert p.loads("t-1", payload.kind, text) == payload


def test_a_failure_kept_before_retries_existed_reads_as_not_recoverable() -> None:
    old = p.loads("t-1", "Failed", '{"kind":"Failed"}')
    assert old == p.Failed(recoverable=False, retry_count=0, then=None)
    kept = p.Failed(recoverable=True, retry_count=2, then=p.Executing(current_step=3))
    assert p.dumps(kept) == (
        '{"kind":"Failed","recoverable":true,"retry_count":2,'
        '"then":{"kind":"Executing","current_step":3}}'
    )


def test_a_retry_goes_back_to_the_work_a_failure_interrupted_and_nothing_of_its_moment() -> None:
    sent = p.LlmRequest(phase="loop", sent_at="now")
    spent = p.Grant(step=3)
    at = p.Executing(current_step=3, retry_step=3, approved=spent, llm_request=sent)
    assert p.resume_point(at) == p.Executing(current_step=3)
    assert p.resume_point(p.Planning(pause_requested=True, llm_request=sent)) == p.Planning()
    asked = p.AwaitingApproval(approval_id="a", step=5)
    assert p.resume_point(asked) == p.Executing(current_step=5)
    routed = p.AwaitingApproval(approval_id="a", resume_to="Synthesizing")
    assert p.resume_point(routed) == p.Synthesizing()
    assert p.resume_point(p.Paused(then=p.Executing(current_step=2))) == p.Executing(current_step=2)
    assert p.resume_point(p.WaitingForUser(after=4, next_step=2)) is None
    assert p.resume_point(p.Completed()) is None


def test_only_what_differs_from_the_defaults_is_stored() -> None:
    assert p.dumps(p.Executing(current_step=4)) == '{"kind":"Executing","current_step":4}'
    assert p.dumps(p.Paused(then=p.Executing())) == (
        '{"kind":"Paused","then":{"kind":"Executing"}}'
    )


@pytest.mark.parametrize(
    ("state", "text", "field", "problem"),
    [
        ("Executing", '{"kind":"Executing","current_step":"3"}', "current_step", "integer"),
        ("Executing", '{"kind":"Executing","step_to_retry":1}', "step_to_retry", "Unexpected"),
        ("Executing", '{"kind":"Running"}', "", "does not match any of the expected tags"),
        ("Executing", '{"current_step":3}', "", "Unable to extract tag"),
        ("Executing", "[1, 2]", "", "should be an object"),
        ("Executing", '{"kind":"Planning"}', "kind", "the row's state is 'Executing'"),
        ("Paused", '{"kind":"Paused","then":{"kind":"Completed"}}', "then", "does not match"),
        ("AwaitingApproval", '{"kind":"AwaitingApproval"}', "approval_id", "Field required"),
        (
            "Paused",
            '{"kind":"Paused","then":{"kind":"Executing","current_step":-1.5}}',
            "then.current_step",
            "integer",
        ),
    ],
)
def test_a_malformed_payload_is_reported_by_task_and_field(
    state: str, text: str, field: str, problem: str
) -> None:
    with pytest.raises(MalformedTaskRow) as info:
        p.loads("task-42", state, text)
    assert info.value.task_id == "task-42"
    assert info.value.field == "state_detail" + (f".{field}" if field else "")
    assert problem.lower() in info.value.problem.lower()
    assert "task-42" in str(info.value) and info.value.field in str(info.value)


# -- rows written before typed payloads ---------------------------------------------


def _old_vault(path: Path, rows: list[tuple[str, str, str, str]]) -> None:
    """A vault at schema version 5, holding `rows` (task_id, template_id, state, detail)."""
    conn = sqlite.connect(path)
    folder = resources.files("pfar.vault").joinpath("migrations")
    for n in range(1, 6):
        (entry,) = [e for e in folder.iterdir() if e.name.startswith(f"sessions_{n:04d}_")]
        conn.executescript(entry.read_text(encoding="utf-8"))
        conn.execute(
            "INSERT INTO schema_version VALUES (?, ?, '2026-01-01T00:00:00Z')", (n, entry.name)
        )
    for task_id, template_id, state, detail in rows:
        conn.execute(
            "INSERT INTO task_journal (task_id, template_id, principal, trigger_event, state, "
            "state_detail, phase, plan_json, execute_progress, extracted_metadata, "
            "data_ceiling, output_sinks, trace_id, created_at, updated_at, error, event_id, "
            "template_hash, recovery_attempts) VALUES (?, ?, 'owner', '{}', ?, ?, 'execute', "
            "'{\"steps\":[{},{},{}]}', NULL, NULL, 'internal', '[\"owner\"]', NULL, "
            "'2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', NULL, NULL, 'h', 0)",
            (task_id, template_id, state, detail),
        )
    conn.commit()
    conn.close()


OLD_ROWS = {
    "executing": (
        "Executing",
        {"current_step": 2, "retry_step": 2, "approved_step": 2, "approved_args": "ab"},
        p.Executing(current_step=2, retry_step=2, approved=p.Grant(step=2, args_sha256="ab")),
    ),
    "planning": (
        "Planning",
        {"pause_requested": True, "llm_request": {"phase": "plan", "sent_at": "t"}},
        p.Planning(pause_requested=True, llm_request=p.LlmRequest(phase="plan", sent_at="t")),
    ),
    "approval": (
        "AwaitingApproval",
        {
            "approval_id": "a-1",
            "step": 1,
            "current_step": 1,
            "on_deny": "skip",
            "template_seen": "h2",
        },
        p.AwaitingApproval(approval_id="a-1", step=1, on_deny="skip", template_seen="h2"),
    ),
    "parked": (
        "AwaitingApproval",
        {
            "approval_id": "a-2",
            "step": 0,
            "current_step": 0,
            "on_deny": "fail",
            "parked_from": {"state": "Executing", "detail": {"current_step": 0}, "deaths": 3},
        },
        p.AwaitingApproval(approval_id="a-2", in_flight=p.InFlight(deaths=3, then=p.Executing())),
    ),
    "cloud": (
        "AwaitingApproval",
        {"approval_id": "a-3", "step": 0, "current_step": 0, "resume_state": "Planning"},
        p.AwaitingApproval(approval_id="a-3", resume_to="Planning"),
    ),
    "credential": (
        "AwaitingCredential",
        {
            "service": "github",
            "prompt_id": "p-1",
            "prompt_message_id": "credential:p-1:0",
            "step": 1,
            "current_step": 1,
        },
        p.AwaitingCredential(
            prompt_id="p-1", service="github", prompt_message_id="credential:p-1:0", step=1
        ),
    ),
    "paused": (
        "Paused",
        {"current_step": 1, "paused_from": "Executing"},
        p.Paused(then=p.Executing(current_step=1)),
    ),
    "cancelling": (
        "Cancelling",
        {"current_step": 1, "cancelled_from": "Executing"},
        p.Cancelling(cancelled_from=TaskState.Executing, step=1),
    ),
    "done": ("Completed", {"current_step": 3}, p.Completed()),
    "workflow": (
        "Executing",
        # a decision not bound to its question is not carried over: the trace asks again
        {"current_step": 0, "workflow_decision": "rerun"},
        p.Executing(),
    ),
}


def test_rows_of_every_state_are_upgraded_to_their_typed_payloads(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    _old_vault(
        path,
        [
            (tid, "workflow:build" if tid == "workflow" else "note", state, json.dumps(detail))
            for tid, (state, detail, _) in OLD_ROWS.items()
        ],
    )
    with open_journal(path) as journal:
        for tid, (state, _, payload) in OLD_ROWS.items():
            task = asyncio.run(journal.tasks.get(tid))
            assert (task.state, task.payload) == (TaskState(state), payload), tid
        assert asyncio.run(journal.tasks.get("workflow")).kind is TaskKind.workflow
        assert asyncio.run(journal.tasks.get("executing")).kind is TaskKind.pipeline
        assert (
            asyncio.run(journal.tasks.latest_workflow_task("")) is None
        )  # by kind, not by template name


def test_a_row_the_upgrade_cannot_read_is_left_as_it_was_and_reported(tmp_path: Path) -> None:
    """Never guessed at, never overwritten: recovery names it, other tasks go on, and the
    owner can still cancel it."""
    path = tmp_path / "sessions.db"
    _old_vault(
        path,
        [
            ("bad", "note", "Executing", "{not json"),
            ("lost", "note", "Paused", '{"current_step": 1}'),  # paused from where?
            ("float", "note", "Executing", '{"current_step": 2.0}'),  # never read as step 0
            ("Workflow", "Workflow:x", "Executing", '{"current_step": 0}'),
            ("good", "note", "Executing", '{"current_step": 1}'),
        ],
    )
    with open_journal(path) as journal:
        rows = dict(journal._db.reader.execute("SELECT task_id, state_detail FROM task_journal"))
        assert rows["bad"] == "{not json" and rows["lost"] == '{"current_step": 1}'
        assert rows["float"] == '{"current_step": 2.0}'
        tasks, malformed = asyncio.run(journal.tasks.unfinished())
        assert sorted(t.task_id for t in tasks) == ["Workflow", "good"]
        assert (
            asyncio.run(journal.tasks.get("Workflow")).kind is TaskKind.pipeline
        )  # the prefix is exact
        assert {(m.task_id, m.field) for m in malformed} == {
            ("bad", "state_detail"),
            ("lost", "state_detail"),
            ("float", "state_detail"),
        }
        with pytest.raises(MalformedTaskRow, match="task bad: its journal row is malformed"):
            asyncio.run(journal.tasks.get("bad"))
        listed = {
            t.task_id: t for t in asyncio.run(journal.tasks.listing())
        }  # every row, the bad ones as they are
        assert isinstance(listed["good"], TaskRecord)
        unreadable = listed["lost"]
        assert isinstance(unreadable, UnreadableTask)
        assert (unreadable.state, unreadable.template_id) == ("Paused", "note")
        assert unreadable.field.startswith("state_detail")
        assert "task lost: its journal row is malformed: state_detail" in unreadable.error
        listed = asyncio.run(HomeReader(Home(tmp_path), journal).tasks())
        summary = {s.task_id: s for s in listed}["bad"]
        assert summary.state is TaskState.Executing and "malformed" in (summary.error or "")

        async def cancel() -> None:
            await journal.tasks.begin_cancel("bad")
            await journal.tasks.finish_cancel(
                "bad", OwnerMessage(CancelledKey("bad"), MessageKind.notice, "x", "bad")
            )

        asyncio.run(cancel())
        assert asyncio.run(journal.tasks.get("bad")).state is TaskState.Cancelled


# -- rows that only their state can be read of: they still time out and still end ------


def _journal_with(tmp_path: Path, rows: list[tuple[str, str, str, str]]) -> Path:
    path = tmp_path / "sessions.db"
    _old_vault(path, rows)
    with open_journal(path):  # upgraded, then closed
        pass
    return path


def _corrupt(path: Path, task_id: str, detail: str) -> None:
    conn = sqlite.connect(path)
    conn.execute("UPDATE task_journal SET state_detail = ? WHERE task_id = ?", (detail, task_id))
    conn.commit()
    conn.close()


def test_an_unreadable_parked_task_times_out_without_holding_back_the_others(
    tmp_path: Path,
) -> None:
    path = _journal_with(
        tmp_path,
        [
            ("odd", "note", "AwaitingApproval", '{"approval_id": "a-odd", "step": 0}'),
            ("fine", "note", "AwaitingApproval", '{"approval_id": "a-fine", "step": 0}'),
        ],
    )
    _corrupt(path, "odd", '{"kind":"AwaitingApproval","approval_id":"a-odd","color":"red"}')
    conn = sqlite.connect(path)
    for approval_id, task_id in (("a-odd", "odd"), ("a-fine", "fine")):
        conn.execute(
            "INSERT INTO pending_approvals (approval_id, task_id, action_type, description, "
            "created_at, expires_at, status, options_json, prompts_sent) VALUES "
            "(?, ?, 'write', 'x', '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z', 'pending', "
            '\'["approve","deny"]\', 1)',
            (approval_id, task_id),
        )
    conn.commit()
    conn.close()
    with open_journal(path) as journal:
        failed = asyncio.run(journal.questions.expire_due("2027-01-01T00:00:00Z"))
        assert sorted(failed) == [("fine", "approval timeout"), ("odd", "approval timeout")]
        assert asyncio.run(journal.tasks.get("odd")).state is TaskState.Failed


def test_a_model_call_is_journaled_only_while_its_task_thinks(tmp_path: Path) -> None:
    """A cancel committed first: the runner's late "request sent" is refused, and the row
    stays one pfar can read (the cancel can finish)."""
    path = _journal_with(tmp_path, [("t", "note", "Planning", "{}")])
    with open_journal(path) as journal:

        async def go() -> None:
            await journal.tasks.begin_cancel("t")
            with pytest.raises(IllegalTransition, match="task t: cannot go from Cancelling"):
                await journal.tasks.llm_request_sent("t", "plan")
            await journal.tasks.finish_cancel(
                "t", OwnerMessage(CancelledKey("t"), MessageKind.notice, "x", "t")
            )

        asyncio.run(go())
        assert asyncio.run(journal.tasks.get("t")).state is TaskState.Cancelled


def test_an_answer_moves_only_the_task_parked_on_that_very_question() -> None:
    from pfar.journal import ApprovalRecord

    def question(approval_id: str) -> ApprovalRecord:
        return ApprovalRecord(
            approval_id, "t-1", "write", "x", None, None, None, None, 0, "", "",
            ApprovalStatus.pending, ["approve", "deny"], None, None, 0,
        )  # fmt: skip

    parked = task(payload=p.AwaitingApproval(approval_id="current", step=0))
    assert isinstance(_answer_outcome(parked, question("current"), Approve()).to, p.Executing)
    with pytest.raises(TaskStateRefused, match="not waiting on question stale"):
        _answer_outcome(parked, question("stale-question"), Approve())
    running = task(payload=p.Executing())
    with pytest.raises(TaskStateRefused, match="is Executing"):
        _answer_outcome(running, question("current"), Approve())
