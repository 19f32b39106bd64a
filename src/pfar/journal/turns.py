"""A loop task's durable records: its settings, and its conversation as typed turns.

The conversation is appended, one turn at a time, each in the commit that also moves
the task (a model's answer and the route it takes; a tool call's results; the owner's
message): what is journaled is exactly what the next model call is shown. A turn is
stored as JSON with a `kind` tag and validated when read, like a state's payload.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from ..errors import MalformedTaskRow

_STRICT = ConfigDict(extra="forbid", strict=True)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SkillSeen:
    """A skill a loop task was given (tools/skills): what its system prompt lists, and
    where the Skill tool reads its body. Fixed at the task's creation, so a resumed task
    sees the same skills, and is told when one changed on disk since."""

    __pydantic_config__ = _STRICT
    name: str
    description: str
    # "home": $PFAR_HOME/skills; "task": the task directory's .pfar/skills
    source: Literal["home", "task"]
    # the skill's folder, absolute, as it was found
    path: str
    # the sha256 of its SKILL.md as the task was given it
    sha256: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoopSettings:
    """How a loop task runs, fixed when it is created."""

    __pydantic_config__ = _STRICT
    # the directory its tools work in (a git worktree of it, when `worktree` is set)
    working_dir: str
    # the model tier it asks ("worker" unless the owner chose another)
    tier: str = "worker"
    # end the task when the model ends its turn, instead of waiting for the owner's reply
    once: bool = False
    # the owner asked for the task's own git worktree; `worktree` is it once made, and
    # `worktree_error` why it could not be (the task then works in its directory)
    use_worktree: bool = False
    worktree: str | None = None
    worktree_error: str | None = None
    # the repository the worktree belongs to, and its branch
    repository: str | None = None
    branch: str | None = None
    # the git dir and work tree pfar's own git calls are given, pinned before any tool
    # of the task ran (a worktree's: the git dir pfar made for it); None until then, ""
    # when the directory was in no repository
    git_dir: str | None = None
    git_work_tree: str | None = None
    # a subtask: the task whose Task tool call started it, and how deep it is
    parent_task_id: str | None = None
    parent_step: int | None = None
    depth: int = 0
    title: str = ""
    # learnings of earlier tasks relevant to its prompt (the knowledge store), fixed at
    # its creation so that a resumed task sees the same ones
    learnings: tuple[str, ...] = ()
    # the skills it was given (names and descriptions in its system prompt), found when
    # it was created (a subtask's are its parent's)
    skills: tuple[SkillSeen, ...] = ()
    # when tasks wait for a slot ([scheduler] max_concurrent), higher goes first
    priority: int = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoopCall:
    """A tool call of the model, numbered: `step` is its row in the task's steps."""

    __pydantic_config__ = _STRICT
    id: str
    name: str
    input: dict[str, Any]
    step: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RejectedCall:
    """A tool call of the model that could not be used (a tool that does not exist, bad
    JSON, a wrong schema): sent back as the model made it, with `error` as its result."""

    __pydantic_config__ = _STRICT
    id: str
    name: str
    input: dict[str, Any]
    error: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Thought:
    """A block of the model's extended thinking, kept exactly as the API sent it, since
    the API wants it back unchanged in the requests of the same tool-use exchange:
    `thinking` (its text and `signature`) or `redacted_thinking` (its encrypted `data`).
    A block whose text held a secret is kept redacted and without its signature (it
    cannot be sent back). Shown as thinking, never as the answer."""

    __pydantic_config__ = _STRICT
    kind: Literal["thinking", "redacted_thinking"] = "thinking"
    thinking: str = ""
    signature: str = ""
    data: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoopResult:
    """What a tool call came to, as the model is shown it."""

    __pydantic_config__ = _STRICT
    call_id: str
    step: int
    content: str
    is_error: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ContextFit:
    """How the conversation a model call was sent was fitted to the model's budget: its
    size in tokens and how they were counted ("anthropic": the API's count; "tiktoken:
    <encoding>"; "estimate": four characters a token), the budget, whether older tool
    results were cut, and the summary in effect (the seq the turns before it stand for)."""

    __pydantic_config__ = _STRICT
    tokens: int
    method: str
    budget: int
    cut: bool = False
    summarized_upto: int | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UserTurn:
    """A user message: the task's prompt, the owner's message, or pfar's own
    continuation after an answer was cut off at its token limit."""

    __pydantic_config__ = _STRICT
    kind: Literal["user"] = "user"
    text: str
    source: Literal["prompt", "owner", "continue"] = "owner"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AssistantTurn:
    """The model's answer: its text and tool calls, and apart from them its thinking
    (`thinking`: sent back to the provider as its API requires, never the answer)."""

    __pydantic_config__ = _STRICT
    kind: Literal["assistant"] = "assistant"
    text: str = ""
    calls: tuple[LoopCall, ...] = ()
    stop_reason: str = "end_turn"
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    # tool calls the model made that could not be used, as older kernels kept them:
    # never sent back as calls, so the next turn tells the model about them in words
    unusable: tuple[str, ...] = ()
    # the same, kept whole: sent back as calls, each answered by its error in the
    # next user message (the calls' own results never hold them)
    rejected: tuple[RejectedCall, ...] = ()
    # how the request it answers was fitted to the budget (None: journaled before pfar
    # kept it)
    fit: ContextFit | None = None
    thinking: tuple[Thought, ...] = ()
    # the model the request named (`model` is the one the API says answered, which can
    # be another name for it): its thinking goes back only to requests that name it
    # ("": journaled before pfar kept it, when `model` stands for it)
    asked: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResultsTurn:
    """Every tool call of the assistant turn before it, resolved; `note` is what pfar adds
    (calls it could not use, an answer cut off at its token limit)."""

    __pydantic_config__ = _STRICT
    kind: Literal["results"] = "results"
    results: tuple[LoopResult, ...]
    note: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SummaryTurn:
    """The turns before `upto` (their seq) summarized by the cheap tier: the model is
    shown this instead of them. They stay in the journal."""

    __pydantic_config__ = _STRICT
    kind: Literal["summary"] = "summary"
    text: str
    upto: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DiscardTurn:
    """The owner's `/retry`: the model's answer `of` (its seq) is taken back, and the
    model asked again. Both stay in the journal; the model is shown neither."""

    __pydantic_config__ = _STRICT
    kind: Literal["discard"] = "discard"
    of: int


Turn = UserTurn | AssistantTurn | ResultsTurn | SummaryTurn | DiscardTurn


# built when a loop's row is first read: a kernel that runs no loop never pays for them
@functools.cache
def _turn_adapter() -> TypeAdapter[Turn]:
    return TypeAdapter(Annotated[Turn, Field(discriminator="kind")])


@functools.cache
def _settings_adapter() -> TypeAdapter[LoopSettings]:
    return TypeAdapter(LoopSettings)


@dataclasses.dataclass(frozen=True, slots=True)
class StoredTurn:
    seq: int
    at: str
    turn: Turn


def dump(value: Any) -> str:
    return json.dumps(_plain(value), separators=(",", ":"), ensure_ascii=False)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def load_turn(task_id: str, seq: int, text: str) -> Turn:
    try:
        return _turn_adapter().validate_json(text)
    except ValidationError as exc:
        raise MalformedTaskRow(task_id, f"loop_turns[{seq}]", _first(exc)) from None


def load_settings(task_id: str, text: str) -> LoopSettings:
    try:
        return _settings_adapter().validate_json(text)
    except ValidationError as exc:
        raise MalformedTaskRow(task_id, "loop_tasks.settings_json", _first(exc)) from None


def _first(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


@dataclasses.dataclass(frozen=True, slots=True)
class PermissionRule:
    """The owner's "always allow" or "never allow" for calls of `tool` matching `pattern`
    (an fnmatch pattern over the call's summary: a command, a path, a host)."""

    tool: str
    pattern: str
    decision: Literal["allow", "deny"]
    task_id: str | None = None


__all__ = [
    "AssistantTurn",
    "LoopCall",
    "LoopResult",
    "LoopSettings",
    "PermissionRule",
    "ResultsTurn",
    "SkillSeen",
    "StoredTurn",
    "SummaryTurn",
    "Turn",
    "UserTurn",
    "dump",
    "load_settings",
    "load_turn",
]
