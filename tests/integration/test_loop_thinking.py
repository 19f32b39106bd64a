"""Extended thinking on a tier (`[llm.tiers.worker] thinking = { budget_tokens = N }`),
against the Anthropic loopback server, which streams thinking blocks with signatures
bound to their text and refuses, as the real API does, a request whose thinking block
is missing or changed: the request asks for thinking (and sets no temperature), the
answer's thinking is journaled apart from its text and sent back unchanged in the next
request of the tool-use exchange, and the owner's message holds none of it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pfar import Home, Operator, init_home, open_kernel
from pfar.journal.turns import AssistantTurn
from pfar.kernel.api.conversation_records import ModelSaid
from pfar.runners.loop.tasks import LoopRequest
from pfar.vault import keys
from pfar.vault.secrets import SecretStore

from ..support import owner_messages
from .llm_servers import (
    ScriptedLLMServer,
    SSEReply,
    anthropic_request_problem,
    anthropic_stream,
    anthropic_text_block,
    anthropic_thinking_block,
    anthropic_tool_use_block,
    thinking_signature,
)

THOUGHT = ["Let me write ", "the file first."]
WRITE = {"file_path": "a.txt", "content": "hi"}


def thinking_home(tmp_path: Path, server: ScriptedLLMServer) -> Home:
    home = Home(tmp_path / "home")
    init_home(home, examples=False)
    home.config.write_text(
        f'[llm]\nprovider = "anthropic"\nmodel = "claude-test"\nbase_url = "{server.url}"\n'
        "[llm.tiers.worker]\nthinking = { budget_tokens = 2048 }\n"
        '[loop]\ntools = ["Write"]\nalways_allow = ["Write"]\n'
    )
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("anthropic_api_key", "sk-ant-test-key-4321")
    store.close()
    return home


def thinking_replies() -> tuple[SSEReply, SSEReply]:
    """An answer that thinks, says a word and calls Write; then the last answer."""
    return (
        SSEReply(
            anthropic_stream(
                anthropic_thinking_block(0, THOUGHT),
                anthropic_text_block(1, ["Writing it."]),
                anthropic_tool_use_block(2, "toolu_w", "Write", [json.dumps(WRITE)]),
                stop_reason="tool_use",
            )
        ),
        SSEReply(anthropic_stream(anthropic_text_block(0, ["Done: a.txt says hi."]))),
    )


def carried_back(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The thinking blocks the request's assistant message carries, in order."""
    assistant = next(m for m in body["messages"] if m["role"] == "assistant")
    return [b for b in assistant["content"] if b["type"] == "thinking"]


def test_a_thinking_tier_sends_its_thinking_back_unchanged_and_never_to_the_owner(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as server:
        home = thinking_home(tmp_path, server)
        server.script(*thinking_replies())

        async def run() -> tuple[str, list[AssistantTurn], str]:
            async with open_kernel(home) as kernel:
                task = await kernel.start_loop(LoopRequest("write a.txt", str(work), once=True))
                await kernel.wait_idle()
                op = Operator(kernel)
                turns = [
                    t.turn
                    for t in await kernel.journal.loops.turns(task.task_id)
                    if isinstance(t.turn, AssistantTurn)
                ]
                shown = " ".join(e.words for e in (await op.timeline(task.task_id)).entries)
                said = (await op.conversation(task.task_id)).turns
                answers = [t for t in said if isinstance(t, ModelSaid)]
                assert [a.thinking for a in answers] == ["".join(THOUGHT), ""]
                assert answers[0].text == "Writing it."
                return task.task_id, turns, shown

        task_id, turns, shown = asyncio.run(run())
        bodies = [r.body for r in server.requests]
    assert (work / "a.txt").read_text() == "hi"
    assert len(bodies) == 2
    for body in bodies:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert "temperature" not in body
    # the second request: the answer's thinking first, exactly as it came, then its call
    assistant = next(m for m in bodies[1]["messages"] if m["role"] == "assistant")
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use"]
    assert carried_back(bodies[1]) == [
        {
            "type": "thinking",
            "thinking": "".join(THOUGHT),
            "signature": thinking_signature("".join(THOUGHT)),
        }
    ]
    # journaled apart from the answer's text
    first = turns[0]
    assert first.text == "Writing it." and len(first.thinking) == 1
    assert first.thinking[0].thinking == "".join(THOUGHT)
    assert "[thinking: Let me write the file first.]" in shown  # shown as thinking
    (result,) = [m for m in owner_messages(home) if m["task_id"] == task_id]
    assert "Done: a.txt says hi." in result["body"]
    assert "Let me write" not in result["body"]


def test_the_loopback_server_refuses_thinking_that_is_missing_or_changed() -> None:
    """The server's own rules, so that the test above can fail: as the real API does."""
    sig = thinking_signature("a thought")
    call = {"type": "tool_use", "id": "t1", "name": "Write", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    thinking = {"type": "enabled", "budget_tokens": 2048}

    def body(*assistant: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "model": "claude-test",
            "max_tokens": 4096,
            "thinking": thinking,
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": list(assistant)},
                {"role": "user", "content": [result]},
            ],
            **extra,
        }

    kept = {"type": "thinking", "thinking": "a thought", "signature": sig}
    assert anthropic_request_problem(body(kept, call)) is None
    missing = anthropic_request_problem(body(call))
    assert missing is not None and "Expected `thinking` or `redacted_thinking`" in missing
    changed = {**kept, "thinking": "another thought"}
    assert "Invalid `signature`" in str(anthropic_request_problem(body(changed, call)))
    assert "temperature" in str(anthropic_request_problem(body(kept, call, temperature=0.2)))
    # another model's block: its signature is not one this model takes
    other = {**kept, "signature": thinking_signature("a thought", "claude-other")}
    assert "Invalid `signature`" in str(anthropic_request_problem(body(other, call)))


def test_thinking_that_holds_a_secret_is_kept_redacted_and_the_exchange_goes_on_without_it(
    tmp_path: Path,
) -> None:
    """The journal never holds a vault secret, thinking included: such a block is kept
    redacted, without the signature it no longer matches, so it cannot go back. The API
    would refuse thinking on with the exchange's last answer missing its block, and takes
    thinking off mid-exchange: so the next request goes without thinking, and the task
    finishes."""
    work = tmp_path / "work"
    work.mkdir()
    secret = "sk-ant-test-key-4321"  # the provider's own key, which the redactor knows
    with ScriptedLLMServer() as server:
        home = thinking_home(tmp_path, server)
        server.script(
            SSEReply(
                anthropic_stream(
                    anthropic_thinking_block(0, [f"the key is {secret}"]),
                    anthropic_tool_use_block(1, "toolu_w", "Write", [json.dumps(WRITE)]),
                    stop_reason="tool_use",
                )
            ),
            SSEReply(anthropic_stream(anthropic_text_block(0, ["Done: a.txt says hi."]))),
        )

        async def run() -> tuple[str, list[AssistantTurn]]:
            async with open_kernel(home) as kernel:
                task = await kernel.start_loop(LoopRequest("write a.txt", str(work), once=True))
                await kernel.wait_idle()
                done = await kernel.journal.tasks.get(task.task_id)
                turns = [
                    t.turn
                    for t in await kernel.journal.loops.turns(task.task_id)
                    if isinstance(t.turn, AssistantTurn)
                ]
                return done.state.value, turns

        state, turns = asyncio.run(run())
        bodies = [r.body for r in server.requests]
        problems = [anthropic_request_problem(b) for b in bodies]
    (kept,) = turns[0].thinking
    assert secret not in kept.thinking and kept.signature == ""
    assert len(bodies) == 2 and problems == [None, None]
    assert bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "thinking" not in bodies[1]  # off for the rest of the exchange
    assert carried_back(bodies[1]) == []  # not sent back: it no longer matches
    assert state == "Completed"
    assert (work / "a.txt").read_text() == "hi"
    assert turns[1].text == "Done: a.txt says hi."
