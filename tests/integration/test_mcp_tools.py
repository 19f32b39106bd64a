"""Tools from MCP servers in a real loop task, through a real kernel: servers pfar did
not write (`mcp-server-time`, `mcp-server-git` from PyPI) and the tests' own, each a
real process spoken to over stdio. The model is shown each tool's schema under its pfar
name; its calls go through the same layers as a built-in tool's (the permission prompt,
the hooks); a server that fails is named to the owner and the others keep working; a
server killed under a call gives the call an error, comes back, and serves the next."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from pfar.config.mcp import McpConfig
from pfar.errors import ToolFailed
from pfar.journal import TaskState
from pfar.journal.turns import ResultsTurn
from pfar.kernel import open_kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply
from pfar.tools.mcp.servers import McpServers
from pfar.tools.registry import ToolRegistry
from pfar.vault import keys
from pfar.vault.secrets import SecretStore

from .. import hook_handlers
from ..mcp_support import (
    need_module,
    requests,
    server_command,
    server_everything,
    server_toml,
    starts,
)
from ..support import make_home, wait_for

Turns = list[list[ToolCall]]


def _model(script: Turns, seen: list[ChatRequest]) -> ScriptedChatModel:
    def model(request: ChatRequest) -> ChatResponse:
        seen.append(request)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn < len(script):
            return reply(request, "", script[turn])
        return reply(request, "Done.")

    return ScriptedChatModel(model)


def _run(
    tmp_path: Path,
    config: str,
    script: Turns,
    body: Callable[[Operator, str, list[ChatRequest]], Awaitable[None]],
    secrets: dict[str, str] | None = None,
) -> None:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    home = make_home(tmp_path / "home", config='[loop]\ntools = ["Read"]\n' + config)
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    for name, value in (secrets or {}).items():
        store.set(name, value)
    store.close()
    seen: list[ChatRequest] = []

    async def go() -> None:
        async with open_kernel(home, model=_model(script, seen)) as kernel:
            op = Operator(kernel)
            started = await op.start_loop("use the servers", str(work))
            await op.wait_idle()
            await body(op, started.task_id, seen)

    asyncio.run(go())


async def _results(op: Operator, task_id: str) -> dict[str, tuple[str, bool]]:
    turns = [t.turn for t in await op.journal.loops.turns(task_id)]
    return {
        r.call_id: (r.content, r.is_error)
        for t in turns
        if isinstance(t, ResultsTurn)
        for r in t.results
    }


def test_a_loop_calls_the_time_server_and_the_tests_server_with_the_hooks_around(
    tmp_path: Path,
) -> None:
    need_module("mcp_server_time")
    log = tmp_path / "requests.jsonl"
    time_server = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
    config = (
        server_toml("time", time_server, "[mcp.servers.tools.get_current_time]\nask = false\n")
        + server_toml("t", server_command(log), "[mcp.servers.tools.put]\nask = false\n")
        + '[[hooks]]\npoint = "PreToolUse"\npython = "tests.hook_handlers:record"\n'
        + '[[hooks]]\npoint = "PostToolUse"\npython = "tests.hook_handlers:record"\n'
    )
    script = [
        [
            # the write first: a server's result is outside data, after which a write
            # is asked about ([loop.policy] tainted_writes)
            ToolCall("c2", "mcp__t__put", {"key": "colour", "value": "blue"}),
            ToolCall("c1", "mcp__time__get_current_time", {"timezone": "Europe/Paris"}),
            ToolCall("c3", "mcp__time__get_current_time", {"timezone": 7}),
            ToolCall("c4", "mcp__nope__x", {}),
        ]
    ]
    hook_handlers.FIRED.clear()

    async def body(op: Operator, task_id: str, seen: list[ChatRequest]) -> None:
        asked = [q.description for q in (await op.questions()).approvals]
        assert (await op.task(task_id)).state is TaskState.WaitingForUser, asked
        offered = {t.name: t for t in seen[0].tools}
        assert {"Read", "mcp__time__get_current_time", "mcp__time__convert_time"} <= set(offered)
        assert {"mcp__t__peek", "mcp__t__put", "mcp__t__append"} <= set(offered)
        schema = offered["mcp__time__get_current_time"].input_schema
        assert schema["required"] == ["timezone"]
        told = await _results(op, task_id)
        assert not told["c1"][1] and '"timezone": "Europe/Paris"' in told["c1"][0]
        assert told["c2"] == ("colour = blue", False)
        assert told["c3"][1] and "Invalid parameters" in told["c3"][0]
        assert told["c4"][1] and "Unknown tool: mcp__nope__x" in told["c4"][0]
        # from the server's side: the one call it was asked, once
        assert [r["args"] for r in starts(log, "put")] == [{"key": "colour", "value": "blue"}]
        fired = [(e["hook"], e["tool"]) for e in hook_handlers.FIRED]
        for name in ("mcp__time__get_current_time", "mcp__t__put"):
            assert ("PreToolUse", name) in fired and ("PostToolUse", name) in fired
        steps = {s.step: s for s in await op.journal.tasks.steps(task_id)}
        assert steps[0].idempotency.value == "key" and steps[1].semantics.value == "Read"

    _run(tmp_path, config, script, body)


def test_a_destructive_tool_asks_at_every_call_and_offers_no_always(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    config = server_toml("t", server_command(log))
    script = [[ToolCall("a1", "mcp__t__append", {"text": "one"})]]

    async def body(op: Operator, task_id: str, seen: list[ChatRequest]) -> None:
        assert (await op.task(task_id)).state is TaskState.AwaitingApproval
        (question,) = (await op.questions()).approvals
        assert question.action_type == "permission"
        assert question.options == ["approve", "deny", "never"]
        assert question.description.startswith('Allow mcp__t__append: {"text": "one"}?')
        assert starts(log, "append") == []  # nothing ran before the owner's word
        await op.answer(question.approval_id, "approve")
        await op.wait_idle()
        assert (await _results(op, task_id))["a1"] == ("appended one", False)
        assert len(starts(log, "append")) == 1

    _run(tmp_path, config, script, body)


def test_a_blocked_tool_is_refused_by_the_policy_and_never_reaches_its_server(
    tmp_path: Path,
) -> None:
    log = tmp_path / "requests.jsonl"
    config = '[loop.policy]\nblocked_tools = ["mcp__t__append"]\n' + server_toml(
        "t", server_command(log), "[mcp.servers.tools.append]\nask = false\n"
    )
    script = [[ToolCall("a1", "mcp__t__append", {"text": "one"})]]

    async def body(op: Operator, task_id: str, seen: list[ChatRequest]) -> None:
        content, is_error = (await _results(op, task_id))["a1"]
        assert is_error and "the tool mcp__t__append is blocked" in content
        assert starts(log, "append") == []

    _run(tmp_path, config, script, body)


def test_a_server_that_fails_is_named_to_the_owner_and_the_others_work(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    bad = [sys.executable, "-c", "import sys; sys.exit(3)"]
    config = (
        server_toml("broken", bad)
        + server_toml("nokey", bad, 'env = { KEY = "{{secret:absent_key}}" }\n')
        + server_toml("t", server_command(log), "[mcp.servers.tools.peek]\nask = false\n")
    )
    script = [[ToolCall("p1", "mcp__t__peek", {"name": "x"})]]

    async def body(op: Operator, task_id: str, seen: list[ChatRequest]) -> None:
        assert (await _results(op, task_id))["p1"] == ("peeked x", False)
        assert not any(t.name.startswith("mcp__broken__") for t in seen[0].tools)
        said = [m.body for m in await op.journal.events.pending()] + [
            json.loads(line)["body"]
            for line in (tmp_path / "home" / "owner.log").read_text().splitlines()
            if line.strip()
        ]
        assert any("MCP server broken failed: its process exited with 3" in b for b in said), said
        missing = "MCP server nokey failed: mcp.servers 'nokey' env.KEY names secret 'absent_key'"
        assert any(missing in b for b in said), said

    _run(tmp_path, config, script, body)


def test_a_server_killed_under_a_call_errs_that_call_and_serves_the_next(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "append").touch()
    tools = "[mcp.servers.tools.append]\nask = false\n[mcp.servers.tools.peek]\nask = false\n"
    config = server_toml("t", server_command(log, hold), tools)
    script = [
        [ToolCall("a1", "mcp__t__append", {"text": "one"})],
        [ToolCall("p1", "mcp__t__peek", {"name": "after"})],
    ]
    work = tmp_path / "work"
    work.mkdir()
    home = make_home(tmp_path / "home", config='[loop]\ntools = ["Read"]\n' + config)
    seen: list[ChatRequest] = []

    async def go() -> None:
        async with open_kernel(home, model=_model(script, seen)) as kernel:
            op = Operator(kernel)
            started = await op.start_loop("use the server", str(work))
            await asyncio.to_thread(
                wait_for, lambda: starts(log, "append"), what="the call to start"
            )
            (first,) = starts(log, "append")
            os.kill(first["pid"], signal.SIGKILL)
            await op.wait_idle()
            told = await _results(op, started.task_id)
            assert told["a1"][1] and "stopped during the call" in told["a1"][0]
            assert told["p1"] == ("peeked after", False)
            (peek,) = starts(log, "peek")
            assert peek["pid"] != first["pid"]  # a new server process
            assert len(starts(log, "append")) == 1  # the write was not sent again
            (view,) = kernel.mcp.views() if kernel.mcp else []
            assert view.state == "running" and view.restarts == 1

    asyncio.run(go())


def test_a_write_holds_its_server_alone_and_a_read_of_another_task_waits_for_it(
    tmp_path: Path,
) -> None:
    """Locks apply to MCP tools as to the file tools: a server is what its tools touch,
    so a write of one task holds it alone while it runs, and another task's read of the
    same server waits (shown as waiting, in the journal's locks) until the write is done."""
    log = tmp_path / "requests.jsonl"
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "append").touch()
    tools = "[mcp.servers.tools.append]\nask = false\n[mcp.servers.tools.peek]\nask = false\n"
    config = server_toml("t", server_command(log, hold), tools)
    work = tmp_path / "work"
    work.mkdir()
    home = make_home(tmp_path / "home", config='[loop]\ntools = ["Read"]\n' + config)

    def model(request: ChatRequest) -> ChatResponse:
        asked = request.messages[0].text
        if any(m.role == "assistant" for m in request.messages):
            return reply(request, "Done.")
        if "write" in asked:
            return reply(request, "", [ToolCall("a1", "mcp__t__append", {"text": "one"})])
        return reply(request, "", [ToolCall("p1", "mcp__t__peek", {"name": "it"})])

    async def go() -> None:
        async with open_kernel(home, model=ScriptedChatModel(model)) as kernel:
            op = Operator(kernel)
            writer = await op.start_loop("write to the server", str(work))
            await asyncio.to_thread(
                wait_for, lambda: starts(log, "append"), what="the write to start"
            )
            (held,) = [lk for lk in await op.locks() if lk.kind == "mcp"]
            assert (held.name, held.mode, held.task_id) == ("t", "exclusive", writer.task_id)
            reader = await op.start_loop("read from the server", str(work))
            await asyncio.to_thread(
                wait_for,
                lambda: any(w.task_id == reader.task_id for w in kernel.locks.waiting()),
                what="the read to wait for the server",
            )
            assert starts(log, "peek") == []  # it did not reach the server meanwhile
            (hold / "append").unlink()
            await op.wait_idle()
            told = await _results(op, reader.task_id)
            assert told["p1"] == ("peeked it", False)
            ends = [(r["event"], r["tool"]) for r in requests(log)]
            assert ends.index(("end", "append")) < ends.index(("start", "peek"))

    asyncio.run(go())


def test_the_git_server_reads_a_repository(tmp_path: Path) -> None:
    need_module("mcp_server_git")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("alpha\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first commit"], check=True)
    command = [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]
    config = server_toml("git", command, "[mcp.servers.tools.git_log]\nask = false\n")
    script = [[ToolCall("l1", "mcp__git__git_log", {"repo_path": str(repo)})]]

    async def body(op: Operator, task_id: str, seen: list[ChatRequest]) -> None:
        offered = {t.name for t in seen[0].tools}
        assert {"mcp__git__git_log", "mcp__git__git_status", "mcp__git__git_commit"} <= offered
        content, is_error = (await _results(op, task_id))["l1"]
        assert not is_error and "first commit" in content, content

    _run(tmp_path, config, script, body)


def test_the_everything_server_from_npm_answers_text_numbers_and_an_image(
    tmp_path: Path,
) -> None:
    entry = server_everything()
    names = ["echo", "get-sum", "get-tiny-image"]
    allowed = json.dumps([f"mcp__everything__{n}" for n in names])
    config = f"always_allow = {allowed}\n" + server_toml(
        "everything", ["node", str(entry), "stdio"]
    )
    script = [
        [
            ToolCall("e1", "mcp__everything__echo", {"message": "hello"}),
            ToolCall("s1", "mcp__everything__get-sum", {"a": 2, "b": 3}),
            ToolCall("i1", "mcp__everything__get-tiny-image", {}),
        ]
    ]

    async def body(op: Operator, task_id: str, seen: list[ChatRequest]) -> None:
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        told = await _results(op, task_id)
        assert told["e1"] == ("Echo: hello", False)
        assert not told["s1"][1] and "5" in told["s1"][0]
        assert not told["i1"][1] and "[image image/png" in told["i1"][0]

    _run(tmp_path, config, script, body)


def test_a_server_over_streamable_http_gets_its_secret_header(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    port = _free_port()
    server = _http_server(log, port)
    try:
        config = server_toml(
            "far",
            None,
            f'url = "http://127.0.0.1:{port}/mcp"\n'
            'headers = { Authorization = "Bearer {{secret:far_token}}" }\n'
            "[mcp.servers.tools.token]\nask = false\n",
        )
        script = [[ToolCall("t1", "mcp__far__token", {})]]

        async def body(op: Operator, task_id: str, seen: list[ChatRequest]) -> None:
            assert (await _results(op, task_id))["t1"] == ("a token came", False)

        _run(tmp_path, config, script, body, secrets={"far_token": "s3cr3t-far-token"})
        (said,) = [r["args"]["authorization"] for r in requests(log) if r["event"] == "token"]
        assert said == "Bearer s3cr3t-far-token"
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_an_http_server_that_stops_and_comes_back_is_connected_to_again(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    port = _free_port()
    config = McpConfig.model_validate(
        {"servers": [{"name": "far", "url": f"http://127.0.0.1:{port}/mcp"}]}
    )

    async def go() -> None:
        server = await asyncio.to_thread(_http_server, log, port)
        tools = ToolRegistry()
        servers = McpServers(
            config,
            tools,
            servers_dir=tmp_path / "mcp",
            home_tag="test",
            secret=lambda name: None,
            redact=lambda text: text,
        )
        try:
            await servers.ready()
            peek = tools.get("mcp__far__peek")
            assert await peek.run({"name": "a"}, None) == "peeked a"  # type: ignore[arg-type]
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
            with pytest.raises(ToolFailed, match="stopped during the call"):
                await peek.run({"name": "b"}, None)  # type: ignore[arg-type]
            server = await asyncio.to_thread(_http_server, log, port)
            assert await peek.run({"name": "c"}, None) == "peeked c"  # type: ignore[arg-type]
            (view,) = servers.views()
            assert view.state == "running" and view.restarts >= 1
        finally:
            await servers.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait()

    asyncio.run(go())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http_server(log: Path, port: int) -> subprocess.Popen[bytes]:
    """The test server over streamable HTTP on `port`, listening when returned."""
    server = subprocess.Popen(
        server_command(log),
        env={**os.environ, "MCP_TEST_HTTP_PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # it and its helper, ended together
    )
    wait_for(lambda: _listening(port), what="the HTTP server to listen")
    return server


def test_a_server_that_lists_a_bad_schema_is_named_and_the_others_work(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    raw = [sys.executable, str(Path(__file__).parents[1] / "mcp_raw_server.py")]
    config = server_toml("raw", raw) + server_toml(
        "t", server_command(log), "[mcp.servers.tools.peek]\nask = false\n"
    )
    script = [[ToolCall("p1", "mcp__t__peek", {"name": "x"})]]

    async def body(op: Operator, task_id: str, seen: list[ChatRequest]) -> None:
        assert (await _results(op, task_id))["p1"] == ("peeked x", False)
        assert not any(t.name.startswith("mcp__raw__") for t in seen[0].tools)
        said = [m.body for m in await op.journal.events.pending()] + [
            json.loads(line)["body"]
            for line in (tmp_path / "home" / "owner.log").read_text().splitlines()
            if line.strip()
        ]
        # the SDK refuses a listing with a schema that is not an object's: the server
        # fails, named once, on one line
        (raw_failed,) = [b for b in said if b.startswith("MCP server raw failed")]
        assert "tools.1.inputSchema.type" in raw_failed and "\n" not in raw_failed

    _run(tmp_path, config, script, body)
