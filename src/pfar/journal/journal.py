"""The journal: pfar's durable state, written through group commit, read directly.

Every write method returns only after its transaction is committed. Each
transition is checked against the row as it is inside the transaction, so the
state machine cannot be raced past.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from ..answers import Answer
from ..errors import (
    AlreadyDecided,
    AnswerDoesNotFit,
    IllegalTransition,
    MalformedTaskRow,
    UnknownApproval,
    UnknownCredentialPrompt,
    UnknownTask,
)
from ..vault.sqlite import (
    DamagedDatabase,
    Synchronous,
    check_table,
    connect,
    open_vault_db,
    recovery_advice,
)
from . import approvals_sql, events_sql, holds, payloads, steps_sql, tasks_sql
from .faults import FaultHook
from .ids import resolve_id
from .payloads import Payload, state_of
from .records import (
    ApprovalRecord,
    ApprovalStatus,
    CredentialPromptRecord,
    CredentialStatus,
    InboundEvent,
    Move,
    OwnerMessage,
    StepRecord,
    StepStatus,
    TaskRecord,
    TaskUpdate,
    UnreadableTask,
    now_rfc3339,
)
from .states import TERMINAL, TaskState, check_transition
from .writer import GroupCommitWriter

T = TypeVar("T")
NO_UPDATE = TaskUpdate()


class Journal:
    def __init__(
        self,
        path: Path,
        writer_conn: sqlite3.Connection | None,
        reader: sqlite3.Connection,
        writer: GroupCommitWriter | None,
    ) -> None:
        self.path = path
        self._writer_conn = writer_conn
        self._reader = reader
        self._writer = writer

    # -- opening and closing -------------------------------------------------

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        create: bool = False,
        synchronous: Synchronous = "FULL",
        fault_hook: FaultHook | None = None,
    ) -> Journal:
        wconn = open_vault_db(path, "sessions", create=create, synchronous=synchronous)
        reader = connect(path, synchronous=synchronous)
        writer = GroupCommitWriter(wconn, fault_hook=fault_hook)
        return cls(path, wconn, reader, writer)

    @classmethod
    def open_readonly(cls, path: Path) -> Journal:
        """For inspecting a vault no kernel owns: nothing can be written through it."""
        conn = open_vault_db(path, "sessions", readonly=True)
        return cls(path, None, conn, None)

    def close(self, *, checkpoint: bool = True) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._writer_conn is not None:
            if checkpoint and self._writer is not None and self._writer.failure is None:
                self._writer_conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._writer_conn.close()
        self._reader.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(checkpoint=False)

    @property
    def writer(self) -> GroupCommitWriter:
        if self._writer is None:
            raise RuntimeError("this journal was opened read-only")
        return self._writer

    async def _write(
        self, op: Callable[[sqlite3.Connection], T], point: str | tuple[str, ...] | None
    ) -> T:
        return await self.writer.submit(op, point)

    def write_sync(self, op: Callable[[sqlite3.Connection], T], point: str | None = None) -> T:
        return self.writer.run(op, point)

    # -- reads ---------------------------------------------------------------

    def task(self, task_id: str) -> TaskRecord:
        rec = tasks_sql.get(self._reader, task_id)
        if rec is None:
            raise UnknownTask(task_id)
        return rec

    def resolve_task_id(self, prefix: str) -> str:
        """Accept a full id or an unambiguous prefix, as `pfar task show` prints them."""
        return resolve_id(self._reader, "task_journal", "task_id", prefix, "task", UnknownTask)

    def tasks(
        self, states: Sequence[str] | None = None, limit: int = 50
    ) -> list[TaskRecord | UnreadableTask]:
        """Tasks newest first; a row that cannot be read as one is listed as UnreadableTask."""
        return tasks_sql.listing(self._reader, states, limit)

    def latest_workflow_task(self, directory: str) -> str | None:
        return tasks_sql.latest_workflow_task(self._reader, directory)

    def counts(self) -> dict[str, int]:
        return tasks_sql.counts(self._reader)

    def unfinished(self) -> tuple[list[TaskRecord], list[MalformedTaskRow]]:
        """Unfinished tasks, and the unfinished rows that cannot be read as tasks."""
        return tasks_sql.unfinished(self._reader)

    def steps(self, task_id: str) -> list[StepRecord]:
        steps = steps_sql.for_task(self._reader, task_id)
        numbers = [s.step for s in steps]
        done = self._steps_done(task_id)
        if numbers != list(range(len(numbers))) or len(numbers) < done:
            self._check_steps()
        if len(numbers) < done:
            self._missing_steps(task_id, len(numbers), done)
        return steps

    def step(self, task_id: str, step: int) -> StepRecord | None:
        rec = steps_sql.get(self._reader, task_id, step)
        if rec is None and step < (done := self._steps_done(task_id)):
            self._check_steps()
            self._missing_steps(task_id, 0, done)
        return rec

    def _missing_steps(self, task_id: str, found: int, done: int) -> None:
        """A row hidden by a damaged key can leave the b-tree in order, so even SQLite's
        integrity check may pass; the task's progress still says the row must exist."""
        raise DamagedDatabase(
            f"{self.path} is damaged (table task_steps: task {task_id} finished {done} "
            f"step(s) but {'only ' + str(found) if found else 'not all'} of their rows can "
            f"be read); pfar changed nothing in it. {recovery_advice(self.path)}"
        )

    def _steps_done(self, task_id: str) -> int:
        """How many steps the task's progress says were finished (each one has its row)."""
        progress = tasks_sql.progress(self._reader, task_id)
        last, current = progress.get("last_completed"), progress.get("current_step")
        return max(
            last + 1 if isinstance(last, int) else 0, current if isinstance(current, int) else 0
        )

    def _check_steps(self) -> None:
        """Steps missing from what the task's progress promises: a damaged page can hide
        rows without an error, so look before answering with a short list. A step row
        is written in the same commit as the progress that names it."""
        check_table(self._reader, self.path, "task_steps")

    def approval(self, approval_id: str) -> ApprovalRecord:
        rec = approvals_sql.get_approval(self._reader, approval_id)
        if rec is None:
            raise UnknownApproval(approval_id)
        return rec

    def approvals(
        self, statuses: Sequence[str] = ("pending",), limit: int = 1000
    ) -> list[ApprovalRecord]:
        return approvals_sql.approvals_with_status(self._reader, statuses, limit)

    def resolve_approval_id(self, prefix: str) -> str:
        return resolve_id(
            self._reader, "pending_approvals", "approval_id", prefix, "approval", UnknownApproval
        )

    def resolve_prompt_id(self, prefix: str) -> str:
        return resolve_id(
            self._reader,
            "pending_credentials",
            "prompt_id",
            prefix,
            "credential prompt",
            UnknownCredentialPrompt,
        )

    def next_deadline(self) -> str | None:
        return approvals_sql.next_deadline(self._reader)

    def approvals_for_task(self, task_id: str) -> list[ApprovalRecord]:
        return approvals_sql.approvals_for_task(self._reader, task_id)

    def credential_prompt(self, prompt_id: str) -> CredentialPromptRecord:
        rec = approvals_sql.get_credential(self._reader, prompt_id)
        if rec is None:
            raise UnknownCredentialPrompt(prompt_id)
        return rec

    def credential_prompts(
        self, statuses: Sequence[str] = ("pending",), limit: int = 1000
    ) -> list[CredentialPromptRecord]:
        return approvals_sql.credentials_with_status(self._reader, statuses, limit)

    def credential_prompts_for_task(self, task_id: str) -> list[CredentialPromptRecord]:
        return approvals_sql.credentials_for_task(self._reader, task_id)

    def messages_for_task(self, task_id: str) -> list[dict[str, Any]]:
        return events_sql.messages_for_task(self._reader, task_id)

    def pending_messages(self) -> list[OwnerMessage]:
        return events_sql.pending_messages(self._reader)

    def adapter_state(self, adapter: str) -> dict[str, Any] | None:
        return events_sql.get_adapter_state(self._reader, adapter)

    def last_boot(self) -> dict[str, Any] | None:
        return events_sql.last_boot(self._reader)

    # -- task lifecycle --------------------------------------------------------

    async def create(
        self, task: TaskRecord, event: InboundEvent | None = None
    ) -> tuple[TaskRecord, bool]:
        """Create `task`; with an event, exactly once: a redelivered event returns its task."""

        def op(conn: sqlite3.Connection) -> tuple[TaskRecord, bool]:
            if event is not None:
                seen = events_sql.seen_event(conn, event.event_id)
                if seen is not None:
                    existing = tasks_sql.get(conn, seen)
                    if existing is not None:
                        return existing, False
                events_sql.record_event_txn(
                    conn, event.event_id, event.adapter, task.task_id, task.created_at
                )
            tasks_sql.insert_txn(conn, task)
            return task, True

        return await self._write(op, "task_created")

    async def transition(
        self,
        task_id: str,
        to: Payload,
        *,
        point: str | None,
        update: TaskUpdate = NO_UPDATE,
        messages: Sequence[OwnerMessage] = (),
        reset_attempts: bool = True,
    ) -> TaskState:
        """Move a task into `to`'s state with `to` as its payload (checked), set `update`'s
        columns, and queue owner messages, atomically. Returns the state it is in now
        (Paused, when the owner's pause request stood and this move was its boundary)."""

        def op(conn: sqlite3.Connection) -> TaskState:
            now = self._transition_txn(conn, task_id, to, update, reset_attempts)
            at = now_rfc3339()
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, at)
            return now

        return await self._write(op, point)

    def _transition_txn(
        self,
        conn: sqlite3.Connection,
        task_id: str,
        to: Payload,
        update: TaskUpdate = NO_UPDATE,
        reset_attempts: bool = True,
    ) -> TaskState:
        """Move the task (checked against its row); return the state it is now in.

        The journal keeps the pause bookkeeping: Paused holds the payload it goes back
        to, leaving it goes back only there, and a runner's move into another working
        state while the owner's pause request stands lands in Paused instead (that
        move is the boundary where the task stops). A self-loop is no boundary: the
        request rides on to the next one.
        """
        dst = state_of(to)
        state, phase, current = self._row_for_move(conn, task_id, dst)
        check_transition(task_id, state, dst, payloads.paused_from(current) if current else None)
        if isinstance(to, payloads.Paused) and state_of(to.then) is not state:
            # a task pauses holding the state it is in, so that it goes back only there
            raise IllegalTransition(task_id, state.value, f"Paused (back to {to.then.kind})")
        requested = payloads.pause_requested(to) or (
            current is not None and payloads.pause_requested(current)
        )
        if isinstance(to, payloads.Working):
            to = replace(to, pause_requested=requested and dst is state)
            if requested and dst is not state and state is not TaskState.Paused:
                to = payloads.Paused(then=to)
        tasks_sql.transition_txn(
            conn, task_id, to, dst.phase or phase, update, now_rfc3339(), reset_attempts
        )
        return state_of(to)

    def _row_for_move(
        self, conn: sqlite3.Connection, task_id: str, dst: TaskState
    ) -> tuple[TaskState, str, Payload | None]:
        """The row's state, phase and payload. A malformed payload stops every move but
        the owner's cancel and an ending, which need nothing from it."""
        try:
            current = tasks_sql.get_state_payload(conn, task_id)
        except MalformedTaskRow:
            if not (dst.terminal or dst is TaskState.Cancelling):
                raise
            found = tasks_sql.get_state_phase(conn, task_id)
            assert found is not None
            return found[0], found[1], None
        if current is None:
            raise UnknownTask(task_id)
        return current

    def _executing_txn(self, conn: sqlite3.Connection, task_id: str) -> bool:
        """A step's row is written only while its task executes: once the owner paused
        or cancelled it, a late write of the runner is refused (and undone). Returns
        whether the owner's pause request stands (the task pauses at this step's end)."""
        current = tasks_sql.executing_hold(conn, task_id)
        if current is None:
            raise UnknownTask(task_id)
        state, pause_requested = current
        if state is not TaskState.Executing:
            raise IllegalTransition(task_id, state.value, TaskState.Executing.value)
        return pause_requested

    async def step_started(self, rec: StepRecord) -> None:
        """A step is about to run: durable before the tool is called."""

        def op(conn: sqlite3.Connection) -> None:
            self._executing_txn(conn, rec.task_id)
            steps_sql.start_txn(conn, rec)
            # The owner's answer covered the run that starts now, not any later one:
            # if this run is interrupted too, the owner is asked again.
            tasks_sql.spend_answers_txn(conn, rec.task_id)

        await self._write(op, "step_started")

    async def step_process(self, task_id: str, step: int, process: dict[str, Any]) -> None:
        """Record the process a running step started, so a restart can end it."""

        def op(conn: sqlite3.Connection) -> None:
            steps_sql.set_process_txn(conn, task_id, step, process)

        await self._write(op, None)

    def started_processes(
        self, task_id: str | None = None
    ) -> list[tuple[str, int, dict[str, Any]]]:
        return steps_sql.started_processes(self._reader, task_id)

    def steps_in_flight(self) -> dict[str, StepRecord]:
        """Task id -> its step still marked started (a task runs one step at a time)."""
        return {rec.task_id: rec for rec in steps_sql.in_flight(self._reader)}

    async def step_finished(
        self, rec: StepRecord, *, next_step: int, last: bool = False
    ) -> TaskState:
        """A step's outcome (completed or skipped) and the task's progress, in one commit.

        After the plan's `last` step the task moves to Synthesizing in the same commit;
        when the owner asked for a pause, it moves to Paused instead. Returns the state
        the task is in now: a runner goes on only while it is Executing.
        """
        at = rec.completed_at or now_rfc3339()
        progress = {"current_step": next_step, "last_completed": rec.step, "last_step_at": at}
        next_payload = payloads.Executing(current_step=next_step)

        def op(conn: sqlite3.Connection) -> TaskState:
            # the common case in one statement: still Executing, no pause asked for.
            # updated_at (in two indexes) moves at phase boundaries; a step's time lives
            # in execute_progress, so a step commit rewrites one row page, no index
            if not last and tasks_sql.progress_txn(conn, rec.task_id, next_payload, progress):
                steps_sql.finish_txn(conn, rec)
                return TaskState.Executing
            pause_requested = self._executing_txn(conn, rec.task_id)  # refused unless Executing
            steps_sql.finish_txn(conn, rec)
            to: Payload = (
                payloads.Synthesizing()
                if last
                else payloads.Paused(then=next_payload)
                if pause_requested
                else next_payload
            )
            return self._transition_txn(
                conn, rec.task_id, to, TaskUpdate(execute_progress=progress)
            )

        return await self._write(
            op, ("step_completed", "synthesizing") if last else "step_completed"
        )

    async def step_failed(
        self, rec: StepRecord, error: str, messages: Sequence[OwnerMessage] = ()
    ) -> None:
        """A step failed: its row, the task's failure and the owner's notice in one commit."""

        def op(conn: sqlite3.Connection) -> None:
            self._executing_txn(conn, rec.task_id)  # a step's row only while it executes
            steps_sql.finish_txn(conn, rec)
            self._transition_txn(conn, rec.task_id, payloads.Failed(), TaskUpdate(error=error))
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, rec.completed_at or now_rfc3339())

        await self._write(op, "failed")

    async def park_approval(
        self,
        approval: ApprovalRecord,
        message: OwnerMessage,
        parked: payloads.AwaitingApproval,
    ) -> None:
        """Insert the approval, park the task on it (`parked`, whose approval_id is the
        approval's), and queue the prompt: one commit."""

        def op(conn: sqlite3.Connection) -> None:
            self._park_approval_txn(conn, approval, parked)
            events_sql.enqueue_message_txn(conn, message, approval.created_at)
            approvals_sql.count_prompt_txn(conn, approval.approval_id)

        await self._write(op, "approval_parked")

    def _park_approval_txn(
        self,
        conn: sqlite3.Connection,
        approval: ApprovalRecord,
        parked: payloads.AwaitingApproval,
    ) -> None:
        if parked.approval_id != approval.approval_id:
            raise ValueError(f"task {approval.task_id}: parked on another approval")
        approvals_sql.insert_approval_txn(conn, approval)
        self._transition_txn(conn, approval.task_id, parked)

    async def park_credential(self, prompt: CredentialPromptRecord, message: OwnerMessage) -> None:
        def op(conn: sqlite3.Connection) -> None:
            approvals_sql.insert_credential_txn(conn, prompt)
            self._transition_txn(
                conn,
                prompt.task_id,
                payloads.AwaitingCredential(
                    prompt_id=prompt.prompt_id,
                    service=prompt.service,
                    prompt_message_id=message.message_key,
                    step=prompt.step or 0,
                ),
            )
            approvals_sql.set_credential_message_txn(conn, prompt.prompt_id, message.message_key)
            events_sql.enqueue_message_txn(conn, message, prompt.created_at)

        await self._write(op, "credential_parked")

    async def decide_approval(
        self,
        approval_id: str,
        answer: Answer,
        *,
        resume_to: Callable[[TaskRecord, ApprovalRecord, Answer], Move],
    ) -> tuple[ApprovalRecord, bool]:
        """Record the owner's answer (one of the approval's options) and move the task,
        once.

        A replay of the same answer changes nothing and returns `(approval, False)`;
        a different answer to a decided approval raises AlreadyDecided, and one the
        approval does not offer AnswerDoesNotFit. `resume_to` maps (task, approval,
        answer) to where the task goes.
        """
        decision = answer.kind

        def op(conn: sqlite3.Connection) -> tuple[ApprovalRecord, bool]:
            a = approvals_sql.get_approval(conn, approval_id)
            if a is None:
                raise UnknownApproval(approval_id)
            if a.status is not ApprovalStatus.pending:
                if a.decision == decision:
                    return a, False
                raise AlreadyDecided("approval", approval_id, _decided_text(a))
            if decision not in a.options:
                raise AnswerDoesNotFit(approval_id, decision, a.options)
            at = now_rfc3339()
            status = (
                ApprovalStatus.denied
                if decision in ("deny", "fail", "skip", "abandon")
                else ApprovalStatus.approved
            )
            approvals_sql.decide_approval_txn(conn, approval_id, status, decision, at)
            task = tasks_sql.get(conn, a.task_id)
            if task is None:
                raise UnknownTask(a.task_id)
            move = resume_to(task, a, answer)
            self._transition_txn(conn, a.task_id, move.to, move.update)
            decided = approvals_sql.get_approval(conn, approval_id)
            assert decided is not None
            return decided, True

        return await self._write(op, "approval_decided")

    async def receive_credential(self, prompt_id: str) -> tuple[CredentialPromptRecord, bool]:
        """Mark a prompt answered and resume its task (the secret is already in secrets.db)."""

        def op(conn: sqlite3.Connection) -> tuple[CredentialPromptRecord, bool]:
            p = approvals_sql.get_credential(conn, prompt_id)
            if p is None:
                raise UnknownCredentialPrompt(prompt_id)
            if p.status is not CredentialStatus.pending:
                raise AlreadyDecided("credential prompt", prompt_id, prompt_status_text(p))
            at = now_rfc3339()
            approvals_sql.set_credential_status_txn(conn, prompt_id, CredentialStatus.received, at)
            self._transition_txn(conn, p.task_id, payloads.Executing(current_step=p.step or 0))
            done = approvals_sql.get_credential(conn, prompt_id)
            assert done is not None
            return done, True

        return await self._write(op, "credential_received")

    async def expire_due(self, now: str) -> list[tuple[str, str]]:
        """Expire approvals and prompts past their deadline; fail their tasks.

        Returns (task_id, error) for each task failed.
        """

        def op(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            failed: list[tuple[str, str]] = []
            for a in approvals_sql.approvals_with_status(conn, ["pending"], 10_000):
                if a.expires_at > now:
                    continue
                approvals_sql.decide_approval_txn(
                    conn, a.approval_id, ApprovalStatus.expired, "expired", now
                )
                failed += self._fail_parked_txn(conn, a.task_id, "approval timeout")
            for p in approvals_sql.credentials_with_status(conn, ["pending"], 10_000):
                if p.expires_at > now:
                    continue
                approvals_sql.set_credential_status_txn(
                    conn, p.prompt_id, CredentialStatus.expired, now
                )
                failed += self._fail_parked_txn(conn, p.task_id, "credential prompt timeout")
            return failed

        return await self._write(op, "failed")

    def _fail_parked_txn(
        self, conn: sqlite3.Connection, task_id: str, error: str
    ) -> list[tuple[str, str]]:
        # the state alone: a row whose payload cannot be read still times out (and one
        # such row must not hold back every other expiry, nor the kernel's start)
        state = tasks_sql.get_state(conn, task_id)
        if state is None or state in TERMINAL:
            return []
        self._transition_txn(conn, task_id, payloads.Failed(), TaskUpdate(error=error))
        return [(task_id, error)]

    # -- the owner's hold: pause, resume, cancel (see holds.py) -------------------

    async def request_pause(
        self, task_id: str, *, running: Callable[[], bool]
    ) -> tuple[TaskState, holds.PauseOutcome]:
        """Pause now (`running()` False: no coroutine holds the task) or at the running
        task's next boundary; refused for a parked, cancelling or ended task."""

        def op(conn: sqlite3.Connection) -> tuple[TaskState, holds.PauseOutcome]:
            return holds.pause_txn(conn, task_id, running, self._transition_txn)

        return await self._write(op, None)

    async def unpause(self, task_id: str) -> tuple[TaskState, holds.ResumeOutcome]:
        def op(conn: sqlite3.Connection) -> tuple[TaskState, holds.ResumeOutcome]:
            return holds.unpause_txn(conn, task_id, self._transition_txn)

        return await self._write(op, None)

    async def begin_cancel(self, task_id: str) -> holds.CancelIntent:
        """Commit the intent to cancel (before any process is ended): from here on the
        task is never resumed, and a restart finishes the cancel."""

        def op(conn: sqlite3.Connection) -> holds.CancelIntent:
            return holds.begin_cancel_txn(conn, task_id, self._transition_txn)

        return await self._write(op, "cancel_intended")

    async def finish_cancel(self, task_id: str, message: OwnerMessage) -> list[int] | None:
        """Cancelled, its running steps recorded as cut off, and the owner told: one commit."""

        def op(conn: sqlite3.Connection) -> list[int] | None:
            cut = holds.finish_cancel_txn(conn, task_id, self._transition_txn)
            if cut is not None:
                events_sql.enqueue_message_txn(conn, message, now_rfc3339())
            return cut

        return await self._write(op, None)

    async def fail(self, task_id: str, error: str, messages: Sequence[OwnerMessage] = ()) -> None:
        await self.transition(
            task_id,
            payloads.Failed(),
            point="failed",
            update=TaskUpdate(error=error),
            messages=messages,
        )

    async def apply_recovery(
        self,
        *,
        abandon: Sequence[tuple[str, str]],
        attempted: Sequence[str],
        messages: Sequence[OwnerMessage],
        park: Sequence[tuple[ApprovalRecord, payloads.AwaitingApproval]] = (),
        pause: Sequence[str] = (),
        cancel: Sequence[str] = (),
    ) -> None:
        """Recovery's decisions and the owner's report (and prompts), one commit.

        `abandon` holds (task_id, reason); `park` holds (question, payload) for tasks that
        park on a new question (its prompt is among `messages`, after the report); each
        task in `attempted` counts one more recovery (reset whenever the task makes
        progress). Tasks in `pause` had the owner's pause request standing: they are
        Paused; tasks in `cancel` were being cancelled (their processes are ended
        already): they are Cancelled.
        """

        def op(conn: sqlite3.Connection) -> None:
            for task_id, reason in abandon:
                self._transition_txn(
                    conn, task_id, payloads.Abandoned(), TaskUpdate(error=reason), False
                )
            for approval, parked in park:
                self._park_approval_txn(conn, approval, parked)
            for task_id in pause:
                holds.pause_now_txn(conn, task_id, self._transition_txn)
            for task_id in cancel:
                holds.finish_cancel_txn(conn, task_id, self._transition_txn)
            conn.executemany(
                "UPDATE task_journal SET recovery_attempts = recovery_attempts + 1 "
                "WHERE task_id = ?",
                [(t,) for t in attempted],
            )
            at = now_rfc3339()
            for msg in messages:
                if events_sql.enqueue_message_txn(conn, msg, at) and msg.kind == "approval":
                    approvals_sql.count_prompt_txn(conn, msg.message_key.split(":")[1])

        await self._write(op, "recovery_decided")

    # -- owner messages, adapters, boots ---------------------------------------

    async def enqueue(self, messages: Sequence[OwnerMessage], point: str | None = None) -> None:
        def op(conn: sqlite3.Connection) -> None:
            at = now_rfc3339()
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, at)

        await self._write(op, point)

    def record_llm_call(self, call: dict[str, Any]) -> None:
        """A model call's usage and cost; rides on the next commit (accounting, not state)."""
        row = dict(call)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO llm_calls(task_id, provider, model, input_tokens, output_tokens, "
                "time_to_first_token, total_time, cost_usd, queued_seconds, granted_at, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row["task_id"],
                    row["provider"],
                    row["model"],
                    row["input_tokens"],
                    row["output_tokens"],
                    row["time_to_first_token"],
                    row["total_time"],
                    row["cost_usd"],
                    row["queued_seconds"],
                    row.get("granted_at", 0.0),
                    now_rfc3339(),
                ),
            )

        self.writer.defer(op)

    def llm_usage(self, task_id: str) -> dict[str, Any]:
        row = self._reader.execute(
            "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
            "coalesce(sum(cost_usd), 0) FROM llm_calls WHERE task_id = ?",
            (task_id,),
        ).fetchone()
        return {
            "calls": row[0],
            "input_tokens": row[1],
            "output_tokens": row[2],
            "cost_usd": row[3],
        }

    async def llm_request_sent(self, task_id: str, phase: str) -> None:
        """Journal that a model call is about to go out: a crash before its answer is
        known to have lost only that call, which recovery makes again."""

        def op(conn: sqlite3.Connection) -> None:
            # only a working state's payload has llm_request: a task the owner paused or
            # cancelled meanwhile is refused, never given a field its state does not have
            cur = conn.execute(
                "UPDATE task_journal SET state_detail = json_set(state_detail, "
                "'$.llm_request', json_object('phase', ?, 'sent_at', ?)) WHERE task_id = ? "
                "AND state IN ('Extracting', 'Planning', 'Executing', 'Synthesizing')",
                (phase, now_rfc3339(), task_id),
            )
            if cur.rowcount == 0:
                state = tasks_sql.get_state(conn, task_id)
                if state is None:
                    raise UnknownTask(task_id)
                raise IllegalTransition(task_id, state.value, f"{state.value} (a model call)")

        await self._write(op, "llm_request_sent")

    def mark_delivered(self, keys: Sequence[str]) -> None:
        """Mark messages delivered with the next commit (nobody waits for it; a crash
        before it only means the owner log's keys absorb a resend)."""
        keys = list(keys)

        def op(conn: sqlite3.Connection) -> None:
            at = now_rfc3339()
            for key in keys:
                events_sql.mark_message_txn(conn, key, "delivered", at)

        self.writer.defer(op, "message_delivered")

    async def supersede_old_prompts(self) -> int:
        def op(conn: sqlite3.Connection) -> int:
            return events_sql.supersede_prompts_txn(conn, now_rfc3339())

        return await self._write(op, None)

    async def put_adapter_state(self, adapter: str, state: dict[str, Any]) -> None:
        def op(conn: sqlite3.Connection) -> None:
            events_sql.put_adapter_state_txn(conn, adapter, state, now_rfc3339())

        await self._write(op, None)

    async def start_boot(self, boot_id: str, pid: int, version: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            events_sql.start_boot_txn(conn, boot_id, pid, version, now_rfc3339())

        await self._write(op, None)

    async def end_boot(self, boot_id: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            events_sql.end_boot_txn(conn, boot_id, now_rfc3339())

        await self._write(op, None)

    async def cleanup(self, completed_before: str, failed_before: str) -> int:
        """Journal cleanup (spec §4.4): drop finished tasks past their retention."""

        def op(conn: sqlite3.Connection) -> int:
            n = tasks_sql.delete_finished_before_txn(conn, ["Completed"], completed_before)
            n += tasks_sql.delete_finished_before_txn(
                conn, ["Failed", "Abandoned", "Cancelled"], failed_before
            )
            conn.execute(
                "DELETE FROM inbound_events WHERE task_id IS NOT NULL AND task_id NOT IN "
                "(SELECT task_id FROM task_journal) AND received_at < ?",
                (completed_before,),
            )
            conn.execute(
                "DELETE FROM owner_outbox WHERE status != 'pending' AND created_at < ?",
                (failed_before,),
            )
            return n

        return await self._write(op, None)


def prompt_status_text(p: CredentialPromptRecord) -> str:
    if p.status is CredentialStatus.withdrawn:
        return "withdrawn because its task was cancelled"
    return p.status.value


def _decided_text(a: ApprovalRecord) -> str:
    when = f" at {a.decided_at}" if a.decided_at else ""
    if a.status is ApprovalStatus.expired:
        return f"expired{when}"
    if a.status is ApprovalStatus.withdrawn:
        return f"withdrawn{when} because its task was cancelled"
    return f"{a.status.value} ({a.decision}){when}"


__all__ = ["Journal", "StepStatus", "prompt_status_text"]
