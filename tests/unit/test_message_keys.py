"""The keys of the messages to the owner: each kind's text is the text pfar has always
stored (a row's primary key, so a key written again meets it), and parsing that text
gives the key back."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pfar.errors import UnknownMessageKey
from pfar.journal.message_key_parse import parse_message_key, read_message_key
from pfar.journal.message_keys import (
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
    MessageKind,
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

T = "0b6f1c9e-2f0a-4d7e-9a51-6c3d2e1f0a9b"  # a task id as pfar makes them (uuid4)

# one literal per kind, as journals hold them: the text must never change
PINNED: list[tuple[KnownKey, str]] = [
    (ApprovalKey("a-1", 0), "approval:a-1:0"),
    (CredentialKey("p-1", 2), "credential:p-1:2"),
    (ResultKey(T), f"result:{T}"),
    (FailedKey(T), f"failed:{T}"),
    (FailedKey(T, 2), f"failed:{T}:2"),  # the failure after its second retry
    (CancelledKey(T), f"cancelled:{T}"),
    (HookKey(T, "before_tool:3"), f"hook:{T}:before_tool:3"),
    (AnomalyKey(T, 4), f"anomaly:{T}:4"),
    (AnomalyKey(T, 4, "burst"), f"anomaly:{T}:4:burst"),
    (LoopReplyKey(T, 7), f"loop-reply:{T}:7"),
    (WorktreeKey(T), f"worktree:{T}"),
    (WorktreeEndKey(T), f"worktree-end:{T}"),
    (RedactedInputKey(T), f"redacted-input:{T}"),
    (SkillsSkippedKey(T), f"skills-skipped:{T}"),
    (
        WorkflowNoticeKey("resume", T, "2025-01-02T03:04:05.678901Z"),
        f"workflow-resume:{T}:2025-01-02T03:04:05.678901Z",
    ),
    (ReportKey("boot-1"), "report:boot-1"),
    (FailStopKey("boot-1"), "fail-stop:boot-1"),
    (BackupFailedKey("boot-1", 3), "backup-failed:boot-1:3"),
    (DiskLowKey("boot-1", 1), "disk-low:boot-1:1"),
    (ProviderHealthKey("boot-1", 2), "provider-health:boot-1:2"),
    (McpServerKey("boot-1", 2), "mcp-server:boot-1:2"),
    (
        ChannelDegradedKey("telegram", "2025-01-02T03:04"),
        "channel-degraded:telegram:2025-01-02T03:04",
    ),
    (InDoubtKey("slack", ResultKey(T)), f"in-doubt:slack:result:{T}"),
    (InDoubtKey("slack", OtherKey("m0")), "in-doubt:slack:m0"),
    (ReplyKey("telegram", "telegram:812", "4411"), "reply:telegram:telegram:812@4411"),
    (ReplyKey("slack", "slack:1700000000.1"), "reply:slack:slack:1700000000.1@"),
]


@pytest.mark.parametrize(("key", "text"), PINNED, ids=[t for _, t in PINNED])
def test_each_kind_is_stored_as_it_always_was(key: KnownKey, text: str) -> None:
    assert key.text == text and str(key) == text
    assert parse_message_key(text) == key
    assert read_message_key(text) == key


def test_every_kind_is_pinned() -> None:
    assert {type(k) for k, _ in PINNED} == set(get_args(KnownKey))


@pytest.mark.parametrize(
    "text",
    [
        "m0",  # no kind at all
        "bogus:1",  # a kind pfar never wrote
        "approval:a-1",  # no attempt
        "approval:a-1:x",  # an attempt that is no number
        "approval:a-1:01",  # a number, but not as pfar writes it
        "approval::0",  # no id
        "anomaly:t:3:",  # an empty detail is written as none
        "reply:telegram:telegram:812",  # no "@"
        "disk-low:boot-1:-1",
    ],
)
def test_text_of_no_kind_is_refused_by_name_and_kept_when_read(text: str) -> None:
    with pytest.raises(UnknownMessageKey) as caught:
        parse_message_key(text)
    assert caught.value.key == text and repr(text) in str(caught.value)
    assert caught.value.code == "unknown_message_key"
    # a stored row with such a key is still delivered, its text as it is
    assert read_message_key(text) == OtherKey(text)
    assert read_message_key(text).text == text


_id = st.text(st.characters(blacklist_characters=":@", blacklist_categories=("Cs",)), min_size=1)
_any = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1)
_n = st.integers(min_value=0, max_value=10**6)

known_keys: st.SearchStrategy[KnownKey] = st.one_of(
    st.builds(ApprovalKey, _id, _n),
    st.builds(CredentialKey, _id, _n),
    st.builds(ResultKey, _any),
    st.builds(FailedKey, _any),
    st.builds(CancelledKey, _any),
    st.builds(HookKey, _id, _any),
    st.builds(AnomalyKey, _id, _n, st.just("") | _any),
    st.builds(LoopReplyKey, _id, _n),
    st.builds(WorktreeKey, _any),
    st.builds(WorktreeEndKey, _any),
    st.builds(RedactedInputKey, _any),
    st.builds(SkillsSkippedKey, _any),
    st.builds(WorkflowNoticeKey, _id, _id, _any),
    st.builds(ReportKey, _any),
    st.builds(FailStopKey, _any),
    st.builds(BackupFailedKey, _id, _n),
    st.builds(DiskLowKey, _id, _n),
    st.builds(ProviderHealthKey, _id, _n),
    st.builds(McpServerKey, _id, _n),
    st.builds(ChannelDegradedKey, _id, _any),
    st.builds(ReplyKey, _id, st.text(st.characters(blacklist_categories=("Cs",))), st.none() | _id),
)
message_keys: st.SearchStrategy[MessageKey] = st.recursive(
    known_keys, lambda inner: st.builds(InDoubtKey, _id, inner), max_leaves=3
)


@given(message_keys)
def test_a_key_parses_back_from_its_text(key: MessageKey) -> None:
    assert parse_message_key(key.text) == key


@given(_any)
def test_any_stored_text_reads_back_as_it_is(text: str) -> None:
    assert read_message_key(text).text == text


def test_the_message_kinds_are_the_stored_ones() -> None:
    assert sorted(k.value for k in MessageKind) == [
        "approval",
        "credential",
        "notice",
        "reply",
        "report",
        "result",
    ]
