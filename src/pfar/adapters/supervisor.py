"""Keeping the owner's chat channels up, and delivering to each (seed 000 §8).

One structured task group holds, for every channel, its connection and its sender:

* **connection**: `channel.run(link)` is started and must call `link.ready()` within
  `[channels] ready_timeout_seconds`. A start that fails (raises, returns, or is not
  ready in time) is logged as critical and retried after `[recovery]
  adapter_retry_backoff_seconds`, doubling up to `adapter_retry_backoff_max_seconds`;
  after `adapter_max_retries` failures in a row the channel is `degraded`, the owner is
  told (on whatever channel works: the message fans out like any other), and it is
  still retried, at the longest backoff. A refused token (`AuthFailed`) degrades it at
  once, with how to renew it. The kernel runs on with whatever works.
* **sender**: the channel's pending deliveries, in the order they were queued, while it
  is connected. Each is journaled `sending` before the channel's API is called and
  `sent` after, with the message's id there; a rate limit puts it back until
  `retry_after`, a send that surely failed (a server error, no connection) until the
  channel's backoff, and nothing queued after it overtakes it; an error that leaves it
  unknown whether the message arrived makes it `in_doubt`: never sent twice, and the
  owner is told once, on that channel, that it may be missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..answers import Actor
from ..config import ChannelsConfig, RecoveryConfig
from ..errors import VaultIOError
from ..journal import OwnerMessage
from ..journal.channels_sql import Delivery
from ..journal.json_text import JsonObject
from ..journal.message_keys import ChannelDegradedKey, MessageKey, MessageKind, ReplyKey
from ..journal.records import now_rfc3339, parse_rfc3339, rfc3339
from ..kernel.api import Operator
from ..kernel.api.channel_host import ChannelHost
from ..policy.printable import printable
from .channel import (
    AuthFailed,
    Channel,
    ChannelDown,
    Link,
    Outbound,
    RateLimited,
    Undeliverable,
)
from .commands import ChatDefaults, Origin, chat_directory, handle
from .outbound import as_outbound

log = logging.getLogger("pfar.adapters")

IDLE_LOOK = 5.0  # seconds between looks for deliveries when nothing wakes the sender
FLUSH_SECONDS = 10.0  # at most, at shutdown, for the channels to send what is due


@dataclass(frozen=True, slots=True)
class Backoff:
    first: float
    most: float
    tries: int  # failures in a row before the channel is degraded

    @classmethod
    def of(cls, config: RecoveryConfig) -> Backoff:
        return cls(
            config.adapter_retry_backoff_seconds,
            config.adapter_retry_backoff_max_seconds,
            config.adapter_max_retries,
        )

    def delay(self, failures: int) -> float:
        return float(min(self.most, self.first * 2.0 ** max(0, failures - 1)))


class Supervisor:
    def __init__(
        self,
        operator: Operator,
        channels: Sequence[Channel],
        *,
        backoff: Backoff,
        settings: ChannelsConfig,
    ) -> None:
        self._operator = operator
        self._channels = list(channels)
        # each channel's share of the kernel: its outbox, position and state
        self._hosts: dict[str, ChannelHost] = {
            c.name: operator.hosting.channel(c.name) for c in self._channels
        }
        self._backoff = backoff
        self._settings = settings
        self._connected = {c.name: asyncio.Event() for c in self._channels}
        self._wake = {c.name: asyncio.Event() for c in self._channels}
        self._defaults = ChatDefaults(settings.on_message, chat_directory(settings.directory))

    async def flush(self) -> None:
        """At shutdown, after the wait: until every connected channel has sent what is
        due (what is held back, or more than FLUSH_SECONDS of it, waits for the next
        start: it is in the journal)."""
        self.wake()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FLUSH_SECONDS):
                while True:
                    busy = False
                    for channel in self._channels:
                        name = channel.name
                        if not channel.receives_messages or not self._connected[name].is_set():
                            continue
                        host = self._hosts[name]
                        # what is due first, then what is being sent: a delivery only moves
                        # from due to sending to done, so one that is due at the first read
                        # is seen by one of the two. The other order misses a send whose
                        # `sending` commits between the reads (two round trips on a server)
                        due = await host.due(1)
                        counts = await host.delivery_counts()
                        busy = busy or bool(due or counts.get("sending"))
                    if not busy:
                        return
                    await asyncio.sleep(0.05)

    async def send_now(self, channel: Channel, message: OwnerMessage) -> None:
        """Send `message` on `channel` now, outside its outbox (nothing is journaled):
        the kernel's last word when the journal cannot be written. Raises ChannelDown
        when the channel is not connected."""
        if not self._connected[channel.name].is_set():
            raise ChannelDown(f"channel {channel.name} is not connected")
        await channel.send(Outbound(message.message_key, message.kind, message.body))

    def wake(self) -> None:
        """New owner messages are queued: every sender looks."""
        for event in self._wake.values():
            event.set()

    async def run(self) -> None:
        """Every channel's connection and sender, until cancelled."""
        async with asyncio.TaskGroup() as group:
            for channel in self._channels:  # the seed's order: the config lists them so
                group.create_task(self._keep(channel), name=f"channel-{channel.name}")
                if channel.receives_messages:
                    group.create_task(self._send(channel), name=f"channel-{channel.name}-out")

    # -- the connection -------------------------------------------------------------

    async def _keep(self, channel: Channel) -> None:
        host = self._hosts[channel.name]
        failures = 0
        degraded = False
        try:
            while True:
                ready = asyncio.Event()
                running = asyncio.create_task(channel.run(self._link(channel, ready)))
                try:
                    error = await self._until_ready(channel, running, ready)
                    if error is None:
                        failures, degraded = 0, False
                        host.set_state("connected")
                        self._connected[channel.name].set()
                        self._wake[channel.name].set()
                        await running  # until the connection is lost
                        error = "the connection ended"
                except AuthFailed as exc:
                    error, degraded = str(exc), True
                    await self._tell_degraded(channel.name, str(exc), exc.how)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                finally:
                    if not host.journal_stopped:
                        self._connected[channel.name].clear()
                    if not running.done():
                        running.cancel()
                        # its own end is returned, never raised; our cancel still is
                        await asyncio.gather(running, return_exceptions=True)
                if host.journal_stopped:
                    # its connection ended on a journal write: no reconnecting and no
                    # "degraded" (that would be journaled too); the channel stays open, and
                    # connected, for the kernel's last word until it is cancelled
                    await asyncio.Event().wait()
                failures += 1
                error = host.redact(error)
                log.critical("channel %s failed (%d in a row): %s", channel.name, failures, error)
                if not degraded and failures > self._backoff.tries:
                    degraded = True
                    await self._tell_degraded(channel.name, error, None)
                state = "degraded" if degraded else "retrying"
                host.set_state(state, error, failures)
                await asyncio.sleep(
                    self._backoff.most if degraded else self._backoff.delay(failures)
                )
        finally:
            host.set_state("stopped")
            with contextlib.suppress(Exception):
                await channel.close()

    async def _until_ready(
        self, channel: Channel, running: asyncio.Task[None], ready: asyncio.Event
    ) -> str | None:
        """None once the channel said it is connected; else why its start failed."""
        waiting = asyncio.create_task(ready.wait())
        try:
            done, _ = await asyncio.wait(
                {running, waiting},
                timeout=self._settings.ready_timeout_seconds,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            waiting.cancel()
        if ready.is_set():
            return None
        if running in done:
            running.result()  # its exception, if it raised one
            return "it stopped before it was connected"
        return f"not connected within {self._settings.ready_timeout_seconds:g} s"

    def _link(self, channel: Channel, ready: asyncio.Event) -> Link:
        name = channel.name
        host = self._hosts[name]

        async def load() -> JsonObject | None:
            return await host.position()

        async def save(state: dict[str, object], event_ids: list[str]) -> None:
            await host.save_position(dict(state), event_ids)

        # answers given on this channel are journaled as the owner's account there
        operator = self._operator.acting_as(Actor(name, self._settings.owner_account(name)))

        async def answer(text: str, origin: Origin) -> str:
            return await handle(operator, text, origin, self._defaults)

        async def replied_to(
            remote_id: str,
        ) -> tuple[MessageKey, str | None, MessageKind] | None:
            return await host.replied_to(remote_id)

        async def reply(text: str, to: str | None, event_id: str) -> None:
            key = ReplyKey(name, event_id, to)  # one answer per update
            # sink "channel:NAME": for this chat alone (owner.log keeps it too)
            message = OwnerMessage(key, MessageKind.reply, text, None, f"channel:{name}")
            if await host.queue_reply(message):
                self._wake[name].set()

        async def answer_lost(event_id: str, to: str | None) -> None:
            task = await host.event_task(event_id)
            if not task or await host.queued(ReplyKey(name, event_id).prefix):
                return  # it created nothing, or its answer is queued
            text = (
                f"your message was taken just before pfar restarted (task {task[:8]}); "
                "the answer it had then was lost in the restart: `tasks` shows where it is"
            )
            await reply(text, to, event_id)

        return Link(
            name=name,
            operator=operator,
            ready=ready.set,
            load_position=load,
            save_position=save,
            seen=host.seen,
            secret=host.secret,
            handle=answer,
            replied_to=replied_to,
            reply=reply,
            answer_lost=answer_lost,
            audit=host.audit,
        )

    async def _tell_degraded(self, name: str, error: str, how: str | None) -> None:
        """The owner hears it on every channel (one that works delivers it now; this one,
        when it is back)."""
        host = self._hosts[name]
        streak = now_rfc3339()[:16]  # one message per channel per minute at most
        error = host.redact(error)  # a library may quote what it refused
        body = f"Channel {name} is degraded: {printable(error)}." + (
            f" To renew it: {how}" if how else " pfar keeps trying to reconnect it."
        )
        message = OwnerMessage(ChannelDegradedKey(name, streak), MessageKind.notice, body)
        await host.tell_owner(message)
        self.wake()

    # -- the sender -----------------------------------------------------------------

    async def _send(self, channel: Channel) -> None:
        try:
            await self._send_due(channel)
        except VaultIOError:
            if not self._hosts[channel.name].journal_stopped:
                raise
            # fail-stop: nothing more is sent from the outbox, and the channel stays open
            # for the kernel's last word (an error here would close every channel)

    async def _send_due(self, channel: Channel) -> None:
        name = channel.name
        host = self._hosts[name]
        while True:
            await self._connected[name].wait()
            for delivery in await host.due():
                if not self._connected[name].is_set():
                    break
                if not await self._deliver(channel, delivery):
                    break  # held back: what follows waits behind it (order is kept)
            else:
                self._wake[name].clear()
                if not await host.due(limit=1):
                    await self._sleep_until_due(name)
                continue
            await asyncio.sleep(0)  # disconnected midway: wait for the connection

    async def _sleep_until_due(self, name: str) -> None:
        timeout = IDLE_LOOK
        held = await self._hosts[name].next_due_at()
        if held is not None:
            wait = (parse_rfc3339(held) - datetime.now(UTC)).total_seconds()
            timeout = max(0.0, min(timeout, wait))
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
        # comes as its timeout fires, and a sender that outlives its cancel hangs shutdown
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wake[name].wait()

    async def _deliver(self, channel: Channel, delivery: Delivery) -> bool:
        """Send one delivery; False when it is held back (sent again later)."""
        name, key = channel.name, delivery.message.message_key
        host = self._hosts[name]
        outbound = await as_outbound(host, self._operator, delivery.message)
        await host.sending(key)
        try:
            remote_id = await channel.send(outbound)
        except RateLimited as exc:
            # the service says when: nothing goes to the chat before (the rest waits)
            later = rfc3339(datetime.now(UTC) + timedelta(seconds=exc.retry_after))
            await host.later(key, str(exc), later)
            log.warning("channel %s: rate limited for %g s", name, exc.retry_after)
            return False
        except AuthFailed as exc:
            # not sent: a refused token ends the channel's run too, which degrades it and
            # tells the owner how to renew it; the message waits for the connection
            await host.later(key, str(exc), now_rfc3339())
            self._connected[name].clear()
            return False
        except ChannelDown as exc:
            # surely not sent (a server error, no connection): tried again on the
            # channel's backoff. Not "the channel is down": polling says that, and a
            # sender waiting for a reconnect that never comes would be silent for good
            wait = self._backoff.delay(delivery.attempts + 1)
            later = rfc3339(datetime.now(UTC) + timedelta(seconds=wait))
            error = host.redact(str(exc))
            await host.later(key, error, later)
            log.warning(
                "channel %s: message %s not sent, again in %g s: %s", name, key, wait, error
            )
            return False
        except Undeliverable as exc:
            await host.failed(key, str(exc))
            log.error("channel %s: message %s cannot be delivered: %s", name, key, exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # InDoubt, and anything a library raised unforeseen
            # it may have arrived: never sent again blind; the owner is told once, here
            error = host.redact(f"{type(exc).__name__}: {exc}")
            await host.in_doubt(key, error)
            log.error("channel %s: message %s may not have arrived: %s", name, key, error)
        else:
            await host.sent(key, remote_id)
        return True
