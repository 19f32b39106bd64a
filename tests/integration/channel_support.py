"""What the chat channel tests share: a kernel with its channels on the test's own event
loop, polling for what a loopback service saw, and the outbox's state."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from pfar.adapters import run as channels_run
from pfar.adapters.channel import Channel
from pfar.config import Config
from pfar.kernel import Kernel
from pfar.kernel.api import Operator
from pfar.llm import ChatRequest, ChatResponse, ScriptedChatModel, ToolCall, reply
from pfar.vault.home import Home


def chat_model(request: ChatRequest) -> ChatResponse:
    """A loop's model for chat tests: "key ..." asks for a credential, "write ..." writes
    x.txt, anything else is echoed."""
    first = request.messages[0].text
    if first.startswith("key") and not any(m.role == "assistant" for m in request.messages):
        call = ToolCall("k", "admin.prompt_credential", {"service": "demo"})
        return reply(request, "", [call])
    if first.startswith("write") and not any(m.role == "assistant" for m in request.messages):
        call = ToolCall("w", "Write", {"file_path": "x.txt", "content": "x"})
        return reply(request, "", [call])
    return reply(request, f"You said: {request.messages[-1].text or 'done'}")


@contextlib.asynccontextmanager
async def kernel_with_channels(
    home: Home, *, early: Callable[[list[Channel]], Any] | None = None
) -> AsyncIterator[tuple[Kernel, list[Channel]]]:
    """A started kernel with its configured channels running, as `pfar run` has them:
    built and their listeners opened before the kernel's start (`early` sees them
    then), supervised after it, and each connected (or degraded) before the test goes on."""
    config = Config.load(home.config)
    kernel = Kernel(home, config, model=ScriptedChatModel(chat_model))
    # the vault opens during start: a channel reads its secrets when it connects
    chats = channels_run.build(config, lambda n: kernel.secrets.get(n), str(home.config))  # noqa: PLW0108
    await channels_run.listen_early(chats)
    if early is not None:
        early(chats)
    await kernel.start()
    task = channels_run.start(Operator(kernel), config, chats)
    try:
        for _ in range(500):
            states = [kernel.channel_states[c.name].state for c in chats]
            if all(s in ("connected", "degraded") for s in states):
                break
            await asyncio.sleep(0.02)
        yield kernel, chats
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kernel.shutdown()


async def known(kernel: Kernel, channel: str, remote_id: object, seconds: float = 15) -> None:
    """Until pfar has journaled which of its messages `remote_id` is on `channel`. A fake
    server sees a message as pfar sends it, and pfar learns the message's id only from
    the server's answer: a reply sent in between names a message pfar cannot know yet
    (no person is that quick; a test is, on a loaded machine)."""
    for _ in range(int(seconds / 0.02)):
        if await kernel.journal.adapters.replied_to(channel, str(remote_id)) is not None:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"pfar never recorded its message {remote_id!r} on {channel}")


async def until(predicate: Callable[[], Any], what: str, seconds: float = 15) -> Any:
    """`predicate()` once it is truthy; fails naming `what` after `seconds`."""
    for _ in range(int(seconds / 0.02)):
        found = predicate()
        if found:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
