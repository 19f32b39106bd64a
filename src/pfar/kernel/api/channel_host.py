"""What a host of the owner's chat channels (adapters/supervisor.py) may do in the kernel.

A chat channel is a surface like any other: what the owner says goes through the
operator's verbs. Keeping the channel up and delivering to it needs a little more,
and only this: the channel's own outbox (its deliveries, each journaled as it goes),
its position (a Telegram offset, say, committed with the updates it covers), its
state as `pfar channels` shows it, a word to the owner when it is degraded, the
vault's secrets (a channel's token), redaction of what a library quotes in an error,
and the audit log. Each `ChannelHost` is one channel's: it reads and writes that
channel's rows and no other's. `ChannelHosting` is what the kernel lends the host as a
whole: its wake-up on new owner messages, its last word on a fail-stop, and a step at
shutdown.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...journal import OwnerMessage
from ...journal.channels_sql import Delivery
from ...journal.json_text import JsonObject
from ...journal.message_keys import MessageKey, MessageKind
from ...journal.records import now_rfc3339
from ..owner import Sink
from .records import ChannelState

if TYPE_CHECKING:
    from ..kernel import Kernel


class ChannelHosting:
    """The kernel, as the host of its chat channels sees it."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    def channel(self, name: str) -> ChannelHost:
        return ChannelHost(self._kernel, name)

    def wake_on_owner_messages(self, sink: Sink) -> None:
        """`sink` is handed each message to the owner as the kernel delivers it (the
        channels' deliveries are queued in the commit that queued the message)."""
        self._kernel.add_sink(sink)

    def last_words(self, sinks: Sequence[Sink]) -> None:
        """Where the kernel's last word goes when the journal cannot be written
        (kernel/fail_stop.py): each channel, sent to directly."""
        self._kernel.last_words.extend(sinks)

    def before_close(self, step: Callable[[], Awaitable[None]]) -> None:
        """Run `step` at shutdown, after the wait for tasks, while the journal is open."""
        self._kernel.before_close.append(step)


class ChannelHost:
    """One chat channel's share of the kernel."""

    def __init__(self, kernel: Kernel, name: str) -> None:
        self._kernel = kernel
        self.name = name

    @property
    def journal_stopped(self) -> bool:
        """The journal cannot be written any more (fail-stop): the kernel is stopping."""
        return self._kernel.journal.writer.failure is not None

    # -- the connection ------------------------------------------------------------

    def set_state(self, state: str, error: str | None = None, failures: int = 0) -> None:
        """How the channel stands, as `pfar channels` shows it."""
        self._kernel.channel_states[self.name] = ChannelState(
            self.name, state, error, now_rfc3339(), failures
        )

    async def tell_owner(self, message: OwnerMessage) -> None:
        """Queue `message` to the owner (on every channel) and have it delivered."""
        await self._kernel.journal.events.enqueue([message])
        self._kernel.owner.notify()

    def secret(self, name: str) -> str | None:
        """The vault's secret `name` (a channel's token), None when it holds none."""
        return self._kernel.secrets.get(name)

    def redact(self, text: str) -> str:
        """`text` with every secret the vault holds masked (a library may quote one)."""
        return self._kernel.redactor.text(text)

    def audit(self, event: str, **fields: Any) -> None:
        self._kernel.audit.log(event, channel=self.name, **fields)

    # -- what comes in: the channel's position and the owner's updates ---------------

    async def position(self) -> JsonObject | None:
        return await self._kernel.journal.adapters.get(self.name)

    async def save_position(self, state: dict[str, object], event_ids: list[str]) -> None:
        """The new position and the ids of the updates handled up to it, in one commit."""
        await self._kernel.journal.adapters.ingested(self.name, state, event_ids)

    async def seen(self, event_id: str) -> bool:
        return await self._kernel.journal.adapters.seen(event_id)

    async def event_task(self, event_id: str) -> str | None:
        """The task the update `event_id` created, if it created one."""
        return await self._kernel.journal.adapters.event_task(event_id)

    async def replied_to(self, remote_id: str) -> tuple[MessageKey, str | None, MessageKind] | None:
        """pfar's message with this id on the channel: (its key, its task, its kind)."""
        return await self._kernel.journal.adapters.replied_to(self.name, remote_id)

    async def queue_reply(self, message: OwnerMessage) -> bool:
        """Queue `message` for this channel alone; False when it was queued before."""
        queued = await self._kernel.journal.adapters.queue_for(self.name, message)
        if queued:
            self._kernel.owner.notify()
        return queued

    async def queued(self, key_prefix: str) -> bool:
        """A message whose key starts with `key_prefix` is in the outbox already."""
        return await self._kernel.journal.adapters.queued(key_prefix)

    # -- what goes out: the channel's deliveries --------------------------------------

    async def due(self, limit: int = 20) -> list[Delivery]:
        return await self._kernel.journal.adapters.due(self.name, limit)

    async def next_due_at(self) -> str | None:
        return await self._kernel.journal.adapters.next_due_at(self.name)

    async def delivery_counts(self) -> dict[str, int]:
        return await self._kernel.journal.adapters.delivery_counts(self.name)

    async def sent_ids(self, key_prefix: str) -> list[tuple[MessageKey, str]]:
        """(key, id on the channel) of the messages sent here whose key has the prefix."""
        return await self._kernel.journal.adapters.sent_ids(self.name, key_prefix)

    async def sending(self, key: MessageKey) -> None:
        await self._kernel.journal.adapters.sending(self.name, key)

    async def sent(self, key: MessageKey, remote_id: str | None) -> None:
        await self._kernel.journal.adapters.sent(self.name, key, remote_id)

    async def later(self, key: MessageKey, error: str, not_before: str) -> None:
        await self._kernel.journal.adapters.later(self.name, key, error, not_before)

    async def failed(self, key: MessageKey, error: str) -> None:
        await self._kernel.journal.adapters.failed(self.name, key, error)

    async def in_doubt(self, key: MessageKey, error: str) -> None:
        await self._kernel.journal.adapters.in_doubt(self.name, key, error)
