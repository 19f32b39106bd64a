"""Telegram (seed 000 §8.2): a bot in the owner's private chat.

python-telegram-bot's `Bot` is the Bot API client (requests, types, errors); the
polling loop is pfar's own, because no library keeps the offset where a crash
cannot lose it. After each batch of updates, the offset (`last_offset`) is saved with
the ids of the updates handled, in one commit; polling resumes from `last_offset + 1`
(R6). With no offset saved (a new bot), one look with `-1` confirms what waited
before, and says so: that is not replayed; everything after it is.

Each update is handled once: one that creates something (a task, a message to a loop
task) commits its id with it, and one delivered again finds it and does nothing. Only
the owner (`owner_user_id`) is obeyed, and only in the owner's private chat with the
bot (a group's members would read the answers); messages and button presses from
anyone else, or from elsewhere, are ignored, audited and logged with the reason.

Importing the package registers the channel with `run`; `channel` holds it.
"""

from __future__ import annotations

from typing import Any

from ...config import Config
from ..run import FACTORIES
from .channel import MAX_TEXT, TelegramChannel, chunks


def _factory(config: Config, secret: Any) -> TelegramChannel:
    section = config.channels.telegram
    assert section is not None  # only enabled channels are built
    return TelegramChannel(section, secret)


FACTORIES["telegram"] = _factory

__all__ = ["MAX_TEXT", "TelegramChannel", "chunks"]
