"""Where the model's answer takes a loop task: its calls to run, pfar's own "continue"
or note when nothing in it can run, the summary (a task run `once`), or the owner."""

from __future__ import annotations

from ...journal import OwnerMessage, TaskRecord
from ...journal.message_keys import LoopReplyKey, MessageKind
from ...journal.payloads import Executing, Synthesizing, WaitingForUser
from ...journal.turns import AssistantTurn, LoopSettings, Turn, UserTurn
from ...llm.messages import StopReason

CONTINUE = "Your answer was cut off at its token limit. Continue exactly where you stopped."
# pfar's turn after an answer whose every call was rejected; the errors are their results
REJECTED = "None of your tool calls could be used: each one's result says why."


def route(
    task: TaskRecord, settings: LoopSettings, turn: AssistantTurn, seq: int, first: int
) -> tuple[list[Turn], Executing | WaitingForUser | Synthesizing, list[OwnerMessage]]:
    """Where the model's answer (turn `seq`) takes the task: its calls to run; pfar's own
    "continue" or note when nothing in it can run; the summary (`once`); or the owner."""
    cut_off = turn.stop_reason in (StopReason.max_tokens.value, StopReason.partial.value)
    if turn.calls:
        return [], Executing(current_step=first), []
    if cut_off or turn.unusable or turn.rejected:
        # nothing to run: pfar's own message takes the user's turn and the loop goes on
        # (the errors of rejected calls go with it, as their tool results)
        note = CONTINUE if cut_off else unusable_note(turn) if turn.unusable else REJECTED
        return [UserTurn(text=note, source="continue")], Executing(current_step=first), []
    if settings.once:
        return [], Synthesizing(), []
    to = WaitingForUser(after=seq, next_step=first)
    return [], to, [_reply_message(task, settings, turn.text, seq)]


def unusable_note(turn: AssistantTurn) -> str:
    lines = "\n".join(f"- {u}" for u in turn.unusable)
    return f"Some of your tool calls could not be used and did not run:\n{lines}"


def _reply_message(task: TaskRecord, settings: LoopSettings, text: str, seq: int) -> OwnerMessage:
    title = settings.title or task.task_id[:8]
    return OwnerMessage(
        message_key=LoopReplyKey(task.task_id, seq),
        kind=MessageKind.notice,
        task_id=task.task_id,
        body=(
            f"Task {title} ({task.task_id[:8]}) waits for you:\n{text or '(no text)'}\n"
            f'  answer: pfar send {task.task_id[:8]} "MESSAGE"   |   '
            f"pfar send {task.task_id[:8]} /done"
        ),
    )
