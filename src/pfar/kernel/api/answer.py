"""A task's input and its answer, as `--wait` and `task show` print them: what the owner
asked, and what the task said back (not only its state)."""

from __future__ import annotations

from ...journal import TaskKind, TaskRecord
from ...journal.store import Store
from ...journal.turns import AssistantTurn


def task_input(task: TaskRecord) -> str | None:
    """The text the task was started with (a submit's text, a loop's prompt)."""
    text = (task.trigger_event or {}).get("text")
    return text if isinstance(text, str) else None


async def task_answer(journal: Store, task: TaskRecord) -> str | None:
    """The task's answer: the result it told the owner, whole; for a loop task that waits
    for you, its model's last words; None before it has one."""
    if task.kind is TaskKind.loop and not task.state.terminal:
        for stored in reversed(await journal.loops.turns(task.task_id)):
            if isinstance(stored.turn, AssistantTurn) and stored.turn.text.strip():
                return stored.turn.text
        return None
    for message in reversed(await journal.events.for_task(task.task_id)):
        if message["kind"] == "result":
            body = str(message["body"])
            # "Task TITLE (ID) finished:\n" heads the message to the owner; the answer follows
            head, _, rest = body.partition("\n")
            return rest if head.endswith("finished:") else body
    result = (task.execute_progress or {}).get("result")  # a subtask tells no owner
    return result if isinstance(result, str) else None
