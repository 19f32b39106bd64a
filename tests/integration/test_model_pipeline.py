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
        row = kernel.journal.task(task.task_id)
        usage = kernel.journal.llm_usage(task.task_id)
        result = {
            "state": row.state.value,
            "error": row.error,
            "plan": row.plan,
            "meta": row.extracted_metadata,
            "usage": usage,
            "result": (row.execute_progress or {}).get("result"),
            "detail": row.detail,
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

        store = SecretStore.open(home.secrets_db)
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

        store = SecretStore.open(home.secrets_db)
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

        store = SecretStore.open(home.secrets_db)
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
    import sqlite3

    conn = sqlite3.connect(home.sessions_db)
    try:
        return str(conn.execute("SELECT task_id FROM task_journal").fetchone()[0])
    finally:
        conn.close()
