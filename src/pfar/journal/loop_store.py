"""The SQLite loop store (`store.LoopStore`): loop tasks' settings, conversations, and the
owner's standing permission answers."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import TaskStateRefused, UnknownTask
from . import events_sql, loops_sql, payloads, steps_sql, tasks_sql
from .backing import Backing
from .moves import transition_txn
from .payloads import Blocked, Executing, Payload, Synthesizing, WaitingForUser
from .records import InboundEvent, OwnerMessage, StepRecord, TaskRecord, now_rfc3339
from .states import TaskState
from .turns import DiscardTurn, LoopSettings, PermissionRule, StoredTurn, Turn, UserTurn
from .tx import Tx


class SQLiteLoopStore:
    def __init__(self, db: Backing) -> None:
        self._db = db

    # -- reads -----------------------------------------------------------------

    async def settings(self, task_id: str) -> LoopSettings:
        found = await self._db.read(loops_sql.settings, task_id)
        if found is None:
            raise UnknownTask(task_id)
        return found

    async def turns(self, task_id: str, after: int = -1) -> list[StoredTurn]:
        """The conversation's turns after seq `after`, in order."""
        return await self._db.scan(loops_sql.turns, task_id, after)

    async def turn_count(self, task_id: str) -> int:
        """How many turns the conversation holds (its last seq + 1: one indexed look)."""
        return await self._db.read(loops_sql.last_seq, task_id) + 1

    async def children(self, task_id: str) -> list[str]:
        return await self._db.read(loops_sql.children, task_id)

    async def rules(self) -> list[PermissionRule]:
        return await self._db.read(loops_sql.rules)

    async def anomalies(self, task_id: str, step: int) -> list[tuple[str, str]]:
        """What was found unusual about tool call `step`: (kind, detail) pairs."""
        return await self._db.read(loops_sql.anomalies, task_id, step)

    async def host_first_seen(self, host: str) -> tuple[str, int] | None:
        """The task and tool call that first reached `host`, or None: never reached."""
        return await self._db.read(loops_sql.host_first_seen, host)

    async def writes_since(self, task_id: str, since: str) -> int:
        return await self._db.read(steps_sql.writes_since, task_id, since)

    # -- writes ----------------------------------------------------------------

    async def create(
        self,
        task: TaskRecord,
        settings: LoopSettings,
        prompt: str,
        event: InboundEvent | None = None,
        messages: Sequence[OwnerMessage] = (),
    ) -> tuple[TaskRecord, bool]:
        """A loop task, its settings and its first turn (the prompt), in one commit with
        `messages` to the owner about it; with an event, exactly once: a redelivered
        event returns its task (and sends no message)."""

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
            loops_sql.insert_settings_txn(conn, task.task_id, settings)
            loops_sql.append_txn(
                conn, task.task_id, [UserTurn(text=prompt, source="prompt")], task.created_at, -1
            )
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, task.created_at)
            return task, True

        return await self._db.write(op, "task_created")

    async def spawn(
        self,
        call: StepRecord,
        child: TaskRecord,
        settings: LoopSettings,
        prompt: str,
        event: InboundEvent,
    ) -> TaskRecord:
        """A Task call's subtask: the child task (exactly once per `event`: a call run
        again after a crash finds the child it started), the call's row marked started,
        and the parent blocked on the child, in one commit. Returns the child."""

        def op(conn: Tx) -> TaskRecord:
            seen = events_sql.seen_event(conn, event.event_id)
            found = None if seen is None else tasks_sql.get(conn, seen)
            if found is None:
                events_sql.record_event_txn(
                    conn, event.event_id, event.adapter, child.task_id, child.created_at
                )
                tasks_sql.insert_txn(conn, child)
                loops_sql.insert_settings_txn(conn, child.task_id, settings)
                loops_sql.append_txn(
                    conn,
                    child.task_id,
                    [UserTurn(text=prompt, source="prompt")],
                    child.created_at,
                    -1,
                )
                found = child
            steps_sql.start_txn(conn, call)
            transition_txn(conn, call.task_id, Blocked(step=call.step, child_task_id=found.task_id))
            return found

        return await self._db.write(op, "subtask_spawned")

    async def unblock(self, call: StepRecord) -> TaskState:
        """The subtask of a blocked task ended: the Task call's outcome (`call`) and the
        task's next tool call, in one commit. Returns the state the task is in now."""

        def op(conn: Tx) -> TaskState:
            found = tasks_sql.get_state_payload(conn, call.task_id)
            if found is None:
                raise UnknownTask(call.task_id)
            state, _, payload = found
            if not isinstance(payload, Blocked) or payload.step != call.step:
                raise TaskStateRefused(
                    call.task_id, state.value, "unblocked", "it is not waiting on this subtask"
                )
            steps_sql.finish_txn(conn, call)
            return transition_txn(conn, call.task_id, Executing(current_step=call.step + 1))

        return await self._db.write(op, "subtask_ended")

    async def update_settings(
        self, task_id: str, settings: LoopSettings, messages: Sequence[OwnerMessage] = ()
    ) -> None:
        def op(conn: Tx) -> None:
            loops_sql.update_settings_txn(conn, task_id, settings)
            at = now_rfc3339()
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, at)

        await self._db.write(op, "loop_workspace")

    async def append(
        self,
        task_id: str,
        turns: Sequence[Turn],
        *,
        after: int,
        to: Payload | None = None,
        point: str | tuple[str, ...] | None,
        messages: Sequence[OwnerMessage] = (),
        at_pause: Executing | None = None,
    ) -> tuple[list[StoredTurn], TaskState | None]:
        """Append `turns` after turn `after` (the last one the caller saw) and move the
        task into `to` (checked), with the owner's messages: one commit. Returns the
        turns as stored and the state the task is in now (Paused when the owner's pause
        request stood and this move was its boundary; None when `to` is None).

        `at_pause`: this commit is a boundary of the task's work (the model's answer):
        while the owner's pause request stands, the task pauses here, holding
        `at_pause` instead of moving into `to`, and `messages` (which speak of `to`)
        are not sent; resuming routes the answer then."""

        def op(conn: Tx) -> tuple[list[StoredTurn], TaskState | None]:
            state = None
            sent = messages
            if at_pause is not None and _pause_stands(conn, task_id):
                state = transition_txn(conn, task_id, at_pause, boundary=True)
                sent = ()
            elif to is not None:
                state = transition_txn(conn, task_id, to)
            at = now_rfc3339()
            stored = loops_sql.append_txn(conn, task_id, turns, at, after)
            for msg in sent:
                events_sql.enqueue_message_txn(conn, msg, at)
            return stored, state

        return await self._db.write(op, point)

    async def send(
        self,
        task_id: str,
        text: str,
        *,
        done: bool = False,
        event: tuple[str, str] | None = None,
    ) -> TaskState:
        """The owner's message to a loop task waiting for one: appended, and the loop goes
        on (`done`: the conversation ends instead, through its summary). Refused, naming
        the state, while the task is not waiting: its model has the turn. `event` (its
        id, its adapter): a chat message delivered again is found and changes nothing."""

        def op(conn: Tx) -> TaskState:
            if event is not None and events_sql.seen_event(conn, event[0]) is not None:
                current = tasks_sql.get_state(conn, task_id)
                if current is None:
                    raise UnknownTask(task_id)
                return current
            if event is not None:
                events_sql.record_event_txn(conn, event[0], event[1], task_id, now_rfc3339())
            found = tasks_sql.get_state_payload(conn, task_id)
            if found is None:
                raise UnknownTask(task_id)
            state, _, payload = found
            if not isinstance(payload, WaitingForUser):
                why = (
                    "it has ended"
                    if state.terminal
                    else "it is not waiting for a message (its model has the turn, or it "
                    "waits on a question: answer that with `pfar approve`/`pfar deny`)"
                )
                raise TaskStateRefused(task_id, state.value, "sent a message", why)
            at = now_rfc3339()
            if done:
                return transition_txn(conn, task_id, Synthesizing())
            loops_sql.append_txn(conn, task_id, [UserTurn(text=text, source="owner")], at, None)
            return transition_txn(conn, task_id, Executing(current_step=payload.next_step))

        return await self._db.write(op, "user_input")

    async def record_anomalies(
        self,
        task_id: str,
        step: int,
        found: Sequence[tuple[str, str]],
        host: str | None,
        messages: Sequence[OwnerMessage] = (),
    ) -> None:
        """Tool call `step`'s anomalies, the host it reaches (seen from now on) and the
        owner's warning, in one commit."""

        def op(conn: Tx) -> None:
            at = now_rfc3339()
            loops_sql.record_anomalies_txn(conn, task_id, step, found, host, at)
            for msg in messages:
                events_sql.enqueue_message_txn(conn, msg, at)

        await self._db.write(op, "loop_anomaly")

    async def retry(self, task_id: str, *, by: str | None = None) -> TaskState:
        """The owner's `/retry`: the model's answer that waits for the owner is discarded
        (a turn saying so is appended) and the model is asked again. Refused, naming the
        state, unless the task waits for the owner after its model's answer. `by` (who)
        is kept in the move's event."""

        def op(conn: Tx) -> TaskState:
            found = tasks_sql.get_state_payload(conn, task_id)
            if found is None:
                raise UnknownTask(task_id)
            state, _, payload = found
            if not isinstance(payload, WaitingForUser):
                raise TaskStateRefused(
                    task_id,
                    state.value,
                    "retried",
                    "only an answer that waits for you can be discarded and asked again",
                )
            at = now_rfc3339()
            loops_sql.append_txn(conn, task_id, [DiscardTurn(of=payload.after)], at, payload.after)
            return transition_txn(conn, task_id, Executing(current_step=payload.next_step), by=by)

        return await self._db.write(op, "user_input")

    async def forget_rule(self, tool: str, pattern: str) -> bool:
        def op(conn: Tx) -> bool:
            return loops_sql.forget_rule_txn(conn, tool, pattern)

        return await self._db.write(op, None)


def _pause_stands(conn: Tx, task_id: str) -> bool:
    found = tasks_sql.get_state_payload(conn, task_id)
    if found is None:
        raise UnknownTask(task_id)
    return payloads.pause_requested(found[2])
