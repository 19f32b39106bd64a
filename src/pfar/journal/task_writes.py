"""The task store's other writes: a task's creation, its moves, what its hooks and
learnings decided, the owner's pause and cancel, recovery's decisions and cleanup."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from . import approvals_sql, bus_sql, events_sql, holds, hooks_sql, payloads, tasks_sql
from .backing import Backing
from .boot_reports import StoredReport
from .bus_sql import BusEventKind
from .hooks_sql import LEARNINGS_DECIDED, LEARNINGS_KEPT, decided_learnings
from .json_text import JsonObject
from .message_keys import ApprovalKey
from .moves import NO_UPDATE, failure_messages, park_approval_txn, transition_txn
from .payloads import Payload
from .records import ApprovalRecord, InboundEvent, OwnerMessage, TaskRecord, TaskUpdate, now_rfc3339
from .rows import DecidedLearning
from .states import TaskState
from .tx import Tx


class TaskWrites:
    """Each write one commit: the task's row with what goes with it (messages to the
    owner, events, questions)."""

    _db: Backing

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
            sent = (
                failure_messages(conn, task_id, messages) if now is TaskState.Failed else messages
            )
            for msg in sent:
                events_sql.enqueue_message_txn(conn, msg, at)
            return now

        return await self._db.write(op, point)

    async def record_hook_verdict(
        self,
        task_id: str,
        key: str,
        verdict: JsonObject,
        messages: Sequence[OwnerMessage] = (),
    ) -> JsonObject:
        """Keep what a hook point's handlers decided about `key` of the task (with what
        the owner is told of it): the verdict kept, which is the first one kept for
        `key` when two firings raced."""

        def op(conn: Tx) -> JsonObject:
            at = now_rfc3339()
            if not hooks_sql.put_txn(conn, task_id, key, verdict, at):
                return hooks_sql.get(conn, task_id, key) or verdict
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, at)
            return verdict

        return await self._db.write(op, "hook_verdict")

    async def learnings_decided(
        self, task_id: str, learnings: Sequence[DecidedLearning]
    ) -> list[DecidedLearning]:
        """A completed task's learnings as decided (after its LearningExtracted hook and
        the cheap tier): kept with the task before any is stored, so a restart stores
        these and does not decide again. The first kept wins; returns it."""

        def op(conn: Tx) -> list[DecidedLearning]:
            verdict = {"learnings": learnings}
            if hooks_sql.put_txn(conn, task_id, LEARNINGS_DECIDED, verdict, now_rfc3339()):
                return list(learnings)
            kept = hooks_sql.get(conn, task_id, LEARNINGS_DECIDED)
            return decided_learnings(kept) if kept else list(learnings)

        return await self._db.write(op, "learnings_decided")

    async def learnings_kept(self, task_id: str, events: Sequence[Mapping[str, object]]) -> bool:
        """The mark that a task's learnings are stored, with their LearningExtracted events,
        in one commit; False (nothing published) when it was marked before."""

        def op(conn: Tx) -> bool:
            at = now_rfc3339()
            if not hooks_sql.put_txn(conn, task_id, LEARNINGS_KEPT, {"count": len(events)}, at):
                return False
            for body in events:
                bus_sql.append_txn(conn, BusEventKind.LearningExtracted, task_id, body, at)
            return True

        return await self._db.write(op, "learnings_kept")

    async def fail(
        self,
        task_id: str,
        error: str,
        messages: Sequence[OwnerMessage] = (),
        *,
        recoverable: bool = False,
    ) -> None:
        """Failed, with the owner's messages; `recoverable`: `pfar task retry` may take it
        back to where it failed (journal/moves.py keeps where that is)."""
        await self.transition(
            task_id,
            payloads.Failed(recoverable=recoverable),
            point="failed",
            update=TaskUpdate(error=error),
            messages=messages,
        )

    async def retry(self, task_id: str, *, by: str | None = None) -> TaskState:
        """The owner's retry of a recoverable failure: the task is back in the working
        state it failed in (checked in this commit: a retry running alongside is refused,
        the task being Failed no more); the state it is in now."""

        def op(conn: Tx) -> TaskState:
            return holds.retry_txn(conn, task_id, transition_txn, by)

        return await self._db.write(op, "task_retried")

    async def request_pause(
        self, task_id: str, *, running: Callable[[], bool], by: str | None = None
    ) -> tuple[TaskState, holds.PauseOutcome]:
        """Pause now (`running()` False: no coroutine holds the task) or at the running
        task's next boundary; refused for a parked, cancelling or ended task. `by` (who
        asked) is kept in the TaskPaused event, whenever the pause is reached."""

        def op(conn: Tx) -> tuple[TaskState, holds.PauseOutcome]:
            return holds.pause_txn(conn, task_id, running, transition_txn, by)

        return await self._db.write(op, None)

    async def unpause(
        self, task_id: str, *, by: str | None = None
    ) -> tuple[TaskState, holds.ResumeOutcome]:
        """Back to where it was paused from (`by`, who, kept in the TaskResumed event),
        or its pause request withdrawn."""

        def op(conn: Tx) -> tuple[TaskState, holds.ResumeOutcome]:
            return holds.unpause_txn(conn, task_id, transition_txn, by)

        return await self._db.write(op, None)

    async def begin_cancel(self, task_id: str, *, by: str | None = None) -> holds.CancelIntent:
        """Commit the intent to cancel (before any process is ended): from here on the
        task is never resumed, and a restart finishes the cancel. `by` (who) is kept
        with the intent and told in the TaskCancelled event."""

        def op(conn: Tx) -> holds.CancelIntent:
            return holds.begin_cancel_txn(conn, task_id, transition_txn, by)

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
        report: tuple[str, StoredReport] | None = None,
        recovered: Sequence[tuple[str, str, str]] = (),
    ) -> None:
        """Recovery's decisions and the owner's report (and prompts), one commit.

        `abandon` holds (task_id, reason); `park` holds (question, payload) for tasks that
        park on a new question (its prompt is among `messages`, after the report); each
        task in `attempted` counts one more recovery (reset whenever the task makes
        progress). Tasks in `pause` had the owner's pause request standing: they are
        Paused; tasks in `cancel` were being cancelled (their processes are ended
        already): they are Cancelled. `report` is (boot_id, the report among `messages`):
        kept with that boot in the same commit, so a boot has its report kept exactly
        when the owner has it queued. Each (task_id, action, reason) in `recovered` is
        what this start decided for that task, told on the bus (TaskRecovered) before
        the moves it makes.
        """

        def op(conn: Tx) -> None:
            decided = now_rfc3339()
            for task_id, action, reason in recovered:
                body = {"action": action, "reason": reason}
                bus_sql.append_txn(conn, BusEventKind.TaskRecovered, task_id, body, decided)
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
                queued = events_sql.enqueue_message_txn(conn, msg, at)
                if queued and isinstance(msg.message_key, ApprovalKey):
                    approvals_sql.count_prompt_txn(conn, msg.message_key.approval_id)
            if report is not None:
                events_sql.keep_report_txn(conn, *report)

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
