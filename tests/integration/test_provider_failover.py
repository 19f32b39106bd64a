"""Providers under failure, through the real kernel: the Anthropic provider (the primary)
answers 500s, 529s and dropped connections; its breaker opens and the loop's calls go to
the tier's fallback (an OpenAI-compatible provider of `[llm.providers]`); the owner is
told once that it went down and once that it came back; the journal names, for each
call, the provider and model that answered."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pfar import Home, init_home
from pfar.journal import TaskState
from pfar.kernel.api.operator import Operator
from pfar.kernel.kernel import Kernel
from pfar.runners.loop.tasks import LoopRequest
from pfar.vault import keys
from pfar.vault.secrets import SecretStore

from ..support import make_home, pfar, running_kernel, vault_db
from .llm_servers import (
    Drop,
    ScriptedLLMServer,
    SSEReply,
    anthropic_stream,
    anthropic_text_block,
    failing,
)
from .openai_server import (
    Fail,
    OpenAIServer,
    Stream,
    chunk,
    text_stream,
    tool_piece,
    usage_chunk,
)
from .test_loop_providers import LOOP, READ, WRITE

# how long an open breaker keeps calls from a provider: long enough that the calls the
# tests expect to find it open come well before it goes half-open on a loaded machine
# (0.4 s could pass between the breaker opening and the next call: a whole turn, its
# tools and journal commits in between)
OPEN_SECONDS = 3.0


def failover_home(
    tmp_path: Path, primary: str, backup: str, *, failures: int, wait: float = 5.0
) -> Home:
    home = Home(tmp_path / "home")
    init_home(home, examples=False)
    home.config.write_text(
        f'[llm]\nprovider = "anthropic"\nmodel = "claude-test"\nbase_url = "{primary}"\n'
        "[llm.retry]\nbackoff_seconds = [0]\nmax_retries = 1\noverloaded_wait_seconds = 0\n"
        f"[llm.breaker]\nfailures = {failures}\nopen_seconds = {OPEN_SECONDS}\n"
        f"wait_seconds = {wait}\n"
        '[llm.tiers.worker]\nfallback = ["backup:gpt-test"]\n'
        f'[llm.providers.backup]\ntype = "openai"\nbase_url = "{backup}"\n' + LOOP
    )
    store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
    store.set("anthropic_api_key", "sk-ant-primary-1")
    store.set("backup_api_key", "sk-backup-2")
    store.close()
    return home


def calls_stream() -> list[dict[str, object]]:
    write, read = json.dumps(WRITE), json.dumps(READ)
    return [
        chunk(role="assistant", content="Writing then reading."),
        chunk(tool_calls=[tool_piece(0, id="call_w", name="Write", arguments=write)]),
        chunk(tool_calls=[tool_piece(1, id="call_r", name="Read", arguments=read)]),
        chunk(finish="tool_calls"),
        usage_chunk(90, 30),
    ]


def calls_made(home: Home, task_id: str) -> list[tuple[str, str]]:
    conn = vault_db(home)
    try:
        rows = conn.execute(
            "SELECT provider, model FROM llm_calls WHERE task_id = ? ORDER BY call_id",
            (task_id,),
        ).fetchall()
    finally:
        conn.close()
    return [(r[0], r[1]) for r in rows]


def owner_notices(home: Home) -> list[str]:
    conn = vault_db(home)
    try:
        rows = conn.execute(
            "SELECT body FROM owner_outbox WHERE message_key LIKE 'provider-health:%' ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    return [r[0] for r in rows]


def turn_models(home: Home, task_id: str) -> list[str]:
    conn = vault_db(home)
    try:
        rows = conn.execute(
            "SELECT body_json FROM loop_turns WHERE task_id = ? ORDER BY seq", (task_id,)
        ).fetchall()
    finally:
        conn.close()
    turns = [json.loads(r[0]) for r in rows]
    return [t["model"] for t in turns if t["kind"] == "assistant"]


def test_the_primary_goes_down_calls_fail_over_and_it_comes_back(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    backup = OpenAIServer()
    try:
        with ScriptedLLMServer() as primary:
            primary.script(
                *failing(1, 500, "internal error"),  # call 1: one failure (with its retry)
                *failing(1, 429, "rate limited"),
                Drop(before_reading=True),  # call 2: the connection drops, twice
                Drop(before_reading=False),
                # call 3 finds the breaker open: nothing is asked of the primary
                SSEReply(anthropic_stream(anthropic_text_block(0, ["Back again."]))),
            )
            backup.script(
                Stream(calls_stream()),
                Stream(text_stream("It says hi.")),
                Stream(text_stream("You're welcome.")),
            )
            home = failover_home(tmp_path, primary.url, backup.base_url, failures=2)

            async def run() -> str:
                kernel = Kernel(home)
                await kernel.start()
                try:
                    task = await kernel.start_loop(LoopRequest("write and read a.txt", str(work)))
                    await kernel.wait_idle()
                    record = await kernel.journal.tasks.get(task.task_id)
                    assert record.state is TaskState.WaitingForUser, record.error
                    # `pfar providers`: the primary is down, with its last error
                    shown = {p.name: p for p in await Operator(kernel).providers()}
                    assert (shown["anthropic"].role, shown["backup"].role) == (
                        "default",
                        "fallback",
                    )
                    down = shown["anthropic"]
                    assert down.state in ("open", "half_open") and down.failures == 2
                    assert down.last_error and "sk-ant-primary-1" not in down.last_error
                    assert shown["backup"].state == "closed"
                    await kernel.send(task.task_id, "thanks")
                    await kernel.wait_idle()
                    assert len(primary.requests) == 3  # the open breaker kept call 3 away
                    await asyncio.sleep(OPEN_SECONDS)  # the breaker goes half-open
                    await kernel.send(task.task_id, "once more")
                    await kernel.wait_idle()
                    (up,) = [p for p in await Operator(kernel).providers() if p.role == "default"]
                    assert (up.state, up.failures, up.last_error) == ("closed", 0, None)
                    return task.task_id
                finally:
                    await kernel.shutdown()

            task_id = asyncio.run(run())
            primary_bodies = [r.body for r in primary.requests]
    finally:
        backup.close()
    assert (work / "a.txt").read_text() == "hi"
    # a 500 and a 429, 1 dropped after it was read, then the probe (the drop before
    # reading left no request behind)
    assert len(primary_bodies) == 4
    assert [m["role"] for m in primary_bodies[-1]["messages"]][-1] == "user"
    assert [r.body["model"] for r in backup.received] == ["gpt-test"] * 3
    assert calls_made(home, task_id) == [
        ("backup", "gpt-test"),
        ("backup", "gpt-test"),
        ("backup", "gpt-test"),
        ("anthropic", "claude-test"),
    ]
    assert turn_models(home, task_id) == ["gpt-test", "gpt-test", "gpt-test", "claude-test"]
    down, up = owner_notices(home)
    assert "'anthropic' is down" in down and "2 calls in a row" in down
    assert "'anthropic' answers again" in up
    assert "sk-ant-primary-1" not in down + up


def test_an_openai_primary_that_drops_its_connections_fails_over_to_anthropic(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    primary = OpenAIServer()
    try:
        with ScriptedLLMServer() as fallback:
            primary.script(
                Fail(500, "upstream failed", type="server_error"),
                Drop(before_reading=True),
                Drop(before_reading=False),
                # a provider's error text may echo what it was sent (here a secret)
                Fail(529, "overloaded near 'dt-0123456789abcdef'", type="overloaded_error"),
            )
            fallback.script(
                SSEReply(anthropic_stream(anthropic_text_block(0, ["From the fallback."]))),
                SSEReply(anthropic_stream(anthropic_text_block(0, ["Again."]))),
            )
            home = Home(tmp_path / "home")
            init_home(home, examples=False)
            home.config.write_text(
                f'[llm]\nprovider = "openai"\nmodel = "gpt-test"\nbase_url = "{primary.base_url}"\n'
                "[llm.retry]\nbackoff_seconds = [0]\nmax_retries = 1\noverloaded_wait_seconds = 0\n"
                "[llm.breaker]\nfailures = 2\nopen_seconds = 600\n"
                '[llm.tiers.worker]\nfallback = ["claude:claude-test"]\n'
                f'[llm.providers.claude]\ntype = "anthropic"\nbase_url = "{fallback.url}"\n'
                'api_key_secret = "claude_key"\n' + LOOP
            )
            store = SecretStore.open(home.secrets_db, key=keys.unlock(home))
            store.set("openai_api_key", "sk-openai-primary")
            store.set("claude_key", "sk-ant-fallback")
            store.set("deploy_token", "dt-0123456789abcdef")
            store.close()

            async def run() -> str:
                kernel = Kernel(home)
                await kernel.start()
                try:
                    task = await kernel.start_loop(LoopRequest("say hi", str(work)))
                    await kernel.wait_idle()
                    await kernel.send(task.task_id, "and again")
                    await kernel.wait_idle()
                    return task.task_id
                finally:
                    await kernel.shutdown()

            task_id = asyncio.run(run())
    finally:
        primary.close()
    # two calls on the primary, two attempts each (the drop before reading left no
    # record); the second opened the breaker, and both answers came from the fallback
    assert len(primary.received) == 3
    assert calls_made(home, task_id) == [("claude", "claude-test")] * 2
    assert turn_models(home, task_id) == ["claude-test"] * 2
    (down,) = owner_notices(home)
    assert "'openai' is down: 2 calls in a row" in down
    assert "dt-0123456789abcdef" not in down  # the provider's error text is redacted


def test_pfar_providers_lists_them_with_a_kernel_and_without(tmp_path: Path) -> None:
    home = failover_home(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9", failures=2)
    # no kernel: the providers config.toml names; a breaker lives in a kernel's memory
    offline = pfar(home, "providers", "--json")
    assert offline.returncode == 0, offline.stderr
    assert [(p["name"], p["role"], p["state"]) for p in json.loads(offline.stdout)] == [
        ("anthropic", "default", "not running"),
        ("backup", "fallback", "not running"),
    ]
    words = pfar(home, "providers")
    assert "anthropic" in words.stdout and "not running" in words.stdout, words.stdout

    scripted = make_home(tmp_path / "scripted", script="")
    with running_kernel(scripted):
        live = pfar(scripted, "providers", "--json")
        assert live.returncode == 0, live.stderr
        assert json.loads(live.stdout) == [
            {
                "name": "scripted",
                "role": "default",
                "state": "closed",
                "failures": 0,
                "retry_in_seconds": 0.0,
                "last_error": None,
            }
        ]
        shown = pfar(scripted, "providers")
        assert "scripted" in shown.stdout and " up " in shown.stdout, shown.stdout
