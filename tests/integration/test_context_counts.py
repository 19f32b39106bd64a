"""The loop's context budget with real token counts, through the real kernel: near the
budget, an Anthropic model's request is counted by the API (POST
/v1/messages/count_tokens, with what the request itself sends) and the count decides;
far from it, no count is asked for (no HTTP call a turn). The decision is journaled
with the answer's turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pfar import Home, init_home
from pfar.kernel.kernel import Kernel
from pfar.runners.loop.tasks import LoopRequest
from pfar.vault import keys
from pfar.vault.secrets import SecretStore

from .llm_servers import ScriptedLLMServer, SSEReply, anthropic_stream, anthropic_text_block
from .test_loop_providers import LOOP, _turns

COUNT_PATH = "/v1/messages/count_tokens"


def _home(tmp_path: Path, url: str, context_tokens: int) -> Home:
    home = Home(tmp_path / "home")
    init_home(home, examples=False)
    home.config.write_text(
        f'[llm]\nprovider = "anthropic"\nmodel = "claude-test"\nbase_url = "{url}"\n'
        + LOOP
        + f"context_tokens = {context_tokens}\nreserve_tokens = 1000\n"
    )
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("anthropic_api_key", "sk-ant-count-1")
    store.close()
    return home


def _run(home: Home, work: Path, prompt: str) -> str:
    async def go() -> str:
        kernel = Kernel(home)
        await kernel.start()
        try:
            task = await kernel.start_loop(LoopRequest(prompt, str(work)))
            await kernel.wait_idle()
            return task.task_id
        finally:
            await kernel.shutdown()

    return asyncio.run(go())


def _fit(home: Home, task_id: str) -> dict[str, Any]:
    (answer,) = [t for t in _turns(home, task_id) if t["kind"] == "assistant"]
    return dict(answer["fit"])


def test_near_the_budget_the_api_counts_the_request_it_will_send(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    # about 2,500 tokens at four characters a token: over the budget of 2,000 by the
    # estimate, but the API's count (1,700) says it fits, so nothing is cut
    prompt = "Read this and say ok. " + "word " * 2000
    with ScriptedLLMServer(api_key="sk-ant-count-1") as server:  # the key is checked
        server.count_tokens = lambda body: 1700
        server.script(SSEReply(anthropic_stream(anthropic_text_block(0, ["ok"]))))
        home = _home(tmp_path, server.url, context_tokens=3000)
        task_id = _run(home, work, prompt)
        requests = list(server.requests)
    counted = [r for r in requests if r.path == COUNT_PATH]
    sent = [r for r in requests if r.path == "/v1/messages"]
    assert len(counted) == 1 and len(sent) == 1
    count, call = counted[0].body, sent[0].body
    for field in ("model", "system", "messages", "tools"):
        assert count[field] == call[field], field
    assert "max_tokens" not in count and "stream" not in count
    assert _fit(home, task_id) == {
        "tokens": 1700,
        "method": "anthropic",
        "budget": 2000,
        "cut": False,
        "summarized_upto": None,
    }
    assert "word word" in json.dumps(call["messages"])  # sent whole


def test_far_from_the_budget_no_count_is_asked_for(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLMServer() as server:
        server.script(SSEReply(anthropic_stream(anthropic_text_block(0, ["ok"]))))
        home = _home(tmp_path, server.url, context_tokens=180_000)
        task_id = _run(home, work, "say ok")
        paths = [r.path for r in server.requests]
    assert paths == ["/v1/messages"]
    fit = _fit(home, task_id)
    assert fit["method"] == "estimate" and fit["budget"] == 179_000
    assert 0 < fit["tokens"] < 179_000 // 2
