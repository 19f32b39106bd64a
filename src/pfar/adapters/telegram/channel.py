"""The Telegram channel: pfar's own getUpdates loop, its offset saved with what each batch
did, and messages and questions sent to the owner's private chat."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, ClassVar

import httpx
from telegram import (
    Bot,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
)
from telegram import Update as TgUpdate
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.helpers import escape_markdown

from ...config import TelegramConfig
from ...journal.message_keys import MessageKind
from ..channel import (
    AuthFailed,
    ChannelDown,
    ChannelError,
    InDoubt,
    Link,
    Outbound,
    Press,
    RateLimited,
    Undeliverable,
    queue_reply,
    split_text,
)
from ..commands import Origin, press

log = logging.getLogger("pfar.adapters.telegram")

MAX_TEXT = 4096  # Telegram's limit for one message's text, after entity parsing
_CHUNK = 3500  # a chunk of raw text: escaping for MarkdownV2 may grow it
_ALLOWED = ["message", "callback_query"]
_ONLY_PRIVATE = (
    "pfar takes commands only here, in your private chat with the bot: your message in "
    "another chat was ignored (others there would read the answer)."
)
_RENEW = (
    "create a new token with @BotFather (/token), then `pfar secret set telegram_bot_token` "
    "and restart pfar"
)


def chunks(text: str) -> list[str]:
    """`text` in pieces Telegram takes, split at line ends where it can."""
    return split_text(text, _CHUNK)


class TelegramChannel:
    name: ClassVar[str] = "telegram"
    receives_messages: ClassVar[bool] = True

    def __init__(self, config: TelegramConfig, secret: Callable[[str], str | None]) -> None:
        self._config = config
        self._secret = secret  # read when the channel connects: the vault opens later
        self._chat = config.chat_id or config.owner_user_id
        self._bot: Bot | None = None

    def _client(self) -> Bot:
        token = self._secret(self._config.token_secret)
        if token is None:
            raise AuthFailed(
                f"no bot token in the vault (secret {self._config.token_secret!r})",
                f"`pfar secret set {self._config.token_secret}` with @BotFather's token",
            )
        if self._bot is None:
            self._bot = Bot(token, base_url=f"{self._config.api_url.rstrip('/')}/bot")
        return self._bot

    # -- in ------------------------------------------------------------------------

    async def run(self, link: Link) -> None:
        bot = self._client()
        try:
            # getMe, at every start (initialize() asks only once): connected means the
            # Bot API answered, and a refused token is known now, not later
            await bot.initialize()
            await bot.get_me()
        except InvalidToken as exc:
            raise _refused(exc) from None
        except NetworkError as exc:
            raise ChannelDown(f"the Bot API cannot be reached: {exc.message}") from None
        saved = await link.load_position()
        if saved and "last_offset" in saved:
            offset = int(saved["last_offset"]) + 1
        else:
            offset = await self._skip_backlog(bot, link)
        link.ready()
        while True:
            try:
                updates = await bot.get_updates(
                    offset=offset,
                    timeout=self._config.poll_timeout_seconds,
                    allowed_updates=_ALLOWED,
                    read_timeout=self._config.poll_timeout_seconds + 10,
                )
            except RetryAfter as exc:
                await asyncio.sleep(_seconds(exc.retry_after))
                continue
            except InvalidToken as exc:
                raise AuthFailed(
                    f"Telegram refused the bot token ({exc.message})", _RENEW
                ) from None
            except (NetworkError, TimedOut) as exc:
                raise ChannelDown(f"getUpdates failed: {exc.message}") from None
            if not updates:
                continue
            handled = []
            for update in updates:
                event_id = f"telegram:{update.update_id}"
                if not await link.seen(event_id):
                    await self._update(link, update, event_id)
                elif update.message is not None and link.answer_lost is not None:
                    await link.answer_lost(event_id, str(update.message.message_id))
                handled.append(event_id)
            offset = updates[-1].update_id + 1
            await link.save_position({"last_offset": offset - 1}, handled)

    async def _skip_backlog(self, bot: Bot, link: Link) -> int:
        """A bot with no saved offset: what waited before pfar knew the bot is not
        replayed. One look with `-1` (which confirms everything before the latest update,
        and does not wait), then every update from the next one on."""
        try:
            latest = await bot.get_updates(offset=-1, timeout=0, allowed_updates=_ALLOWED)
        except (NetworkError, TimedOut) as exc:
            raise ChannelDown(f"getUpdates failed: {exc.message}") from None
        log.warning("telegram: no saved offset; updates from before this start are skipped")
        link.audit("telegram_offset_missing", skipped=len(latest))
        # the position is saved even when nothing waited: a later start (a crash before
        # the first message) polls from it, and never skips what came since (0: update
        # ids are positive, so offset 1 takes every update not yet confirmed)
        last = latest[-1].update_id if latest else 0
        await link.save_position({"last_offset": last}, [])
        return last + 1

    async def _update(self, link: Link, update: TgUpdate, event_id: str) -> None:
        try:
            if update.callback_query is not None:
                await self._pressed(link, update.callback_query)
            elif update.message is not None:
                await self._said(link, update.message, event_id)
        except (ChannelError, TelegramError) as exc:
            # the update is handled (its effect, if any, is journaled): a reply that
            # could not be sent is not worth another delivery of it
            log.error("telegram: update %s: the reply could not be sent: %s", event_id, exc)

    def _owner(self, user_id: int | None) -> bool:
        return user_id == self._config.owner_user_id

    async def _said(self, link: Link, message: Message, event_id: str) -> None:
        user = message.from_user.id if message.from_user else None
        if not self._owner(user):
            log.warning("telegram: ignored a message from user %s (not the owner)", user)
            link.audit("telegram_ignored", user=user, why="not the owner")
            return
        chat = message.chat
        if chat.type != "private" or chat.id != self._config.owner_user_id:
            # others in a group would read the answer (and could see what it did): the
            # owner is told why in private, the chat hears nothing
            log.warning(
                "telegram: ignored the owner's message in %s chat %s (commands count only "
                "in the owner's private chat with the bot)",
                chat.type,
                chat.id,
            )
            link.audit("telegram_ignored", user=user, chat=chat.id, why="not the private chat")
            await self._client().send_message(self._config.owner_user_id, _ONLY_PRIVATE)
            return
        if message.text is None:
            await self._reply(link, message, "pfar reads text messages only", event_id)
            return
        replied = None
        if message.reply_to_message is not None:
            replied = await link.replied_to(str(message.reply_to_message.message_id))
        key, task, kind = replied if replied else (None, None, None)
        origin = Origin("telegram", event_id, key, task)
        answer = await link.handle(message.text, origin)
        quote = True
        if kind is MessageKind.credential:
            # the owner's message holds the secret: take it out of the chat (and answer
            # without quoting it: Telegram refuses a reply to a deleted message)
            try:
                await self._client().delete_message(message.chat_id, message.message_id)
                quote = False
            except TelegramError as exc:
                answer += f"\n(your message could not be deleted: {exc.message}; delete it)"
        await self._reply(link, message, answer, event_id, quote=quote)

    async def _pressed(self, link: Link, query: CallbackQuery) -> None:
        bot = self._client()
        if not self._owner(query.from_user.id):
            log.warning("telegram: ignored a button press by user %s", query.from_user.id)
            link.audit("telegram_ignored", user=query.from_user.id, why="button of another user")
            await bot.answer_callback_query(query.id, text="Only pfar's owner can answer.")
            return
        where = query.message.chat.id if query.message is not None else None
        if where != self._chat:  # pfar's buttons live only in the chat it writes to
            log.warning("telegram: ignored a button press in chat %s (not pfar's chat)", where)
            link.audit("telegram_ignored", user=query.from_user.id, chat=where, why="other chat")
            await bot.answer_callback_query(query.id, text="pfar takes answers only in its chat.")
            return
        chosen = Press.parse(query.data)
        if chosen is None:
            link.audit("telegram_ignored", why="unknown button data")
            await bot.answer_callback_query(query.id, text="This button is not pfar's.")
            return
        said = await press(link.operator, chosen.question_id, chosen.option)
        await bot.answer_callback_query(query.id, text=said[:190])
        if query.message is not None:  # its buttons are spent: take them off
            with contextlib.suppress(BadRequest):  # already without buttons
                await bot.edit_message_reply_markup(
                    query.message.chat.id, query.message.message_id, reply_markup=None
                )

    async def _reply(
        self, link: Link, message: Message, text: str, event_id: str, *, quote: bool = True
    ) -> None:
        """The answer goes through the channel's outbox (sent in order, retried on a 429
        or a 502, once), quoting the owner's message when it is still there."""
        await queue_reply(link, text, str(message.message_id) if quote else None, event_id)

    # -- out -----------------------------------------------------------------------

    async def send(self, message: Outbound) -> str | None:
        bot = self._client()
        for old in message.replaces:  # a re-sent question: the old buttons are dead
            with contextlib.suppress(TelegramError, ValueError):  # too old, or bare already
                await bot.edit_message_reply_markup(self._chat, int(old), reply_markup=None)
        pieces = chunks(message.text)
        sent_id = None
        try:
            for n, piece in enumerate(pieces):
                markup = None
                if n == len(pieces) - 1 and message.buttons and message.question_id:
                    markup = InlineKeyboardMarkup(
                        [
                            [
                                InlineKeyboardButton(
                                    b.label,
                                    callback_data=Press(message.question_id, b.option).data(),
                                )
                                for b in message.buttons
                            ]
                        ]
                    )
                quote = message.reply_to if n == 0 else None  # a reply quotes the owner's
                sent = await bot.send_message(
                    self._chat,
                    escape_markdown(piece, version=2),
                    parse_mode="MarkdownV2",
                    reply_markup=markup,
                    reply_parameters=(
                        # gone since (deleted)? then sent as a plain message
                        ReplyParameters(int(quote), allow_sending_without_reply=True)
                        if quote
                        else None
                    ),
                )
                sent_id = str(sent.message_id)
        except RetryAfter as exc:
            if sent_id is None:  # nothing of it went out: send it all later
                raise RateLimited(
                    "Telegram: too many requests", _seconds(exc.retry_after)
                ) from None
            raise  # part of it went out: not sent again
        except InvalidToken as exc:
            raise AuthFailed(f"Telegram refused the bot token ({exc.message})", _RENEW) from None
        except Forbidden as exc:
            raise Undeliverable(
                f"Telegram: {exc.message} (has the owner blocked the bot?)"
            ) from None
        except BadRequest as exc:
            raise Undeliverable(f"Telegram refused the message: {exc.message}") from None
        except NetworkError as exc:  # TimedOut too
            if sent_id is None and _never_sent(exc):
                raise ChannelDown(f"Telegram: {exc.message}") from None
            # the request went out and no answer came back (or part of a long message
            # went out): Telegram may have stored it, and has no key to send it again safely
            raise InDoubt(f"Telegram: {exc.message}") from None
        return sent_id

    async def close(self) -> None:
        if self._bot is not None:
            bot, self._bot = self._bot, None
            with contextlib.suppress(TelegramError):
                await bot.shutdown()


def _refused(exc: TelegramError) -> AuthFailed:
    # never exc.message: python-telegram-bot quotes the refused token in it
    return AuthFailed("Telegram refused the bot token", _RENEW)


def _never_sent(exc: NetworkError) -> bool:
    """The message surely did not arrive: the server answered with an error (no cause, or
    its unreadable body), or no connection was made (python-telegram-bot raises its
    errors from httpx's)."""
    cause = exc.__cause__
    return cause is None or isinstance(
        cause, TelegramError | httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout
    )


def _seconds(value: Any) -> float:
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(value)
