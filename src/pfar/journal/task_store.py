"""The SQLite task store: tasks, their steps and their model calls (`store.TaskStore`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import IllegalTransition, UnknownTask
from . import (
    approvals_sql,
    bus_sql,
    events_sql,
    holds,
    hooks_sql,
    payloads,
    steps_sql,
    tasks_sql,
)
from .backing import Backing
from .hooks_sql import LEARNINGS_DECIDED, LEARNINGS_KEPT
from .ids import resolve_id
from .moves import NO_UPDATE, executing_txn, park_approval_txn, transition_txn
from .payloads import Payload
from .records import (
    ApprovalRecord,
    InboundEvent,
    OwnerMessage,
    StepRecord,
    TaskRecord,
    TaskUpdate,
    UnreadableTask,
    now_rfc3339,
)
from .states import TaskState
from .tx import Tx


class SQLiteTaskStore:
    def __init__(self, db: Backing) -> None:
        self._db = db

    async def get(self, task_id: str) -> TaskRecord:
        rec = await self._db.read(tasks_sql.get, task_id)
        if rec is None:
            raise UnknownTask(task_id)
        return rec

    async def payload(self, task_id: str) -> Payload:
        found = await self._db.read(tasks_sql.get_state_payload, task_id)
        if found is None:
            raise UnknownTask(task_id)
        return found[2]

    async def resolve_id(self, prefix: str) -> str:
        """Accept a full id or an unambiguous prefix, as `pfar task show` prints them."""
        return await self._db.read(
            resolve_id, "task_journal", "task_id", prefix, "task", UnknownTask
        )

    async def listing(
        self, states: Sequence[str] | None = None, limit: int = 50
    ) -> list[TaskRecord | UnreadableTask]:
        """Tasks newest first; a row that cannot be read as one is listed as UnreadableTask."""
        return await self._db.read(tasks_sql.listing, states, limit)

    async def latest_workflow_task(self, directory: str) -> str | None:
        return await self._db.read(tasks_sql.latest_workflow_task, directory)

    async def counts(self) -> dict[str, int]:
        return await self._db.read(tasks_sql.counts)

    async def unfinished(self) -> tuple[list[TaskRecord], list[UnreadableTask]]:
        """Unfinished tasks, and the unfinished rows that cannot be read as tasks."""
        return await self._db.read(tasks_sql.unfinished)

    async def claim_unfinished(self) -> tuple[list[TaskRecord], list[UnreadableTask]]:
        """The unfinished tasks this kernel recovers and runs. One kernel owns a SQLite
        home (its lock file refuses a second before the vault is opened), so its claim
        is every unfinished task, and there is no lease to record."""
        return await self.unfinished()

    async def steps(self, task_id: str) -> list[StepRecord]:
        steps = await self._db.read(steps_sql.for_task, task_id)
        await self._all_there(task_id, [s.step for s in steps])
        return steps

    async def step_results(self, task_id: str) -> list[Any]:
        rows = await self._db.read(steps_sql.results_for_task, task_id)
        await self._all_there(task_id, [step for step, _ in rows])
        return [result for _, result in rows]

    async def _all_there(self, task_id: str, numbers: list[int]) -> None:
        """The step rows read are every step the task's progress says it finished."""
        done = await self._steps_done(task_id)
        if numbers != list(range(len(numbers))) or len(numbers) < done:
            await self._check_steps()
        if len(numbers) < done:
            self._missing_steps(task_id, len(numbers), done)

    async def step(self, task_id: str, step: int) -> StepRecord | None:
        rec = await self._db.read(steps_sql.get, task_id, step)
        if rec is None and step < (done := await self._steps_done(task_id)):
            await self._check_steps()
            self._missing_steps(task_id, 0, done)
        return rec

    def _missing_steps(self, task_id: str, found: int, done: int) -> None:
        """A row hidden by a damaged key can leave the b-tree in order, so even SQLite's
        integrity check may pass; the task's progress still says the row must exist."""
        raise self._db.damaged(
            f"table task_steps: task {task_id} finished {done} step(s) but "
            f"{'only ' + str(found) if found else 'not all'} of their rows can be read"
        )

    async def _steps_done(self, task_id: str) -> int:
        """How many steps the task's progress says were finished (each one has its row)."""
        progress = await self._db.read(tasks_sql.progress, task_id)
        last, current = progress.get("last_completed"), progress.get("current_step")
        return max(
            last + 1 if isinstance(last, int) else 0, current if isinstance(current, int) else 0
        )

    async def _check_steps(self) -> None:
        """Steps missing from what the task's progress promises: a damaged page can hide
        rows without an error, so look before answering with a short list. A step row
        is written in the same commit as the progress that names it."""
        await self._db.check_table("task_steps")

    async def steps_in_flight(self) -> dict[str, StepRecord]:
        """Task id -> its step still marked started (a task runs one step at a time)."""
        return {rec.task_id: rec for rec in await self._db.read(steps_sql.in_flight)}

    async def started_processes(
        self, task_id: str | None = None
    ) -> list[tuple[str, int, dict[str, Any]]]:
        return await self._db.read(steps_sql.started_processes, task_id)

    async def llm_usage(self, task_id: str) -> dict[str, Any]:
        return await self._db.read(tasks_sql.llm_usage, task_id)

    async def create(
        self, task: TaskRecord, event: InboundEvent | None = None
    ) -> tuple[TaskRecord, bool]:
        """Create `task`; with an event, exactly once: a redelivered event returns its task."""

        def op(conn: Tx) -> tuple[TaskRecord, bool]:
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

        return await self._db.write(op, "task_created")

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

        def op(conn: Tx) -> TaskState:
            now = transition_txn(conn, task_id, to, update, reset_attempts)
            at = now_rfc3339()
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, at)
            return now

        return await self._db.write(op, point)

    async def step_started(self, rec: StepRecord) -> None:
        """A step is about to run: durable before the tool is called."""

        def op(conn: Tx) -> None:
            executing_txn(conn, rec.task_id)
            steps_sql.start_txn(conn, rec)
            # The owner's answer covered the run that starts now, not any later one:
            # if this run is interrupted too, the owner is asked again.
            tasks_sql.spend_answers_txn(conn, rec.task_id)

        await self._db.write(op, "step_started")

    async def hook_verdict(self, task_id: str, key: str) -> dict[str, Any] | None:
        return await self._db.read(hooks_sql.get, task_id, key)

    async def record_hook_verdict(
        self,
        task_id: str,
        key: str,
        verdict: dict[str, Any],
        messages: Sequence[OwnerMessage] = (),
    ) -> dict[str, Any]:
        """Keep what a hook point's handlers decided about `key` of the task (with what
        the owner is told of it): the verdict kept, which is the first one kept for
        `key` when two firings raced."""

        def op(conn: Tx) -> dict[str, Any]:
            at = now_rfc3339()
            if not hooks_sql.put_txn(conn, task_id, key, verdict, at):
                return hooks_sql.get(conn, task_id, key) or verdict
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, at)
            return verdict

        return await self._db.write(op, "hook_verdict")

    async def learnings_decided(
        self, task_id: str, learnings: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """A completed task's learnings as decided (after its LearningExtracted hook and
        the cheap tier): kept with the task before any is stored, so a restart stores
        these and does not decide again. The first kept wins; returns it."""

        def op(conn: Tx) -> list[dict[str, Any]]:
            verdict = {"learnings": learnings}
            if not hooks_sql.put_txn(conn, task_id, LEARNINGS_DECIDED, verdict, now_rfc3339()):
                verdict = hooks_sql.get(conn, task_id, LEARNINGS_DECIDED) or verdict
            return list(verdict["learnings"])

        return await self._db.write(op, "learnings_decided")

    async def learnings_kept(self, task_id: str, events: Sequence[dict[str, Any]]) -> bool:
        """The mark that a task's learnings are stored, with their LearningExtracted events,
        in one commit; False (nothing published) when it was marked before."""

        def op(conn: Tx) -> bool:
            at = now_rfc3339()
            if not hooks_sql.put_txn(conn, task_id, LEARNINGS_KEPT, {"count": len(events)}, at):
                return False
            for body in events:
                bus_sql.append_txn(conn, "LearningExtracted", task_id, body, at)
            return True

        return await self._db.write(op, "learnings_kept")

    async def step_process(self, task_id: str, step: int, process: dict[str, Any]) -> None:
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
        self, rec: StepRecord, error: str, messages: Sequence[OwnerMessage] = ()
    ) -> None:
        """A step failed: its row, the task's failure and the owner's notice in one commit."""

        def op(conn: Tx) -> None:
            executing_txn(conn, rec.task_id)  # a step's row only while it executes
            steps_sql.finish_txn(conn, rec)
            transition_txn(conn, rec.task_id, payloads.Failed(), TaskUpdate(error=error))
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, rec.completed_at or now_rfc3339())

        await self._db.write(op, "failed")

    async def fail(self, task_id: str, error: str, messages: Sequence[OwnerMessage] = ()) -> None:
        await self.transition(
            task_id,
            payloads.Failed(),
            point="failed",
            update=TaskUpdate(error=error),
            messages=messages,
        )

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
            if cur.rowcount == 0:
                state = tasks_sql.get_state(conn, task_id)
                if state is None:
                    raise UnknownTask(task_id)
                raise IllegalTransition(task_id, state.value, f"{state.value} (a model call)")

        await self._db.write(op, "llm_request_sent")

    def record_llm_call(self, call: dict[str, Any]) -> None:
        """A model call's usage and cost; rides on the next commit (accounting, not state)."""
        row = dict(call)

        def op(conn: Tx) -> None:
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

        self._db.writer.defer(op)

    async def request_pause(
        self, task_id: str, *, running: Callable[[], bool]
    ) -> tuple[TaskState, holds.PauseOutcome]:
        """Pause now (`running()` False: no coroutine holds the task) or at the running
        task's next boundary; refused for a parked, cancelling or ended task."""

        def op(conn: Tx) -> tuple[TaskState, holds.PauseOutcome]:
            return holds.pause_txn(conn, task_id, running, transition_txn)

        return await self._db.write(op, None)

    async def unpause(self, task_id: str) -> tuple[TaskState, holds.ResumeOutcome]:
        def op(conn: Tx) -> tuple[TaskState, holds.ResumeOutcome]:
            return holds.unpause_txn(conn, task_id, transition_txn)

        return await self._db.write(op, None)

    async def begin_cancel(self, task_id: str) -> holds.CancelIntent:
        """Commit the intent to cancel (before any process is ended): from here on the
        task is never resumed, and a restart finishes the cancel."""

        def op(conn: Tx) -> holds.CancelIntent:
            return holds.begin_cancel_txn(conn, task_id, transition_txn)

        return await self._db.write(op, "cancel_intended")

    async def finish_cancel(self, task_id: str, message: OwnerMessage) -> list[int] | None:
        """Cancelled, its running steps recorded as cut off, and the owner told: one commit."""

        def op(conn: Tx) -> list[int] | None:
            cut = holds.finish_cancel_txn(conn, task_id, transition_txn)
            if cut is not None:
                events_sql.enqueue_message_txn(conn, message, now_rfc3339())
            return cut

        return await self._db.write(op, None)

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

        def op(conn: Tx) -> None:
            for task_id, reason in abandon:
                transition_txn(conn, task_id, payloads.Abandoned(), TaskUpdate(error=reason), False)
            for approval, parked in park:
                park_approval_txn(conn, approval, parked)
            for task_id in pause:
                holds.pause_now_txn(conn, task_id, transition_txn)
            for task_id in cancel:
                holds.finish_cancel_txn(conn, task_id, transition_txn)
            conn.executemany(
                "UPDATE task_journal SET recovery_attempts = recovery_attempts + 1 "
                "WHERE task_id = ?",
                [(t,) for t in attempted],
            )
            at = now_rfc3339()
            for msg in messages:
                if events_sql.enqueue_message_txn(conn, msg, at) and msg.kind == "approval":
                    approvals_sql.count_prompt_txn(conn, msg.message_key.split(":")[1])

        await self._db.write(op, "recovery_decided")

    async def cleanup(self, completed_before: str, failed_before: str, batch: int = 500) -> int:
        """Journal cleanup (spec §4.4): drop finished tasks past their retention, with
        their model calls, at most `batch` tasks (and `batch` calls of tasks already gone)
        a commit; how many tasks and calls went (the caller calls again while it is
        `batch` or more)."""

        def op(conn: Tx) -> int:
            n = tasks_sql.delete_finished_before_txn(conn, ["Completed"], completed_before, batch)
            n += tasks_sql.delete_finished_before_txn(
                conn, ["Failed", "Abandoned", "Cancelled"], failed_before, batch
            )
            n += tasks_sql.delete_orphan_llm_calls_txn(conn, batch)
            conn.execute(
                "DELETE FROM inbound_events WHERE task_id IS NOT NULL AND task_id NOT IN "
                "(SELECT task_id FROM task_journal) AND received_at < ?",
                (completed_before,),
            )
            conn.execute(
                "DELETE FROM owner_outbox WHERE status != 'pending' AND created_at < ?",
                (failed_before,),
            )
            bus_sql.prune_before_txn(conn, min(completed_before, failed_before))
            return n

        return await self._db.write(op, None)
