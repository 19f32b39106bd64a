"""The chat channel core through a real kernel: fan-out of every owner message to each
channel in the commit that queues it, delivery in order and once, rate limits, a start
that fails retried on its backoff and then degraded, a delivery cut off by a crash left
in doubt (never sent twice), and the owner's words in: exactly once per update.

The channel here is a small in-memory chat (`Chat`): it is the far side, not pfar's
code; each real channel (Telegram, Slack, ...) has its own tests against a loopback
server speaking its protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

from pfar.adapters import run as channels_run
from pfar.adapters.channel import ChannelDown, Link, Outbound, RateLimited
from pfar.adapters.commands import Origin, press
from pfar.config import Config
from pfar.journal import TaskState
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, reply
from pfar.vault.home import Home

from ..support import make_home


class Chat:
    """An in-memory chat for one owner: what pfar sent, and a way to say things."""

    name: ClassVar[str] = "chat"
    receives_messages: ClassVar[bool] = True

    def __init__(self) -> None:
        self.sent: list[Outbound] = []
        self.failing_starts = 0
        self.starts = 0
        self.rate_limit_next = 0
        self.hang_on_send = False
        self.hanging = False  # a send is hanging (its `sending` was committed before it)
        self.link: Link | None = None
        self.stop = asyncio.Event()

    async def run(self, link: Link) -> None:
        self.starts += 1
        if self.failing_starts:
            self.failing_starts -= 1
            raise ConnectionError("the chat server is down")
        self.link = link
        link.ready()
        await self.stop.wait()
        self.stop.clear()

    async def send(self, message: Outbound) -> str | None:
        if self.rate_limit_next:
            self.rate_limit_next -= 1
            raise RateLimited("429 Too Many Requests", 0.05)
        if self.link is None:
            raise ChannelDown("not connected")
        if self.hang_on_send:
            self.hanging = True
            await asyncio.Event().wait()
        self.sent.append(message)
        return f"m{len(self.sent)}"

    async def close(self) -> None:
        pass

    async def say(self, text: str, event_id: str, reply_to: Outbound | None = None) -> str:
        assert self.link is not None
        origin = Origin(
            "chat",
            event_id,
            reply_to.key if reply_to else None,
            reply_to.task_id if reply_to else None,
        )
        return await self.link.handle(text, origin)


def _model(request: ChatRequest) -> ChatResponse:
    return reply(request, f"You said: {request.messages[-1].text}")


CONFIG = """
[recovery]
adapter_max_retries = 2
adapter_retry_backoff_seconds = 0.01
adapter_retry_backoff_max_seconds = 0.05
"""


async def _with(home: Home, chat: Chat, body: Callable[[Kernel, Operator], Awaitable[Any]]) -> Any:
    config = Config.load(home.config)
    kernel = Kernel(home, config, model=ScriptedChatModel(_model), channels=["chat"])
    await kernel.start()
    task = channels_run.start(Operator(kernel), config, [chat])  # type: ignore[list-item]
    try:
        return await body(kernel, Operator(kernel))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kernel.shutdown()


async def _until(predicate: Callable[[], bool], what: str, seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_every_owner_message_reaches_the_channel_once_in_order(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", config=CONFIG + '[channels]\ndirectory = "/tmp"\n')
    chat = Chat()

    async def body(kernel: Kernel, op: Operator) -> None:
        await _until(lambda: len(chat.sent) >= 1, "the recovery report")
        assert chat.sent[0].kind == "report"  # the first message after a start
        started = await op.start_loop("hello", str(tmp_path), once=True)
        await op.wait_idle()
        await _until(lambda: any(m.kind == "result" for m in chat.sent), "the result")
        (result,) = [m for m in chat.sent if m.kind == "result"]
        assert result.task_id == started.task_id and "You said: hello" in result.text
        (view,) = await op.channels()
        assert view.state == "connected"
        assert view.deliveries == {"sent": len(chat.sent)}

    asyncio.run(_with(home, chat, body))


def test_a_rate_limit_sends_the_message_later_and_once(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", config=CONFIG)
    chat = Chat()
    chat.rate_limit_next = 2

    async def body(kernel: Kernel, op: Operator) -> None:
        await _until(lambda: len(chat.sent) >= 1, "the report after two 429s")
        await asyncio.sleep(0.2)
        assert [m.kind for m in chat.sent] == ["report"]

    asyncio.run(_with(home, chat, body))


def test_a_failing_start_is_retried_then_degraded_and_the_owner_told(tmp_path: Path) -> None:
    home = make_home(tmp_path / "home", config=CONFIG)
    chat = Chat()
    chat.failing_starts = 4  # past adapter_max_retries = 2

    async def body(kernel: Kernel, op: Operator) -> None:
        await _until(lambda: chat.starts >= 5 and chat.link is not None, "the fifth start")
        await _until(lambda: any("degraded" in m.text for m in chat.sent), "the notice")
        (notice,) = [m for m in chat.sent if "degraded" in m.text]
        assert "Channel chat is degraded: ConnectionError: the chat server is down" in notice.text
        (view,) = await op.channels()
        assert view.state == "connected" and view.failures == 0
        # the report waited for the connection: nothing is lost while a channel is down
        assert chat.sent[0].kind == "report"

    asyncio.run(_with(home, chat, body))


def test_a_delivery_cut_off_by_a_crash_is_in_doubt_and_never_sent_again(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path / "home", config=CONFIG)
    chat = Chat()
    chat.hang_on_send = True  # the kernel dies while the report is being sent

    async def crash() -> None:
        config = Config.load(home.config)
        kernel = Kernel(home, config, model=ScriptedChatModel(_model), channels=["chat"])
        await kernel.start()
        task = channels_run.start(Operator(kernel), config, [chat])  # type: ignore[list-item]
        await _until(lambda: kernel.channel_states["chat"].state == "connected", "the connection")
        # `sending` is committed, the send hangs (a fixed wait could end before it on a
        # loaded machine, and the report was then never in doubt)
        await _until(lambda: chat.hanging, "the send to hang")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kernel.abort()  # no clean shutdown: as after a SIGKILL

    asyncio.run(crash())
    again = Chat()

    async def body(kernel: Kernel, op: Operator) -> None:
        await _until(lambda: len(again.sent) >= 2, "the notice and the new report")
        await asyncio.sleep(0.2)
        texts = [m.text for m in again.sent]
        assert len(texts) == 2  # the first report is not sent again
        notice, report = texts  # the notice names it; the report counts it
        assert "may not have arrived" in notice and "System restarted" in notice
        assert "cut off while being sent: it may have arrived" in report
        (view,) = await op.channels()
        assert view.deliveries.get("in_doubt") == 1

    asyncio.run(_with(home, again, body))


def test_the_owners_words_come_in_once_per_update(tmp_path: Path) -> None:
    home = make_home(
        tmp_path / "home",
        config=CONFIG + f'[channels]\ndirectory = "{tmp_path}"\n[loop]\ntools = ["file.write"]\n',
    )
    chat = Chat()

    async def body(kernel: Kernel, op: Operator) -> None:
        await _until(lambda: chat.link is not None, "the connection")
        said = await chat.say("hello there", "chat:1")
        assert said.startswith("task ") and "started" in said
        assert await chat.say("hello there", "chat:1") == said  # redelivered: one task
        tasks = await op.tasks()
        assert len(tasks) == 1
        task_id = tasks[0].task_id
        await op.wait_idle()
        await _until(lambda: any(m.task_id == task_id for m in chat.sent), "the reply")
        (answer,) = [m for m in chat.sent if m.task_id == task_id]
        said = await chat.say("and more", "chat:2", reply_to=answer)
        assert said.startswith(f"sent to task {task_id[:8]}")
        await op.wait_idle()
        await chat.say("and more", "chat:2", reply_to=answer)  # delivered again
        turns = await op.journal.loops.turns(task_id)
        owner = [t for t in turns if getattr(t.turn, "source", "") == "owner"]
        assert len(owner) == 1  # the redelivered message appended nothing
        assert (await op.task(task_id)).state is TaskState.WaitingForUser
        assert "commands:" in await chat.say("/help", "chat:3")

    asyncio.run(_with(home, chat, body))


def test_a_button_pressed_twice_has_one_effect_and_says_so(tmp_path: Path) -> None:
    home = make_home(
        tmp_path / "home",
        config=CONFIG + '[loop]\ntools = ["file.write"]\nalways_allow = []\n',
    )
    chat = Chat()

    def writer(request: ChatRequest) -> ChatResponse:
        from pfar.llm import ToolCall

        if not any(m.role == "assistant" for m in request.messages):
            call = ToolCall("w", "file.write", {"path": "x.txt", "content": "x"})
            return reply(request, "", [call])
        return reply(request, "wrote it")

    async def body(kernel: Kernel, op: Operator) -> None:
        await op.start_loop("write", str(tmp_path))
        await op.wait_idle()
        await _until(lambda: any(m.kind == "approval" for m in chat.sent), "the question")
        (question,) = [m for m in chat.sent if m.kind == "approval"]
        assert [b.option for b in question.buttons] == ["approve", "deny", "always", "never"]
        assert [b.label for b in question.buttons][:2] == ["Yes", "No"]
        assert question.question_id is not None
        first = await press(op, question.question_id, "approve")
        second = await press(op, question.question_id, "deny")
        assert first == "approve: done"
        assert second.startswith("already answered: ") and "already approved" in second
        assert "nothing was changed" in second
        again = await press(op, question.question_id, "approve")
        assert again == "already answered: approve"
        await op.wait_idle()
        assert (tmp_path / "x.txt").read_text() == "x"

    model = ScriptedChatModel(writer)

    async def main() -> None:
        config = Config.load(home.config)
        kernel = Kernel(home, config, model=model, channels=["chat"])
        await kernel.start()
        task = channels_run.start(Operator(kernel), config, [chat])  # type: ignore[list-item]
        try:
            await body(kernel, Operator(kernel))
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await kernel.shutdown()

    asyncio.run(main())
