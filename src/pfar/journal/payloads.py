"""Each task state's payload: a frozen record with a `kind` tag (the state's name).

A payload is stored as JSON in `task_journal.state_detail` and validated when it is
read: a row whose payload has an unknown kind, a field of the wrong type, a field
no state has, or a kind that is not its row's state is reported with the task id
and the field (MalformedTaskRow), never guessed at. Only fields that differ from
their defaults are stored, so a step commit writes `{"kind":"Executing","current_step":4}`.

Fields whose name the journal's SQL reads directly: `pause_requested` (every step
commit checks it) and `llm_request` (set by `Journal.llm_request_sent`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Annotated, Any, Literal

import orjson
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from ..errors import MalformedTaskRow
from .states import BY_VALUE, TaskState

# Unknown fields are refused, and a "3" is not taken for 3: what was written is what is read.
_STRICT = ConfigDict(extra="forbid", strict=True)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LlmRequest:
    """A model call journaled as sent (its answer not yet): a restart makes it again."""

    __pydantic_config__ = _STRICT
    phase: str
    sent_at: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """The owner approved `step` with the arguments whose sha256 is `args_sha256` (None:
    an approval that showed no arguments): exactly those may run."""

    __pydantic_config__ = _STRICT
    step: int
    args_sha256: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowAnswer:
    """The owner's answer to a traced workflow's question, bound to that question: its
    kind (`question`, the approval's action_type), the step it was about (0-based) and
    its approval. It applies only while the trace is still where the question found it."""

    __pydantic_config__ = _STRICT
    option: str
    question: str
    step: int
    approval_id: str


# -- the working states: a runner may advance them --------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Extracting:
    __pydantic_config__ = _STRICT
    kind: Literal["Extracting"] = "Extracting"
    # the owner asked for a pause: the task pauses at its next boundary
    pause_requested: bool = False
    pause_by: str | None = None  # who asked for the pause, through which surface
    llm_request: LlmRequest | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Planning:
    __pydantic_config__ = _STRICT
    kind: Literal["Planning"] = "Planning"
    pause_requested: bool = False
    pause_by: str | None = None  # who asked for the pause, through which surface
    llm_request: LlmRequest | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Executing:
    """At plan step `current_step` (0-based). The owner's answers ride here, each bound to
    the one step it answered, and each is spent by the run it allows: the commit that
    journals that run's start drops it (SPENT_BY_A_RUN), so a run cut off by a crash
    leaves no answer behind and the next start asks again."""

    __pydantic_config__ = _STRICT
    kind: Literal["Executing"] = "Executing"
    current_step: int = 0
    # "retry" (or "approve"): the next run of this step goes ahead whatever its record
    # says; spent in the commit that journals that run's start
    retry_step: int | None = None
    # "skip": this step is recorded as skipped, not run
    skip_step: int | None = None
    # the owner approved this step's action, for exactly the arguments shown
    approved: Grant | None = None
    # a traced workflow's answer about its current step (rerun, skip, continue, ...)
    workflow_answer: WorkflowAnswer | None = None
    pause_requested: bool = False
    pause_by: str | None = None  # who asked for the pause, through which surface
    llm_request: LlmRequest | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Synthesizing:
    __pydantic_config__ = _STRICT
    kind: Literal["Synthesizing"] = "Synthesizing"
    pause_requested: bool = False
    pause_by: str | None = None  # who asked for the pause, through which surface
    llm_request: LlmRequest | None = None


# Executing's fields that the run they allow spends (Journal.step_started)
SPENT_BY_A_RUN = ("retry_step", "approved", "workflow_answer")

Working = Extracting | Planning | Executing | Synthesizing
WorkingPayload = Annotated[Working, Field(discriminator="kind")]


# -- parked on the owner ------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class InFlight:
    """Recovery parked the task after `deaths` kernel deaths in a row with it in flight;
    "resume" puts it back exactly as `then` says."""

    __pydantic_config__ = _STRICT
    deaths: int
    then: WorkingPayload


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AwaitingApproval:
    __pydantic_config__ = _STRICT
    kind: Literal["AwaitingApproval"] = "AwaitingApproval"
    approval_id: str
    step: int = 0
    # what "deny" means for this question: fail the task, or skip the step
    on_deny: Literal["fail", "skip"] = "fail"
    # a thinking phase parked on a cloud-routing question goes back to this state
    resume_to: Literal["Extracting", "Planning", "Synthesizing"] | None = None
    # the template's content hash when the owner was asked whether to continue under it
    template_seen: str | None = None
    # a grant for this step from an earlier question outlives this one
    approved: Grant | None = None
    in_flight: InFlight | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AwaitingCredential:
    __pydantic_config__ = _STRICT
    kind: Literal["AwaitingCredential"] = "AwaitingCredential"
    prompt_id: str
    service: str
    prompt_message_id: str
    step: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WaitingForUser:
    """A loop task whose model ended its turn (the conversation's turn `after`): the
    owner's next message continues it. No question and no deadline: it waits."""

    __pydantic_config__ = _STRICT
    kind: Literal["WaitingForUser"] = "WaitingForUser"
    after: int = 0
    # the next tool call's number, where the loop goes on from
    next_step: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Blocked:
    """A loop task whose tool call `step` (a Task call) started the subtask
    `child_task_id`: it waits, holding no coroutine, until that task ends; the child's
    answer (or its failure) is then the call's result."""

    __pydantic_config__ = _STRICT
    kind: Literal["Blocked"] = "Blocked"
    step: int
    child_task_id: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Queued:
    """Waiting for a slot (`[scheduler] max_concurrent`) or for rate headroom, holding
    no coroutine's work; admitted, it goes back to exactly `then`."""

    __pydantic_config__ = _STRICT
    kind: Literal["Queued"] = "Queued"
    then: WorkingPayload
    priority: int = 0


# -- held by the owner, and ended ---------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Paused:
    """Stopped by the owner at a boundary; resuming goes back to exactly `then`."""

    __pydantic_config__ = _STRICT
    kind: Literal["Paused"] = "Paused"
    then: WorkingPayload


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Cancelling:
    """The owner's cancel is committed; its processes are being ended."""

    __pydantic_config__ = _STRICT
    kind: Literal["Cancelling"] = "Cancelling"
    cancelled_from: TaskState
    step: int = 0
    by: str | None = None  # who cancelled it, through which surface


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Completed:
    __pydantic_config__ = _STRICT
    kind: Literal["Completed"] = "Completed"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Failed:
    """Ended by a failure. `recoverable`: `pfar task retry` may continue it from the
    journal, going back to exactly `then` (where it failed); `retry_count`: how many
    times it was retried before this failure. A row written before these were kept
    reads as not recoverable, never retried."""

    __pydantic_config__ = _STRICT
    kind: Literal["Failed"] = "Failed"
    recoverable: bool = False
    retry_count: int = 0
    then: WorkingPayload | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Abandoned:
    __pydantic_config__ = _STRICT
    kind: Literal["Abandoned"] = "Abandoned"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Cancelled:
    __pydantic_config__ = _STRICT
    kind: Literal["Cancelled"] = "Cancelled"


Payload = (
    Extracting
    | Planning
    | Executing
    | Synthesizing
    | AwaitingApproval
    | AwaitingCredential
    | WaitingForUser
    | Blocked
    | Queued
    | Paused
    | Cancelling
    | Completed
    | Failed
    | Abandoned
    | Cancelled
)
_ADAPTER: TypeAdapter[Payload] = TypeAdapter(Annotated[Payload, Field(discriminator="kind")])

# the payload a state is entered with when nothing more is known
EMPTY: dict[TaskState, Payload] = {
    TaskState.Extracting: Extracting(),
    TaskState.Planning: Planning(),
    TaskState.Executing: Executing(),
    TaskState.Synthesizing: Synthesizing(),
    TaskState.WaitingForUser: WaitingForUser(),
    TaskState.Completed: Completed(),
    TaskState.Failed: Failed(),
    TaskState.Abandoned: Abandoned(),
    TaskState.Cancelled: Cancelled(),
}
assert all(TaskState(p.kind) is s for s, p in EMPTY.items())


def state_of(payload: Payload) -> TaskState:
    return BY_VALUE.get(payload.kind) or TaskState(payload.kind)


def step_of(payload: Payload) -> int | None:
    """The plan step the payload is at (None for a state that is at no step)."""
    match payload:
        case Executing(current_step=step):
            return step
        case AwaitingApproval(step=step) | AwaitingCredential(step=step) | Cancelling(step=step):
            return step
        case WaitingForUser(next_step=step) | Blocked(step=step):
            return step
        case Paused(then=then) | Queued(then=then):
            return step_of(then)
        case _:
            return None


def pause_requested(payload: Payload) -> bool:
    return isinstance(payload, Working) and payload.pause_requested


def pause_by(payload: Payload | None) -> str | None:
    """Who asked for the pause that stands (None: no one, or not known)."""
    return payload.pause_by if isinstance(payload, Working) and payload.pause_requested else None


def resume_point(payload: Payload) -> Working | None:
    """Where a task that fails in `payload` goes back to when it is retried: the working
    state it was in (or the one its question, pause or queue would have gone back to),
    with nothing of that moment's own left on it (a pause request, a model call sent,
    an answer that allowed one run). None: a state a retry cannot go back to."""
    match payload:
        case Executing(current_step=step):
            return Executing(current_step=step)
        case Extracting() | Planning() | Synthesizing():
            return EMPTY[state_of(payload)]  # type: ignore[return-value]
        case AwaitingApproval(resume_to=str(back)):
            return EMPTY[TaskState(back)]  # type: ignore[return-value]
        case AwaitingApproval(step=step) | AwaitingCredential(step=step):
            return Executing(current_step=step)
        case Paused(then=then) | Queued(then=then):
            return resume_point(then)
        case _:
            return None


def paused_from(payload: Payload) -> TaskState | None:
    """Where a Paused (or Queued) task goes back to (None for any other state)."""
    return state_of(payload.then) if isinstance(payload, Paused | Queued) else None


def plain(payload: Any) -> dict[str, Any]:
    """The payload as stored: its kind and every field that is not its default."""
    out: dict[str, Any] = {}
    cls: type = type(payload)
    for name, default in _defaults(cls):
        value = getattr(payload, name)
        if name != "kind" and value == default:
            continue
        out[name] = plain(value) if dataclasses.is_dataclass(value) else value
    return out


@functools.cache
def _defaults(cls: type) -> tuple[tuple[str, Any], ...]:
    """Each field's name and default (every step commit writes a payload)."""
    return tuple((f.name, f.default) for f in dataclasses.fields(cls))


def dumps(payload: Payload) -> str:
    data = plain(payload)
    try:  # orjson: the same text as json's, faster (see json_text.ORJSON_OPTIONS)
        return orjson.dumps(data).decode()
    except TypeError:
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def loads(task_id: str, state: str, text: str | None) -> Payload:
    """The payload of `task_id`'s row, checked: a row that does not hold one of the
    payloads above, or holds another state's, raises MalformedTaskRow naming the field."""
    try:
        payload = _ADAPTER.validate_json(text or "null")
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"] if not _is_tag(p))
        raise MalformedTaskRow(
            task_id, "state_detail" + (f".{where}" if where else ""), err["msg"]
        ) from None
    if payload.kind != state:
        raise MalformedTaskRow(
            task_id, "state_detail.kind", f"is {payload.kind!r}, but the row's state is {state!r}"
        )
    return payload


def _is_tag(part: object) -> bool:
    """pydantic names the union member in an error's location; the field path is the rest."""
    return isinstance(part, str) and part in _KINDS


_KINDS = frozenset(s.value for s in TaskState)
