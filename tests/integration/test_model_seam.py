"""What a new user meets on a real model: plans a tool refuses, an overloaded API under the
shipped timeouts, a wrong API key fixed on a running kernel. The kernel is real, the
official SDK is the client, and a loopback server speaks the Messages API."""

from __future__ import annotations

import asyncio
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from pfar import Home, init_home
from pfar.kernel.kernel import Kernel
from pfar.vault import keys
from pfar.vault.secrets import SecretStore

from ..support import KernelProcess, db, pfar, said, wait_for
from .llm_servers import (
    ScriptedLLMServer,
    SSEReply,
    anthropic_error_reply,
    anthropic_stream,
    anthropic_text_block,
    anthropic_tool_use_block,
)

META = {"summary": "a shopping note", "entities": ["milk"]}
GOOD = {"steps": [{"tool": "file.write", "args": {"path": "note.md", "content": "milk"}}]}
# what a model wrote when the plan request named only each tool's description
MISNAMED = {"steps": [{"tool": "file.write", "args": {"path": "note.md", "text": "milk"}}]}


def tool_call(name: str, data: dict[str, Any], n: int = 1) -> SSEReply:
    return SSEReply(
        anthropic_stream(
            anthropic_tool_use_block(0, f"toolu_{n}", name, [json.dumps(data)]),
            stop_reason="tool_use",
        )
    )


def answer(text: str = "Saved your note.") -> SSEReply:
    return SSEReply(anthropic_stream(anthropic_text_block(0, [text])))


def anthropic_home(tmp_path: Path, url: str, key: str, extra: str = "") -> Home:
    home = Home(tmp_path / "home")
    init_home(home)  # the example templates, as shipped
    home.config.write_text(
        f'[llm]\nprovider = "anthropic"\nmodel = "claude-test"\nbase_url = "{url}"\n{extra}'
    )
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    try:
        store.set("anthropic_api_key", key)
    finally:
        store.close()
    return home


async def run_note(home: Home, text: str = "remember to buy milk") -> dict[str, Any]:
    kernel = Kernel(home)
    await kernel.start()
    try:
        task = await kernel.submit("note", text)
        await kernel.wait_idle()
        row = await kernel.journal.tasks.get(task.task_id)
        return {"state": row.state.value, "error": row.error, "plan": row.plan}
    finally:
        await kernel.shutdown()


# -- a plan whose step a tool refuses ----------------------------------------------------


def test_a_misnamed_argument_gets_one_correction_quoting_the_tool(tmp_path: Path) -> None:
    with ScriptedLLMServer() as server:
        server.script(
            tool_call("record_metadata", META),
            tool_call("submit_plan", MISNAMED, 2),
            tool_call("submit_plan", GOOD, 3),
            answer(),
        )
        home = anthropic_home(tmp_path, server.url, "sk-ant-test-key-1")
        result = asyncio.run(run_note(home))
        bodies = [r.body for r in server.requests]
    assert result["state"] == "Completed", result["error"]
    assert result["plan"]["steps"][0]["args"] == {"path": "note.md", "content": "milk"}
    # the planner was shown each allowed tool's arguments, not only its description
    system = bodies[1]["system"]
    assert '"required":["path","content"]' in system and "file.read" in system
    # the correction answers the refused call with the tool's own complaint
    correction = json.dumps(bodies[2]["messages"])
    assert "step 1 (file.write)" in correction
    assert "unexpected property 'text'" in correction
    assert "missing the required property 'content'" in correction
    assert len(bodies) == 4


def test_a_plan_still_refused_after_its_correction_fails_naming_step_and_argument(
    tmp_path: Path,
) -> None:
    with ScriptedLLMServer() as server:
        server.script(
            tool_call("record_metadata", META),
            tool_call("submit_plan", MISNAMED, 2),
            tool_call("submit_plan", MISNAMED, 3),
        )
        home = anthropic_home(tmp_path, server.url, "sk-ant-test-key-1")
        result = asyncio.run(run_note(home))
        assert len(server.requests) == 3  # no third plan without a planner tier
    assert result["state"] == "Failed"
    assert "no valid plan after a correction" in result["error"]
    assert "step 1 (file.write)" in result["error"]
    assert "'content'" in result["error"] and "'text'" in result["error"]
    assert result["plan"] is None  # nothing ran


# -- an overloaded API under the template's model timeout --------------------------------


def test_one_overloaded_answer_fits_in_the_shipped_templates_timeout(tmp_path: Path) -> None:
    """The defect, scaled down: the overload wait was as long as the shipped template's
    model timeout, which bounded all retries, so one 529 failed a `note` task. The
    template's timeout now bounds each attempt; the wait comes on top. Here the wait is
    even longer than the (scaled) timeout and the task still completes."""
    shipped = (
        resources.files("pfar.kernel")
        .joinpath("assets", "templates", "note.toml")
        .read_text(encoding="utf-8")
    )
    seconds = 1.0
    template, n = re.subn(r"(?m)^llm_seconds = \S+", f"llm_seconds = {seconds}", shipped)
    assert n == 1
    with ScriptedLLMServer() as server:
        server.script(
            anthropic_error_reply(529, "Overloaded"),
            tool_call("record_metadata", META),
            tool_call("submit_plan", GOOD, 2),
            answer(),
        )
        home = anthropic_home(
            tmp_path,
            server.url,
            "sk-ant-test-key-1",
            f"[llm.retry]\noverloaded_wait_seconds = {seconds * 1.5}\n",
        )
        (home.templates_dir / "note.toml").write_text(template)
        result = asyncio.run(run_note(home))
        assert len(server.requests) == 4
    assert result["state"] == "Completed", result["error"]


# -- a wrong API key, fixed on a running kernel ------------------------------------------


def task_row(home: Home, task_id: str) -> Any:
    with db(home) as conn:
        return conn.execute(
            "SELECT state, error FROM task_journal WHERE task_id = ?", (task_id,)
        ).fetchone()


def finished(home: Home, task_id: str) -> Any:
    row = task_row(home, task_id)
    return row if row is not None and row["state"] in ("Completed", "Failed") else None


def test_a_refused_key_names_its_secret_and_a_new_key_works_without_a_restart(
    tmp_path: Path,
) -> None:
    wrong, right = "sk-ant-wrong-key-0000", "sk-ant-right-key-9999"
    with ScriptedLLMServer(api_key=right) as server:
        home = anthropic_home(tmp_path, server.url, wrong)
        k = KernelProcess(home)
        try:
            k.wait_ready()
            first = k.request("submit", template="note", text="buy milk")["task_id"]
            row = wait_for(lambda: finished(home, first), what="the first task to end")
            assert row["state"] == "Failed"
            assert len(server.requests) == 1  # a 401 is not retried
            assert "unauthorized" in row["error"]
            assert "secret 'anthropic_api_key'" in row["error"]
            assert "pfar secret set anthropic_api_key" in row["error"]
            assert wrong not in row["error"]

            done = pfar(home, "secret", "set", "anthropic_api_key", stdin=right + "\n")
            assert done.returncode == 0, said(done)
            server.script(
                tool_call("record_metadata", META),
                tool_call("submit_plan", GOOD, 2),
                answer(),
            )
            second = k.request("submit", template="note", text="buy bread")["task_id"]
            row = wait_for(lambda: finished(home, second), what="the second task to end")
            assert row["state"] == "Completed", row["error"]
            assert k.proc.poll() is None  # the same kernel: no restart
        finally:
            if k.proc.poll() is None:
                k.terminate()
    assert len(server.requests) == 4
    for secret in (wrong, right):
        assert secret not in k.output()
        assert secret.encode() not in home.sessions_db.read_bytes()
