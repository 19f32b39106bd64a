"""The task store's writes as a task executes: its steps and its model calls."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import IllegalTransition, UnknownTask
from . import costs_sql, events_sql, payloads, steps_sql, tasks_sql
from .backing import Backing
from .moves import executing_txn, failure_messages, transition_txn
from .payloads import Payload
from .records import OwnerMessage, StepRecord, TaskUpdate, now_rfc3339
from .rows import LlmCall, StepProcess
from .states import TaskState
from .tx import Tx


class StepWrites:
    """A step's start, process and outcome, and a model call's request and usage,
    each in the commit that makes it durable."""

    _db: Backing

    async def step_started(self, rec: StepRecord) -> None:
        """A step is about to run: durable before the tool is called."""

        def op(conn: Tx) -> None:
            executing_txn(conn, rec.task_id)
            steps_sql.start_txn(conn, rec)
            # The owner's answer covered the run that starts now, not any later one:
            # if this run is interrupted too, the owner is asked again.
            tasks_sql.spend_answers_txn(conn, rec.task_id)

        await self._db.write(op, "step_started")

    async def step_process(self, task_id: str, step: int, process: StepProcess) -> None:
        """Record the process a running step started, so a restart can end it."""

        def op(conn: Tx) -> None:
            steps_sql.set_process_txn(conn, task_id, step, process)

        await self._db.write(op, None)

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

        def op(conn: Tx) -> TaskState:
            # the common case in one statement: still Executing, no pause asked for.
            # updated_at (in two indexes) moves at phase boundaries; a step's time lives
            # in execute_progress, so a step commit rewrites one row page, no index
            if not last and tasks_sql.progress_txn(conn, rec.task_id, next_payload, progress):
                steps_sql.finish_txn(conn, rec)
                return TaskState.Executing
            pause_requested = executing_txn(conn, rec.task_id)  # refused unless Executing
            steps_sql.finish_txn(conn, rec)
            to: Payload = (
                payloads.Synthesizing()
                if last
                else payloads.Paused(then=next_payload)
                if pause_requested
                else next_payload
            )
            return transition_txn(conn, rec.task_id, to, TaskUpdate(execute_progress=progress))

        return await self._db.write(
            op, ("step_completed", "synthesizing") if last else "step_completed"
        )

    async def step_failed(
        self,
        rec: StepRecord,
        error: str,
        messages: Sequence[OwnerMessage] = (),
        *,
        recoverable: bool = False,
    ) -> None:
        """A step failed: its row, the task's failure and the owner's notice in one commit
        (`recoverable`: a retry runs the step again)."""

        def op(conn: Tx) -> None:
            executing_txn(conn, rec.task_id)  # a step's row only while it executes
            steps_sql.finish_txn(conn, rec)
            failed = payloads.Failed(recoverable=recoverable)
            transition_txn(conn, rec.task_id, failed, TaskUpdate(error=error))
            for msg in failure_messages(conn, rec.task_id, messages):
                events_sql.enqueue_message_txn(conn, msg, rec.completed_at or now_rfc3339())

        await self._db.write(op, "failed")

    async def llm_request_sent(self, task_id: str, phase: str) -> None:
        """Journal that a model call is about to go out: a crash before its answer is
        known to have lost only that call, which recovery makes again."""

        def op(conn: Tx) -> None:
            # only a working state's payload has llm_request: a task the owner paused or
            # cancelled meanwhile is refused, never given a field its state does not have
            sent = conn.dialect.with_object("state_detail", "llm_request", ("phase", "sent_at"))
            cur = conn.execute(
                f"UPDATE task_journal SET state_detail = {sent} WHERE task_id = ? "
                "AND state IN ('Extracting', 'Planning', 'Executing', 'Synthesizing')",
                (phase, now_rfc3339(), task_id),
            )
            if not conn.matched(cur):
                state = tasks_sql.get_state(conn, task_id)
                if state is None:
                    raise UnknownTask(task_id)
                raise IllegalTransition(task_id, state.value, f"{state.value} (a model call)")

        await self._db.write(op, "llm_request_sent")

    def record_llm_call(self, call: LlmCall) -> None:
        """A model call's usage and cost; rides on the next commit. The proxy hands it
        over before the runner has the answer, so it is queued ahead of the write that
        journals the answer and lands in that commit or an earlier one: an answer on
        disk always has its call's usage there too (what the spend caps count)."""
        row = dict(call)
        at = call.get("at") or now_rfc3339()
        priced = call.get("priced", True)

        def op(conn: Tx) -> None:
            conn.execute(
                "INSERT INTO llm_calls(task_id, provider, model, input_tokens, output_tokens, "
                "time_to_first_token, total_time, cost_usd, queued_seconds, granted_at, at, "
                "priced) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                    at,
                    1 if priced else 0,
                ),
            )
            costs_sql.add_to_day_txn(
                conn, at, call["input_tokens"], call["output_tokens"], call["cost_usd"], priced
            )

        self._db.writer.defer(op)
