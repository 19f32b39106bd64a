"""Fail-stop: the vault cannot be written, so the kernel stops instead of going on.

A journal commit that fails (a full disk, a file system gone read-only, an fsync or
I/O error) stops the journal's writer for good (journal/writer.py): after a failed
fsync the OS may have dropped the data, so only a restart that reads what is really on
disk can go on safely. Nothing acknowledged is lost: a write is acknowledged only once
its commit returned.

Before the process exits, the owner is told why, naming the file and the error, on
every channel that still works: stderr, the terminal's owner messages, owner.log when it
can still be written, and each connected chat channel. The message goes to them
directly, not through the journal's outbox (the outbox is in the file that failed), so
it is said once, by this process, and not again after the restart. Each channel has at
most LAST_WORD_SECONDS for it, all at once: one that hangs holds up no other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from ..errors import VaultError
from ..journal import OwnerMessage
from ..journal.message_keys import FailStopKey, MessageKind
from ..vault.driver import sqlite
from ..vault.sqlite import translate
from .owner import Sink

log = logging.getLogger("pfar.kernel")

LAST_WORD_SECONDS = 10.0


def cause(exc: BaseException, journal: Path) -> str:
    """What failed, naming the file: pfar's own message names it; a bare error is
    said with the journal's path."""
    if isinstance(exc, sqlite.Error):
        exc = translate(journal, exc)
    if isinstance(exc, VaultError) and str(exc):
        return str(exc)
    return f"{journal}: {type(exc).__name__}: {exc}"


def notice(boot_id: str, why: str) -> OwnerMessage:
    body = (
        f"pfar has stopped (fail-stop): {why} Every task pfar acknowledged is in its "
        "journal, and the next start recovers them."
    )
    return OwnerMessage(FailStopKey(boot_id), MessageKind.notice, body)


async def tell_owner(message: OwnerMessage, sinks: Sequence[Sink]) -> list[str]:
    """Give `message` to every sink at once, each within LAST_WORD_SECONDS; the names
    of those that took it. A sink that fails is logged and passed over."""

    async def one(sink: Sink) -> str | None:
        try:
            async with asyncio.timeout(LAST_WORD_SECONDS):
                await sink.deliver(message)
        except Exception as exc:  # a channel that does not work any more: the next one
            log.error("could not tell the owner on %s: %s", sink.name, exc or repr(exc))
            return None
        return sink.name

    told = await asyncio.gather(*(one(sink) for sink in sinks))
    return [name for name in told if name is not None]
