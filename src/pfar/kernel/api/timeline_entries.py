"""A task's timeline entries: a closed union, one frozen record per kind of moment.

Each entry has its time (`at`) and its `kind` (the wire's discriminator), the facts of
that moment, and `words`: the moment in the owner's words, as `pfar task show` prints
it. The console shows each kind its own way from the same facts (templates/task.html);
who acted (`by`) is the journal's text of an `Actor` read back into one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from ...answers import Actor
from ...journal.json_text import JsonValue
from ...journal.question_kinds import StoredQuestionKind


def _by(by: Actor | None, word: str = "by") -> str:
    return f" {word} {by}" if by else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Created:
    kind: Literal["created"] = "created"
    at: str
    template_id: str

    @property
    def words(self) -> str:
        return f"created from {self.template_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Step:
    """Which call of the task a step entry is about: plan step `step` (0-based) of
    `of` (None: a loop task's tool call, which has no plan), doing `what`."""

    at: str
    step: int
    tool: str
    of: int | None = None
    what: str = ""

    @property
    def label(self) -> str:
        if self.of is None:
            return f"tool call {self.step + 1} {self.tool}"
        return f"step {self.step + 1}/{self.of} {self.tool}" + (
            f" ({self.what})" if self.what else ""
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStarted(_Step):
    """A write's start (a read or a blocked call has none worth telling)."""

    kind: Literal["step_started"] = "step_started"

    @property
    def words(self) -> str:
        return f"{self.label}: started"


@dataclass(frozen=True, slots=True, kw_only=True)
class StepEnded(_Step):
    kind: Literal["step_ended"] = "step_ended"
    status: str
    error: str | None = None
    result: JsonValue = None

    @property
    def words(self) -> str:
        return f"{self.label}: {self.status}" + (f": {self.error}" if self.error else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class QuestionAsked:
    kind: Literal["question_asked"] = "question_asked"
    at: str
    approval_id: str
    question: StoredQuestionKind  # its kind (the approval's action_type)

    @property
    def words(self) -> str:
        return f"asked owner [{self.approval_id[:8]}] {self.question}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    kind: Literal["answered"] = "answered"
    at: str
    approval_id: str
    status: str
    decision: str | None
    by: Actor | None = None  # not kept before schema 13

    @property
    def words(self) -> str:
        return f"owner answer [{self.approval_id[:8]}]: {self.status} ({self.decision})" + _by(
            self.by, "via"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CredentialAsked:
    kind: Literal["credential_asked"] = "credential_asked"
    at: str
    prompt_id: str
    service: str

    @property
    def words(self) -> str:
        return f"asked owner for {self.service} credential [{self.prompt_id[:8]}]"


@dataclass(frozen=True, slots=True, kw_only=True)
class CredentialReceived:
    kind: Literal["credential_received"] = "credential_received"
    at: str
    prompt_id: str
    status: str
    by: Actor | None = None

    @property
    def words(self) -> str:
        return f"credential [{self.prompt_id[:8]}] {self.status}" + _by(self.by, "via")


@dataclass(frozen=True, slots=True, kw_only=True)
class Paused:
    kind: Literal["paused"] = "paused"
    at: str
    paused_from: str  # the state it stopped in
    by: Actor | None = None  # who asked for the pause (not kept before it was)

    @property
    def words(self) -> str:
        return f"paused (from {self.paused_from})" + _by(self.by)


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumed:
    kind: Literal["resumed"] = "resumed"
    at: str
    state: str  # the state it went back to
    by: Actor | None = None

    @property
    def words(self) -> str:
        return f"resumed ({self.state})" + _by(self.by)


@dataclass(frozen=True, slots=True, kw_only=True)
class Retried:
    """The owner retried the task after a recoverable failure (`error`, what failed)."""

    kind: Literal["retried"] = "retried"
    at: str
    state: str  # the state it went back to
    retry: int  # its how-many-th retry
    error: str = ""
    by: Actor | None = None

    @property
    def words(self) -> str:
        failed = f" after: {self.error}" if self.error else ""
        return f"retried (retry {self.retry}, {self.state})" + _by(self.by) + failed


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancelled:
    kind: Literal["cancelled"] = "cancelled"
    at: str
    by: Actor | None = None

    @property
    def words(self) -> str:
        return "cancelled" + _by(self.by)


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageToOwner:
    kind: Literal["message"] = "message"
    at: str
    message_kind: str  # report, approval, credential, result, notice, reply
    status: str  # how far its delivery got

    @property
    def words(self) -> str:
        return f"message to owner ({self.message_kind}, {self.status})"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    kind: Literal["model_call"] = "model_call"
    at: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    priced: bool = True  # False: its model had no price, its cost is unknown

    @property
    def words(self) -> str:
        cost = f"${self.cost_usd:.6f}" if self.priced else "cost unknown (its model has no price)"
        return (
            f"model call {self.provider}/{self.model}: {self.input_tokens} tokens in, "
            f"{self.output_tokens} out, {cost}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopTurn:
    """One turn of a loop task's conversation (`turn`: user, assistant, results,
    summary, discard), as the timeline tells it (cut to a length)."""

    kind: Literal["turn"] = "turn"
    at: str
    turn: str
    text: str

    @property
    def words(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    """A start of the kernel picked the task up: what its recovery decided (`action`:
    RetryFromScratch, ResumeExecution, AskOwner, Abandon, ...) and why."""

    kind: Literal["recovered"] = "recovered"
    at: str
    action: str
    reason: str = ""

    @property
    def words(self) -> str:
        return f"recovered at a restart: {self.action}" + (
            f" ({self.reason})" if self.reason else ""
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Now:
    kind: Literal["now"] = "now"
    at: str
    state: str
    error: str | None = None

    @property
    def words(self) -> str:
        return f"now {self.state}" + (f": {self.error}" if self.error else "")


Entry = (
    Created
    | StepStarted
    | StepEnded
    | QuestionAsked
    | Answered
    | CredentialAsked
    | CredentialReceived
    | Paused
    | Resumed
    | Retried
    | Cancelled
    | MessageToOwner
    | ModelCall
    | LoopTurn
    | Recovered
    | Now
)
TimelineEntry = Annotated[Entry, Field(discriminator="kind")]
