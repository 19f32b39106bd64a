"""A kernel killed while a model call is in flight: the "request sent" marker is in the
journal, and recovery makes that call again, once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pfar.journal.payloads import Planning
from pfar.vault import keys
from pfar.vault.home import Home
from pfar.vault.secrets import SecretStore

from ..integration.openai_server import (
    OpenAIServer,
    Stream,
    chunk,
    text_stream,
    tool_piece,
    usage_chunk,
)
from ..support import KernelProcess, make_home, read_journal, running_kernel, wait_for

pytestmark = pytest.mark.crash


def _tool_stream(name: str, args: dict) -> list[dict]:
    return [
        chunk(role="assistant"),
        chunk(tool_calls=[tool_piece(0, id="call_1", name=name, arguments=json.dumps(args))]),
        chunk(finish="tool_calls"),
        usage_chunk(50, 10),
    ]


def test_a_crash_between_request_sent_and_the_answer_retries_that_call_once(
    tmp_path: Path,
) -> None:
    server = OpenAIServer()
    plan = {"steps": [{"tool": "file.write", "args": {"path": "n.md", "content": "x"}}]}
    server.script(
        Stream(_tool_stream("record_metadata", {"summary": "note"})),
        Stream(_tool_stream("submit_plan", plan), stall=30),  # the kernel dies meanwhile
        Stream(_tool_stream("submit_plan", plan)),
        Stream(text_stream("Saved.")),
    )
    try:
        home = make_home(
            tmp_path / "home",
            templates={"note": 'id = "note"\nallowed_tools = ["file.write"]\n'},
            config=f"""
                [llm]
                provider = "openai"
                model = "gpt-test"
                base_url = "{server.base_url}"
            """,
        )
        store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
        store.set("openai_api_key", "sk-local")
        store.close()
        k = KernelProcess(home)
        k.wait_ready()
        task_id = k.request("submit", template="note", text="note this")["task_id"]
        wait_for(lambda: len(server.received) == 2, what="the plan request to be in flight")
        k.kill()
        planning = read_journal(home, lambda s: s.tasks.payload(task_id))
        assert isinstance(planning, Planning) and planning.llm_request is not None
        assert planning.llm_request.phase == "plan"

        with running_kernel(home):
            wait_for(
                lambda: _state(home, task_id) in ("Completed", "Failed"),
                what="the task to finish",
            )
            assert _state(home, task_id) == "Completed"
        phases = [
            r.body["tool_choice"]["function"]["name"] if r.body.get("tool_choice") else "text"
            for r in server.received
        ]
        assert phases == ["record_metadata", "submit_plan", "submit_plan", "text"]
    finally:
        server.close()


def _state(home: Home, task_id: str) -> str:
    return read_journal(home, lambda s: s.tasks.get(task_id)).state.value
