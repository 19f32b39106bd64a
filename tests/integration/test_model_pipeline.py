"""The pipeline thinking on real providers: a whole task through the kernel, with the
official SDK talking to a loopback server that speaks the provider's wire format."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pfar import Home, init_home
from pfar.errors import ConfigError
from pfar.kernel.kernel import Kernel
from pfar.vault import keys

from ..support import vault_db
from .llm_servers import (
    ScriptedLLMServer,
    SSEReply,
    anthropic_stream,
    anthropic_text_block,
    anthropic_tool_use_block,
)
from .openai_server import OpenAIServer, Stream, chunk, text_stream, tool_piece, usage_chunk

PLAN = {
    "steps": [
        {
            "tool": "file.write",
            "args": {"path": "note.md", "content": "milk"},
            "description": "save it",
        }
    ]
}
META = {"summary": "a shopping note", "entities": ["milk"]}


def _home(tmp_path: Path, llm: str) -> Home:
    home = Home(tmp_path / "home")
    init_home(home)  # the example templates: note (file.write, file.read)
    home.config.write_text(llm)
    return home


async def _run_note(home: Home) -> tuple[dict[str, Any], Kernel]:
    kernel = Kernel(home)
    await kernel.start()
    try:
        task = await kernel.submit("note", "remember to buy milk")
        await kernel.wait_idle()
        row = await kernel.journal.tasks.get(task.task_id)
        usage = await kernel.journal.tasks.llm_usage(task.task_id)
        result = {
            "state": row.state.value,
            "error": row.error,
            "plan": row.plan,
            "meta": row.extracted_metadata,
            "usage": usage,
            "result": (row.execute_progress or {}).get("result"),
            "payload": row.payload,
        }
        return result, kernel
    finally:
        await kernel.shutdown()


def _tool_stream(name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    text = json.dumps(args)
    half = len(text) // 2
    return [
        chunk(role="assistant", content=None),
        chunk(tool_calls=[tool_piece(0, id="call_1", name=name, arguments=text[:half])]),
        chunk(tool_calls=[tool_piece(0, arguments=text[half:])]),
        chunk(finish="tool_calls"),
        usage_chunk(100, 20),
    ]


def test_a_whole_task_on_an_openai_compatible_server(tmp_path: Path) -> None:
    server = OpenAIServer()
    try:
        server.script(
            Stream(_tool_stream("record_metadata", META)),
            Stream(_tool_stream("submit_plan", PLAN)),
            Stream(text_stream("Saved ", "your note.")),
        )
        home = _home(
            tmp_path,
            f"""
[llm]
provider = "openai"
model = "gpt-test"
base_url = "{server.base_url}"
[llm.prices.gpt-test]
input = 1.0
output = 2.0
""",
        )
        from pfar.vault.secrets import SecretStore

        store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
        store.set("openai_api_key", "sk-test-key-123456")
        store.close()
        result, _ = asyncio.run(_run_note(home))
    finally:
        server.close()
    assert result["state"] == "Completed", result["error"]
    assert result["meta"] == META
    assert result["plan"]["steps"][0]["tool"] == "file.write"
    assert result["result"] == "Saved your note."
    assert result["usage"]["calls"] == 3
    assert result["usage"]["cost_usd"] > 0
    assert (home.workspace(_only_task(home)) / "note.md").read_text() == "milk"
    # the key never reached the journal
    assert b"sk-test-key-123456" not in home.sessions_db.read_bytes()


def test_a_whole_task_on_the_anthropic_messages_api(tmp_path: Path) -> None:
    with ScriptedLLMServer() as server:
        server.script(
            SSEReply(
                anthropic_stream(
                    anthropic_tool_use_block(0, "toolu_1", "record_metadata", [json.dumps(META)]),
                    stop_reason="tool_use",
                )
            ),
            SSEReply(
                anthropic_stream(
                    anthropic_tool_use_block(
                        0, "toolu_2", "submit_plan", [json.dumps(PLAN)[:20], json.dumps(PLAN)[20:]]
                    ),
                    stop_reason="tool_use",
                )
            ),
            SSEReply(anthropic_stream(anthropic_text_block(0, ["Saved ", "your note."]))),
        )
        home = _home(
            tmp_path,
            f"""
[llm]
provider = "anthropic"
model = "claude-test"
base_url = "{server.url}"
""",
        )
        from pfar.vault.secrets import SecretStore

        store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
        store.set("anthropic_api_key", "sk-ant-test-key-9876")
        store.close()
        result, _ = asyncio.run(_run_note(home))
        bodies = [r.body for r in server.requests]
    assert result["state"] == "Completed", result["error"]
    assert result["plan"]["steps"][0]["args"]["path"] == "note.md"
    assert result["result"] == "Saved your note."
    assert [b["tool_choice"]["name"] for b in bodies[:2]] == ["record_metadata", "submit_plan"]
    assert "file.write" in bodies[1]["system"]  # the plan prompt lists the allowed tools
    assert result["usage"]["calls"] == 3


def test_an_invalid_plan_gets_one_correction_then_a_clear_failure(tmp_path: Path) -> None:
    server = OpenAIServer()
    bad = {"steps": [{"tool": "shell.run", "args": {}}]}  # not an allowed tool
    try:
        server.script(
            Stream(_tool_stream("record_metadata", META)),
            Stream(_tool_stream("submit_plan", bad)),
            Stream(_tool_stream("submit_plan", bad)),
        )
        home = _home(
            tmp_path,
            f"""
[llm]
provider = "openai"
model = "gpt-test"
base_url = "{server.base_url}"
""",
        )
        from pfar.vault.secrets import SecretStore

        store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
        store.set("openai_api_key", "sk-test")
        store.close()
        result, _ = asyncio.run(_run_note(home))
    finally:
        server.close()
    assert result["state"] == "Failed"
    assert "no valid plan after a correction" in result["error"]


def test_a_missing_api_key_says_which_secret_to_set(tmp_path: Path) -> None:
    home = _home(
        tmp_path,
        """
[llm]
provider = "anthropic"
model = "claude-test"
""",
    )
    with pytest.raises(ConfigError, match="pfar secret set anthropic_api_key"):
        asyncio.run(Kernel(home).start())
    # nothing was left locked: a corrected start works
    home.config.write_text("")
    kernel = Kernel(home)
    asyncio.run(_start_stop(kernel))


def test_an_unknown_provider_is_named(tmp_path: Path) -> None:
    home = _home(tmp_path, '[llm]\nprovider = "gemini"\n')
    with pytest.raises(ConfigError, match=r"llm\.provider"):
        asyncio.run(Kernel(home).start())


async def _start_stop(kernel: Kernel) -> None:
    await kernel.start()
    await kernel.shutdown()


def _only_task(home: Home) -> str:

    conn = vault_db(home)
    try:
        return str(conn.execute("SELECT task_id FROM task_journal").fetchone()[0])
    finally:
        conn.close()


def _openai_home(tmp_path: Path, server_url: str, extra: str = "", template: str = "") -> Home:
    home = _home(
        tmp_path,
        f"""
[llm]
provider = "openai"
model = "gpt-test"
base_url = "{server_url}"
[llm.retry]
backoff_seconds = [0.0, 0.01, 0.02]
overloaded_wait_seconds = 0.01
{extra}
""",
    )
    if template:
        (home.templates_dir / "note.toml").write_text(template)
    from pfar.vault.secrets import SecretStore

    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("openai_api_key", "sk-test")
    store.close()
    return home


SECRET_NOTE = """
id = "note"
description = "Save a private note"
allowed_tools = ["file.write", "file.read"]
data_ceiling = "secret"
"""


def test_secret_data_goes_to_the_local_model_not_the_cloud(tmp_path: Path) -> None:
    cloud, local = OpenAIServer(), OpenAIServer()
    try:
        local.script(
            Stream(_tool_stream("record_metadata", META)),
            Stream(_tool_stream("submit_plan", PLAN)),
            Stream(text_stream("Saved locally.")),
        )
        home = _openai_home(
            tmp_path,
            cloud.base_url,
            extra=f'[llm.local]\nmodel = "llama-local"\nbase_url = "{local.base_url}"\n',
            template=SECRET_NOTE,
        )
        result, _ = asyncio.run(_run_note(home))
    finally:
        cloud.close()
        local.close()
    assert result["state"] == "Completed", result["error"]
    assert cloud.received == []
    assert [r.body["model"] for r in local.received] == ["llama-local"] * 3


def test_secret_data_without_a_local_model_waits_for_the_owners_approval(tmp_path: Path) -> None:
    cloud = OpenAIServer()
    try:
        cloud.script(
            Stream(_tool_stream("record_metadata", META)),
            Stream(_tool_stream("submit_plan", PLAN)),
            Stream(text_stream("Saved.")),
        )
        home = _openai_home(tmp_path, cloud.base_url, template=SECRET_NOTE)

        async def main() -> tuple[str, str, int]:
            kernel = Kernel(home)
            await kernel.start()
            try:
                task = await kernel.submit("note", "my bank pin is not here")
                await kernel.wait_idle()
                parked = (await kernel.journal.tasks.get(task.task_id)).state.value
                (approval,) = await kernel.journal.questions.approvals_for_task(task.task_id)
                assert approval.action_type == "cloud_routing"
                sent_before = len(cloud.received)
                await kernel.answer(approval.approval_id, "approve")
                await kernel.wait_idle()
                return (
                    parked,
                    (await kernel.journal.tasks.get(task.task_id)).state.value,
                    sent_before,
                )
            finally:
                await kernel.shutdown()

        parked, final, sent_before = asyncio.run(main())
    finally:
        cloud.close()
    assert parked == "AwaitingApproval"
    assert sent_before == 0  # nothing left for the cloud before the owner said yes
    assert final == "Completed"
    assert len(cloud.received) == 3


def test_a_plan_still_invalid_after_its_correction_escalates_to_the_planner_tier(
    tmp_path: Path,
) -> None:
    server = OpenAIServer()
    bad = {"steps": [{"tool": "shell.run", "args": {}}]}
    try:
        server.script(
            Stream(_tool_stream("record_metadata", META)),
            Stream(_tool_stream("submit_plan", bad)),
            Stream(_tool_stream("submit_plan", bad)),
            Stream(_tool_stream("submit_plan", PLAN)),
            Stream(text_stream("Saved.")),
        )
        home = _openai_home(
            tmp_path, server.base_url, extra='[llm.tiers]\ncheap = "m-cheap"\nplanner = "m-big"\n'
        )
        result, _ = asyncio.run(_run_note(home))
    finally:
        server.close()
    assert result["state"] == "Completed", result["error"]
    assert [r.body["model"] for r in server.received] == [
        "m-cheap",
        "gpt-test",
        "gpt-test",
        "m-big",
        "gpt-test",
    ]


def test_a_base_url_that_does_not_answer_fails_the_task_clearly(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = _openai_home(tmp_path, f"http://127.0.0.1:{port}/v1")
    result, _ = asyncio.run(_run_note(home))
    assert result["state"] == "Failed"
    assert "timeout after 4 attempts" in result["error"]
    assert "sk-test" not in result["error"]


def test_an_unknown_model_tier_is_named(tmp_path: Path) -> None:
    home = _home(tmp_path, '[llm.tiers]\nfast = "m"\n')
    with pytest.raises(ConfigError, match=r"llm\.tiers\.fast: unknown key"):
        asyncio.run(Kernel(home).start())


def test_the_shared_rate_limit_holds_across_20_concurrent_tasks(tmp_path: Path) -> None:
    """Every model call of every task passes one limiter: in any window, at most the
    configured number of calls were let go (from the grant times the journal keeps)."""
    window, rpm = 0.3, 5
    home = _home(
        tmp_path,
        f"""
[llm]
provider = "scripted"
requests_per_minute = {rpm}
rate_window_seconds = {window}
""",
    )

    async def main() -> list[float]:
        kernel = Kernel(home)
        await kernel.start()
        try:
            tasks = await asyncio.gather(*(kernel.submit("note", f"note {i}") for i in range(20)))
            await kernel.wait_idle()
            states = {(await kernel.journal.tasks.get(t.task_id)).state.value for t in tasks}
            assert states == {"Completed"}
        finally:
            await kernel.shutdown()

        conn = vault_db(home)
        try:
            return [r[0] for r in conn.execute("SELECT granted_at FROM llm_calls")]
        finally:
            conn.close()

    granted = sorted(asyncio.run(main()))
    assert len(granted) == 60  # extract, plan, synthesize for each of 20 tasks
    for i, t in enumerate(granted):
        assert sum(1 for u in granted[i:] if u - t < window * 0.98) <= rpm
