"""A message key's stored text read back as the key (journal/message_keys.py).

`parse_message_key` is strict: text that must be one of pfar's kinds, or an error that
names it. `read_message_key` is for rows read back: text of no kind is kept as it is
(`OtherKey`), since the outbox delivers every row it holds and rewrites none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ..errors import UnknownMessageKey
from .message_keys import (
    AnomalyKey,
    ApprovalKey,
    BackupFailedKey,
    CancelledKey,
    ChannelDegradedKey,
    CredentialKey,
    DiskLowKey,
    FailedKey,
    FailStopKey,
    HookKey,
    InDoubtKey,
    KnownKey,
    LoopReplyKey,
    McpServerKey,
    MessageKey,
    OtherKey,
    ProviderHealthKey,
    RedactedInputKey,
    ReplyKey,
    ReportKey,
    ResultKey,
    SkillsSkippedKey,
    WorkflowNoticeKey,
    WorktreeEndKey,
    WorktreeKey,
)


def parse_message_key(text: str) -> KnownKey:
    """The key `text` is the text of.

    Raises:
        UnknownMessageKey: `text` is not the text of any kind of key pfar writes.
    """
    head, sep, rest = text.partition(":")
    parse = _PARSERS.get(head) if sep else None
    if parse is None and head.startswith("workflow-"):
        parse = _workflow(head.removeprefix("workflow-"))
    try:
        key = parse(rest) if parse is not None else None
    except ValueError:
        key = None
    # the text must be the key's own, byte for byte ("01" is no attempt 1): a row's key
    # is its primary key, and a key written again must meet it
    if key is None or key.text != text:
        raise UnknownMessageKey(text)
    return key


def read_message_key(text: str) -> MessageKey:
    """The key of a stored row: its kind, or `OtherKey` for text of none (kept as it is)."""
    try:
        return parse_message_key(text)
    except UnknownMessageKey:
        return OtherKey(text)


def _fields(rest: str, n: int) -> list[str]:
    """`rest` split at its first n - 1 colons (the last field keeps any colons)."""
    parts = rest.split(":", n - 1)
    if len(parts) != n or not all(parts[:-1]):
        raise ValueError(rest)
    return parts


def _count(text: str) -> int:
    if not text.isdigit():  # int() would take "+1", " 1" and "1_0"
        raise ValueError(text)
    return int(text)


def _anomaly(rest: str) -> AnomalyKey:
    task_id, at = _fields(rest, 2)
    step, _, detail = at.partition(":")
    return AnomalyKey(task_id, _count(step), detail)


def _reply(rest: str) -> ReplyKey:
    channel, said = _fields(rest, 2)
    event_id, at, reply_to = said.rpartition("@")
    if not at:
        raise ValueError(rest)
    return ReplyKey(channel, event_id, reply_to or None)


def _workflow(event: str) -> Callable[[str], KnownKey]:
    def parse(rest: str) -> KnownKey:
        return WorkflowNoticeKey(event, *_fields(rest, 2))

    return parse


def _in_doubt(rest: str) -> InDoubtKey:
    channel, of = _fields(rest, 2)
    return InDoubtKey(channel, read_message_key(of))


def _counted(make: Callable[[str, int], KnownKey]) -> Callable[[str], KnownKey]:
    """A key of an id and a count (an attempt, a turn, the how-many-th warning)."""

    def parse(rest: str) -> KnownKey:
        first, count = _fields(rest, 2)
        return make(first, _count(count))

    return parse


def _failed(rest: str) -> FailedKey:
    """`failed:TASK` (the first failure), `failed:TASK:N` (the one after N retries)."""
    task_id, colon, retry = rest.partition(":")
    return FailedKey(task_id, _count(retry)) if colon else FailedKey(task_id)


def _two(make: Callable[[str, str], KnownKey]) -> Callable[[str], KnownKey]:
    def parse(rest: str) -> KnownKey:
        return make(*_fields(rest, 2))

    return parse


_PARSERS: Final[dict[str, Callable[[str], KnownKey]]] = {
    "approval": _counted(ApprovalKey),
    "credential": _counted(CredentialKey),
    "result": ResultKey,
    "failed": _failed,
    "cancelled": CancelledKey,
    "hook": _two(HookKey),
    "anomaly": _anomaly,
    "loop-reply": _counted(LoopReplyKey),
    "worktree": WorktreeKey,
    "worktree-end": WorktreeEndKey,
    "redacted-input": RedactedInputKey,
    "skills-skipped": SkillsSkippedKey,
    "report": ReportKey,
    "fail-stop": FailStopKey,
    "backup-failed": _counted(BackupFailedKey),
    "disk-low": _counted(DiskLowKey),
    "provider-health": _counted(ProviderHealthKey),
    "mcp-server": _counted(McpServerKey),
    "channel-degraded": _two(ChannelDegradedKey),
    "in-doubt": _in_doubt,
    "reply": _reply,
}
