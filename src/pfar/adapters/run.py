"""Starting the owner's chat channels with a kernel: which ones (config), in which order,
under one supervisor, woken when the owner has new messages."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable, Sequence

from ..config import Config
from ..errors import ConfigError
from ..journal import OwnerMessage
from ..kernel.api import Operator
from .channel import Channel
from .supervisor import Backoff, Supervisor

# channel name -> how to build it from the config and the kernel's secrets; each
# channel module adds itself here
FACTORIES: dict[str, Callable[[Config, Callable[[str], str | None]], Channel]] = {}


def build(config: Config, secret: Callable[[str], str | None], path: str) -> list[Channel]:
    """The enabled channels, in their start order; ConfigError names one pfar lacks."""
    channels = []
    for name in config.channels.enabled():
        # each channel module registers itself; only the enabled ones are imported (a
        # kernel without Slack does not pay for importing its client at every start)
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(f"{__package__}.{name}")
        factory = FACTORIES.get(name)
        if factory is None:
            raise ConfigError(path, f"channels.{name}", "this channel is not available here")
        channels.append(factory(config, secret))
    return channels


async def listen_early(channels: Sequence[Channel]) -> None:
    """Open the listeners of channels that take events over HTTP before recovery: they
    answer "retry later" (503) until the kernel takes work, so nothing sent during a
    restart is refused for good."""
    for channel in channels:
        early = getattr(channel, "listen_early", None)
        if early is not None:
            await early()


class _Waker:
    """An owner sink that only wakes the channels' senders: their deliveries were
    queued in the commit that queued the message."""

    name = "channels"

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor

    async def deliver(self, message: OwnerMessage) -> None:
        self._supervisor.wake()


class _Direct:
    """One channel, sent to at once, outside its outbox: for the kernel's last word when
    the journal cannot be written (kernel/fail_stop.py)."""

    def __init__(self, supervisor: Supervisor, channel: Channel) -> None:
        self._supervisor = supervisor
        self._channel = channel
        self.name = channel.name

    async def deliver(self, message: OwnerMessage) -> None:
        await self._supervisor.send_now(self._channel, message)


def start(operator: Operator, config: Config, channels: Sequence[Channel]) -> asyncio.Task[None]:
    """Supervise `channels` for the life of `operator`'s kernel (the task is cancelled
    at shutdown)."""
    supervisor = Supervisor(
        operator, channels, backoff=Backoff.of(config.recovery), settings=config.channels
    )
    hosting = operator.hosting
    hosting.wake_on_owner_messages(_Waker(supervisor))
    hosting.last_words([_Direct(supervisor, c) for c in channels if c.receives_messages])
    hosting.before_close(supervisor.flush)  # at shutdown, after the wait
    supervisor.wake()
    return asyncio.create_task(supervisor.run(), name="pfar-channels")
