"""The conversation a loop's journal makes for the model, around calls that could not
be used: kept as the model made them and answered by their errors in the next user
message (whatever turn comes next), or, for turns journaled before calls were kept,
told in words as before."""

from __future__ import annotations

import json

from pfar.journal.turns import StoredTurn, dump, load_turn
from pfar.kernel.api.timeline import said
from pfar.llm.messages import ToolCall, ToolResult
from pfar.runners.loop.context import messages, transcript

REJECTED = {
    "id": "toolu_x",
    "name": "NoSuchTool",
    "input": {"a": 1},
    "error": "unknown tool 'NoSuchTool' (available tools: Read, Write)",
}


def _stored(*bodies: dict[str, object]) -> list[StoredTurn]:
    """Turns as read back from the journal: each through its JSON."""
    out = []
    for seq, body in enumerate(bodies, start=1):
        turn = load_turn("t1", seq, json.dumps(body))
        assert load_turn("t1", seq, dump(turn)) == turn  # as journaled, so replayed
        out.append(StoredTurn(seq, "2026-01-01T00:00:00Z", turn))
    return out


def test_a_rejected_call_is_sent_back_and_answered_by_its_error() -> None:
    turns = _stored(
        {"kind": "user", "text": "go", "source": "prompt"},
        {"kind": "assistant", "rejected": [REJECTED], "stop_reason": "tool_use"},
        {"kind": "user", "text": "None of your tool calls could be used.", "source": "continue"},
    )
    _, answer, after = messages(turns)
    assert answer.role == "assistant" and answer.text == ""
    assert answer.tool_calls == (ToolCall("toolu_x", "NoSuchTool", {"a": 1}),)
    assert after.tool_results == (ToolResult("toolu_x", REJECTED["error"], is_error=True),)
    assert after.text == "None of your tool calls could be used."
    assert "RESULT (error): NoSuchTool({'a': 1}): unknown tool" in transcript(turns)
    # what the owner sees of that answer (`pfar attach`): the errors, since nothing ran
    assert said(turns[1].turn) == f"model: (no text) [could not be used: {REJECTED['error']}]"


def test_next_to_a_call_that_ran_both_are_answered_in_one_message() -> None:
    call = {"id": "toolu_r", "name": "Read", "input": {"file_path": "a"}, "step": 0}
    result = {"call_id": "toolu_r", "step": 0, "content": "hi"}
    turns = _stored(
        {"kind": "user", "text": "go", "source": "prompt"},
        {"kind": "assistant", "calls": [call], "rejected": [REJECTED]},
        {"kind": "results", "results": [result]},
        {"kind": "user", "text": "and now?"},
    )
    _, answer, after = messages(turns)
    assert [c.id for c in answer.tool_calls] == ["toolu_r", "toolu_x"]
    assert [(r.tool_call_id, r.is_error) for r in after.tool_results] == [
        ("toolu_x", True),
        ("toolu_r", False),
    ]
    assert after.text == "and now?"


def test_a_turn_journaled_before_calls_were_kept_is_told_in_words() -> None:
    turns = _stored(
        {"kind": "user", "text": "go", "source": "prompt"},
        {"kind": "assistant", "unusable": ["toolu_x: unknown tool 'Nope'"]},
        {"kind": "user", "text": "Some of your tool calls could not be used", "source": "continue"},
    )
    _, answer, after = messages(turns)
    assert answer.tool_calls == () and answer.text == "(tool calls that could not be used: toolu_x)"
    assert after.tool_results == ()
