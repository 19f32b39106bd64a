"""A tool-use exchange whose thinking the next request cannot send back as the API
wants it, against the Anthropic loopback server (which signs each thinking block for
its text and the model that wrote it, and refuses, as the real API does, thinking on
when the exchange's last answer does not start with a block the model asked can take):
a tier escalated mid-exchange and a fallback provider are asked without thinking and
without another model's blocks, and the task goes on instead of failing on a 400."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pfar import Home, init_home, open_kernel
from pfar.runners.loop.tasks import LoopRequest
from pfar.vault import keys
from pfar.vault.secrets import SecretStore

from .llm_servers import (
    ScriptedLLMServer,
    SSEReply,
    anthropic_request_problem,
    anthropic_stream,
    anthropic_text_block,
    anthropic_thinking_block,
    anthropic_tool_use_block,
    failing,
)

THINKS = "thinking = { budget_tokens = 2048 }\n"


def _home(tmp_path: Path, config: str, loop: str = "") -> Home:
    home = Home(tmp_path / "home")
    init_home(home, examples=False)
    home.config.write_text(config + f'[loop]\ntools = ["Read"]\nalways_allow = ["Read"]\n{loop}')
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("anthropic_api_key", "sk-ant-test-key-4321")
    store.set("claude_key", "sk-ant-fallback-5678")
    store.close()
    return home


def _thinks_and_reads(model: str) -> SSEReply:
    """An answer of `model` that thinks and reads a file that is not there (a failed call)."""
    return SSEReply(
        anthropic_stream(
            anthropic_thinking_block(0, ["Read it first."], model=model),
            anthropic_tool_use_block(1, "toolu_r", "Read", [json.dumps({"file_path": "no.txt"})]),
            stop_reason="tool_use",
            model=model,
        )
    )


def _done(model: str) -> SSEReply:
    return SSEReply(anthropic_stream(anthropic_text_block(0, ["It is not there."]), model=model))


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        b
        for m in body["messages"]
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] in ("thinking", "redacted_thinking")
    ]


def _run(home: Home, work: Path) -> tuple[str, str | None]:
    async def run() -> tuple[str, str | None]:
        async with open_kernel(home) as kernel:
            task = await kernel.start_loop(LoopRequest("read no.txt", str(work), once=True))
            await kernel.wait_idle()
            done = await kernel.journal.tasks.get(task.task_id)
            return done.state.value, done.error

    return asyncio.run(run())


def test_a_tier_escalated_mid_exchange_is_asked_without_thinking(tmp_path: Path) -> None:
    """The worker's call failed, so the next request goes to the planner's model, which
    cannot take the worker's thinking: it is asked without thinking (though its tier
    thinks), and the exchange goes on."""
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as server:
        home = _home(
            tmp_path,
            f'[llm]\nprovider = "anthropic"\nmodel = "claude-test"\nbase_url = "{server.url}"\n'
            f"[llm.tiers.worker]\n{THINKS}"
            f'[llm.tiers.planner]\nmodel = "claude-big"\n{THINKS}',
            loop="escalate_after_failures = 1\n",
        )
        server.script(_thinks_and_reads("claude-test"), _done("claude-big"))
        state, error = _run(home, work)
        bodies = [r.body for r in server.requests]
    assert [b["model"] for b in bodies] == ["claude-test", "claude-big"]
    assert [anthropic_request_problem(b) for b in bodies] == [None, None]
    assert bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "thinking" not in bodies[1] and _blocks(bodies[1]) == []
    assert state == "Completed", error


def test_a_fallback_provider_is_asked_without_the_primarys_thinking(tmp_path: Path) -> None:
    """Mid-exchange the primary goes down; the fallback (another Anthropic provider, whose
    model cannot take the primary's blocks) gets the call without thinking and without
    the blocks, and answers; the task finishes instead of failing on its 400."""
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as primary, ScriptedLLMServer() as fallback:
        primary.script(_thinks_and_reads("claude-test"), *failing(2, 500, "internal error"))
        fallback.script(_done("claude-other"))
        home = _home(
            tmp_path,
            f'[llm]\nprovider = "anthropic"\nmodel = "claude-test"\nbase_url = "{primary.url}"\n'
            "[llm.retry]\nbackoff_seconds = [0]\nmax_retries = 1\noverloaded_wait_seconds = 0\n"
            "[llm.breaker]\nfailures = 1\nopen_seconds = 30\nwait_seconds = 5\n"
            f'[llm.tiers.worker]\nfallback = ["claude:claude-other"]\n{THINKS}'
            f'[llm.providers.claude]\ntype = "anthropic"\nbase_url = "{fallback.url}"\n'
            'api_key_secret = "claude_key"\n',
        )
        state, error = _run(home, work)
        sent = [r.body for r in primary.requests]
        asked = [r.body for r in fallback.requests]
    assert sent[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert len(asked) == 1 and asked[0]["model"] == "claude-other"
    assert anthropic_request_problem(asked[0]) is None
    assert "thinking" not in asked[0] and _blocks(asked[0]) == []
    assert state == "Completed", error
