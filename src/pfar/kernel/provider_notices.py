"""The owner is told when a model provider goes down and when it comes back: once each
time its circuit breaker opens, once each time its probe closes it (llm/breaker.py).

The breaker lives in memory and starts closed at every start, so these notices are
about this kernel's life: a provider still down after a restart is found down again
(and said so again) by the calls that fail on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..journal import OwnerMessage
from ..journal.message_keys import MessageKind, ProviderHealthKey
from ..journal.store import Store
from ..llm.breaker import Change, Health

log = logging.getLogger("pfar.kernel")


def text(health: Health) -> str:
    if health.change is Change.down:
        return (
            f"Model provider {health.provider!r} is down: {health.failures} calls in a row "
            f"failed ({health.detail}). Calls go to the tiers' fallbacks while it is down "
            "([llm.tiers.NAME] fallback), or wait for it; you will be told when it is back."
        )
    return f"Model provider {health.provider!r} answers again: calls go to it as before."


class ProviderNotices:
    """The breakers' `on_health`: each change becomes one message in the outbox, committed
    before the model call that saw the change goes on (a change is rare: one commit)."""

    def __init__(
        self, boot_id: str, journal: Store, notify: Callable[[], None], redact: Callable[[str], str]
    ) -> None:
        self._boot_id, self._journal, self._notify = boot_id, journal, notify
        # a provider's error text may echo what it was sent, a secret among it
        self._redact = redact
        self._count = 0

    async def __call__(self, health: Health) -> None:
        self._count += 1
        message = OwnerMessage(
            ProviderHealthKey(self._boot_id, self._count),
            MessageKind.notice,
            self._redact(text(health)),
        )
        await self._journal.events.enqueue([message])
        self._notify()
