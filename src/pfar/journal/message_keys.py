"""The keys of the messages to the owner: one record per kind, and the text each is
stored as (`owner_outbox.message_key`, `channel_outbox.message_key`).

A key names what a message is about, so that queueing it again after a crash is a
no-op. Its text is the primary key of rows already on disk: `str(key)` gives exactly
the text pfar has always written ("approval:ID:0", "result:TASK", ...), and
`parse_message_key(str(key)) == key` for every kind.

`OtherKey` holds text that is none of these. pfar writes no such key, but a row can
hold one (a journal a newer pfar wrote, a hand edit), and the outbox goes on delivering
every row as it is: `read_message_key` (message_key_parse.py) gives `OtherKey` for it,
never an error and never a rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class MessageKind(StrEnum):
    """What a message to the owner is; a channel shows each kind its own way."""

    report = "report"  # a start's recovery report
    approval = "approval"  # a question a task waits on (buttons under it)
    credential = "credential"  # a prompt for a secret (the answer goes to the vault)
    result = "result"  # a task's result
    notice = "notice"  # anything else the owner is told
    reply = "reply"  # an answer to the owner's words on one channel


class _Key:
    __slots__ = ()

    @property
    def text(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text


# -- a question to the owner, asked again (attempt 1, 2, ...) after a restart -----------


@dataclass(frozen=True, slots=True)
class ApprovalKey(_Key):
    approval_id: str
    attempt: int

    @property
    def text(self) -> str:
        return f"{self.prefix}{self.attempt}"

    @property
    def prefix(self) -> str:
        """The text every attempt's key starts with."""
        return f"approval:{self.approval_id}:"

    @property
    def question_id(self) -> str:
        return self.approval_id


@dataclass(frozen=True, slots=True)
class CredentialKey(_Key):
    prompt_id: str
    attempt: int

    @property
    def text(self) -> str:
        return f"{self.prefix}{self.attempt}"

    @property
    def prefix(self) -> str:
        """The text every attempt's key starts with."""
        return f"credential:{self.prompt_id}:"

    @property
    def question_id(self) -> str:
        return self.prompt_id


# -- about one task ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResultKey(_Key):
    task_id: str

    @property
    def text(self) -> str:
        return f"result:{self.task_id}"


@dataclass(frozen=True, slots=True)
class FailedKey(_Key):
    """A task's failure; `retry` (its retries before it) makes each failure after an
    owner's retry a message of its own, while a failure written again is still one."""

    task_id: str
    retry: int = 0

    @property
    def text(self) -> str:
        return f"failed:{self.task_id}" + (f":{self.retry}" if self.retry else "")


@dataclass(frozen=True, slots=True)
class CancelledKey(_Key):
    task_id: str

    @property
    def text(self) -> str:
        return f"cancelled:{self.task_id}"


@dataclass(frozen=True, slots=True)
class HookKey(_Key):
    """A security hook failed closed; `verdict` is the verdict's key ("point:key")."""

    task_id: str
    verdict: str

    @property
    def text(self) -> str:
        return f"hook:{self.task_id}:{self.verdict}"


@dataclass(frozen=True, slots=True)
class AnomalyKey(_Key):
    """An unusual tool call at `step`; `detail` tells apart warnings of one step."""

    task_id: str
    step: int
    detail: str = ""

    @property
    def text(self) -> str:
        return f"anomaly:{self.task_id}:{self.step}" + (f":{self.detail}" if self.detail else "")


@dataclass(frozen=True, slots=True)
class LoopReplyKey(_Key):
    """A loop task's answer after its conversation's turn `seq`."""

    task_id: str
    seq: int

    @property
    def text(self) -> str:
        return f"loop-reply:{self.task_id}:{self.seq}"


@dataclass(frozen=True, slots=True)
class WorktreeKey(_Key):
    task_id: str

    @property
    def text(self) -> str:
        return f"worktree:{self.task_id}"


@dataclass(frozen=True, slots=True)
class WorktreeEndKey(_Key):
    task_id: str

    @property
    def text(self) -> str:
        return f"worktree-end:{self.task_id}"


@dataclass(frozen=True, slots=True)
class RedactedInputKey(_Key):
    task_id: str

    @property
    def text(self) -> str:
        return f"redacted-input:{self.task_id}"


@dataclass(frozen=True, slots=True)
class SkillsSkippedKey(_Key):
    """The skill folders a new loop task was not given, and why (docs/skills.md)."""

    task_id: str

    @property
    def text(self) -> str:
        return f"skills-skipped:{self.task_id}"


@dataclass(frozen=True, slots=True)
class WorkflowNoticeKey(_Key):
    """A workflow's `event` ("resume") at `at` (an RFC 3339 time)."""

    event: str
    task_id: str
    at: str

    @property
    def text(self) -> str:
        return f"workflow-{self.event}:{self.task_id}:{self.at}"


# -- about the kernel ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReportKey(_Key):
    boot_id: str

    @property
    def text(self) -> str:
        return f"report:{self.boot_id}"


@dataclass(frozen=True, slots=True)
class FailStopKey(_Key):
    boot_id: str

    @property
    def text(self) -> str:
        return f"fail-stop:{self.boot_id}"


@dataclass(frozen=True, slots=True)
class BackupFailedKey(_Key):
    boot_id: str
    count: int

    @property
    def text(self) -> str:
        return f"backup-failed:{self.boot_id}:{self.count}"


@dataclass(frozen=True, slots=True)
class DiskLowKey(_Key):
    boot_id: str
    count: int

    @property
    def text(self) -> str:
        return f"disk-low:{self.boot_id}:{self.count}"


@dataclass(frozen=True, slots=True)
class ProviderHealthKey(_Key):
    """A model provider went down or came back (the how-many-th such change this boot)."""

    boot_id: str
    count: int

    @property
    def text(self) -> str:
        return f"provider-health:{self.boot_id}:{self.count}"


@dataclass(frozen=True, slots=True)
class McpServerKey(_Key):
    """The how-many-th notice of this boot about an MCP server (it failed, or listed
    tools with bad schemas)."""

    boot_id: str
    count: int

    @property
    def text(self) -> str:
        return f"mcp-server:{self.boot_id}:{self.count}"


# -- about one channel -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChannelDegradedKey(_Key):
    """A channel degraded; `minute` ("2025-01-02T03:04") makes it one a minute at most."""

    channel: str
    minute: str

    @property
    def text(self) -> str:
        return f"channel-degraded:{self.channel}:{self.minute}"


@dataclass(frozen=True, slots=True)
class InDoubtKey(_Key):
    """The message `of` may not have arrived on `channel`."""

    channel: str
    of: MessageKey

    @property
    def text(self) -> str:
        return f"in-doubt:{self.channel}:{self.of}"


@dataclass(frozen=True, slots=True)
class ReplyKey(_Key):
    """The answer to the owner's words (`event_id`) on `channel`, quoting the owner's
    message `reply_to` (its id there) when there is one."""

    channel: str
    event_id: str
    reply_to: str | None = None

    @property
    def text(self) -> str:
        return f"{self.prefix}{self.reply_to or ''}"

    @property
    def prefix(self) -> str:
        """The text the answer's key starts with, whichever message it quotes."""
        return f"reply:{self.channel}:{self.event_id}@"


@dataclass(frozen=True, slots=True)
class OtherKey(_Key):
    """A stored key of no kind pfar writes, kept and delivered as it is."""

    stored: str

    @property
    def text(self) -> str:
        return self.stored


KnownKey = (
    ApprovalKey
    | CredentialKey
    | ResultKey
    | FailedKey
    | CancelledKey
    | HookKey
    | AnomalyKey
    | LoopReplyKey
    | WorktreeKey
    | WorktreeEndKey
    | RedactedInputKey
    | SkillsSkippedKey
    | WorkflowNoticeKey
    | ReportKey
    | FailStopKey
    | BackupFailedKey
    | DiskLowKey
    | ProviderHealthKey
    | McpServerKey
    | ChannelDegradedKey
    | InDoubtKey
    | ReplyKey
)
MessageKey = KnownKey | OtherKey
