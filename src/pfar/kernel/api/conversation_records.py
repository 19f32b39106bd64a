"""A loop task's conversation as the operator API gives it: one record per turn, by
kind, each with its number (`seq`) and when it was journaled.

These are the wire's records, not the journal's: a turn is told as the owner reads it
(who said what, each tool call with its arguments, each result with whether it was an
error), without what only the next model call needs. `Conversation` is a read of the
turns after a number; `Streamed`, `RetryNote` and `StateChange` are what a live view
is given besides turns while the task runs (conversation.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from ...journal import TaskState
from ...journal.json_text import JsonValue
from ...journal.turns import (
    AssistantTurn,
    DiscardTurn,
    RejectedCall,
    ResultsTurn,
    StoredTurn,
    SummaryTurn,
    UserTurn,
)


@dataclass(frozen=True, slots=True)
class ToolCallView:
    """A tool call of the model: `step` is its row in the task's steps (0-based)."""

    call_id: str
    name: str
    arguments: dict[str, JsonValue]
    step: int


@dataclass(frozen=True, slots=True)
class RejectedCallView:
    """A tool call the model made that could not be used, and why."""

    call_id: str
    name: str
    arguments: dict[str, JsonValue]
    error: str


@dataclass(frozen=True, slots=True)
class ToolResultView:
    """What a tool call came to, as the model was shown it."""

    call_id: str
    step: int
    content: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class UserSaid:
    """The task's prompt, the owner's message, or pfar's own "go on" (`source`)."""

    seq: int
    at: str
    text: str
    source: Literal["prompt", "owner", "continue"]
    kind: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class ModelSaid:
    """The model's answer: its text, its tool calls and those it could not make."""

    seq: int
    at: str
    text: str
    calls: tuple[ToolCallView, ...]
    rejected: tuple[RejectedCallView, ...]
    unusable: tuple[str, ...]
    stop_reason: str
    model: str
    input_tokens: int
    output_tokens: int
    kind: Literal["assistant"] = "assistant"
    # its extended thinking, as text (redacted), shown as thinking: never the answer
    thinking: str = ""


@dataclass(frozen=True, slots=True)
class ToolResults:
    """The results of the calls of the answer before; `note` is what pfar added."""

    seq: int
    at: str
    results: tuple[ToolResultView, ...]
    note: str
    kind: Literal["results"] = "results"


@dataclass(frozen=True, slots=True)
class Summarized:
    """The turns before `upto` summarized: the model is shown this instead of them."""

    seq: int
    at: str
    text: str
    upto: int
    kind: Literal["summary"] = "summary"


@dataclass(frozen=True, slots=True)
class Discarded:
    """The owner's `/retry`: the answer `of` (its seq) was taken back."""

    seq: int
    at: str
    of: int
    kind: Literal["discard"] = "discard"


ConversationTurn = Annotated[
    UserSaid | ModelSaid | ToolResults | Summarized | Discarded, Field(discriminator="kind")
]


@dataclass(frozen=True, slots=True)
class Conversation:
    """A loop task's turns after `after`, in order, and where the task stands;
    `last_seq` is the last turn's number (`after` when there is none newer)."""

    task_id: str
    state: TaskState
    after: int
    last_seq: int
    turns: tuple[ConversationTurn, ...]


@dataclass(frozen=True, slots=True)
class Streamed:
    """Text of the model's answer, as it streams (the answer's turn then says it whole)."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class RetryNote:
    """The model call failed and is tried again: what streamed of it is void."""

    text: str
    kind: Literal["retry"] = "retry"


@dataclass(frozen=True, slots=True)
class StateChange:
    """The task's state, when it changed (the first one a view is given is where it is)."""

    state: TaskState
    kind: Literal["state"] = "state"


def _rejected(r: RejectedCall) -> RejectedCallView:
    return RejectedCallView(r.id, r.name, dict(r.input), r.error)


def turn_view(stored: StoredTurn) -> ConversationTurn:
    """The journal's turn as the wire tells it."""
    seq, at, turn = stored.seq, stored.at, stored.turn
    match turn:
        case UserTurn():
            return UserSaid(seq, at, turn.text, turn.source)
        case AssistantTurn():
            return ModelSaid(
                seq,
                at,
                turn.text,
                tuple(ToolCallView(c.id, c.name, dict(c.input), c.step) for c in turn.calls),
                tuple(_rejected(r) for r in turn.rejected),
                turn.unusable,
                turn.stop_reason,
                turn.model,
                turn.input_tokens,
                turn.output_tokens,
                thinking=thinking_of(turn),
            )
        case ResultsTurn():
            results = tuple(
                ToolResultView(r.call_id, r.step, r.content, r.is_error) for r in turn.results
            )
            return ToolResults(seq, at, results, turn.note)
        case SummaryTurn():
            return Summarized(seq, at, turn.text, turn.upto)
        case DiscardTurn():
            return Discarded(seq, at, turn.of)


def thinking_of(turn: AssistantTurn) -> str:
    """An answer's thinking as text to show (as kept: redacted of secrets), or that the
    provider sent it encrypted; "" when it did not think."""
    parts = [
        t.thinking if t.kind == "thinking" else "(encrypted by the provider)" for t in turn.thinking
    ]
    return " ".join(p for p in parts if p)
