"""The Slack channel: envelopes from Socket Mode handled in order and acknowledged once
their effect is committed; messages and questions posted to the owner's DM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from ...config import SlackConfig
from ...journal.message_keys import MessageKind
from ..channel import (
    AuthFailed,
    ChannelDown,
    ChannelError,
    Link,
    Outbound,
    Press,
    RateLimited,
    field_dict,
    queue_reply,
)
from ..commands import Origin, press
from .blocks import answer_buttons, answered, chunks, section
from .catch_up import messages_since
from .socket_mode import Downtime, Inbox, socket_client
from .web_errors import calls, error_code, send_failure

log = logging.getLogger("pfar.adapters.slack")

# what a button press shows, posted after its envelope was acknowledged
_Answer = Callable[[], Awaitable[object]]


class SlackChannel:
    name: ClassVar[str] = "slack"
    receives_messages: ClassVar[bool] = True

    def __init__(self, config: SlackConfig, secret: Callable[[str], str | None]) -> None:
        self._config = config
        self._secret = secret  # read when the channel connects: the vault opens later
        self._app_token = ""
        self._web: AsyncWebClient | None = None
        self._dm: str | None = None  # the owner's DM with the app

    def _client(self) -> AsyncWebClient:
        tokens = []
        for name in (self._config.bot_token_secret, self._config.app_token_secret):
            token = self._secret(name)
            if token is None:
                raise AuthFailed(
                    f"no Slack token in the vault (secret {name!r})",
                    f"`pfar secret set {name}` with the token from the app's settings",
                )
            tokens.append(token)
        bot_token, self._app_token = tokens
        if self._web is None:
            # retry_handlers=[]: the SDK's default retries a request whose connection was
            # lost, and a message post retried blind may be posted twice
            self._web = AsyncWebClient(
                bot_token,
                base_url=f"{self._config.api_url.rstrip('/')}/api/",
                retry_handlers=[],
                timeout=30,
            )
        return self._web

    # -- in ------------------------------------------------------------------------

    async def run(self, link: Link) -> None:
        web = self._client()
        inbox: Inbox = asyncio.Queue()
        async with calls("starting"):
            await web.auth_test()
            opened = await web.conversations_open(users=self._config.owner_user_id)
            self._dm = str(opened["channel"]["id"])
            url = await web.apps_connections_open(app_token=self._app_token)
        client = socket_client(
            self._app_token, web, str(url["url"]), self._config.ping_interval_seconds, inbox
        )
        down = Downtime()
        try:
            await client.connect()  # type: ignore[no-untyped-call]
            async with asyncio.TaskGroup() as group:
                group.create_task(down.watch(client, self._config.ping_interval_seconds))
                answers: asyncio.Queue[_Answer] = asyncio.Queue()
                group.create_task(self._take(link, client, inbox, down, answers))
                group.create_task(self._answer(answers))
        finally:
            await client.close()  # type: ignore[no-untyped-call]

    async def _take(
        self,
        link: Link,
        client: SocketModeClient,
        inbox: Inbox,
        down: Downtime,
        answers: asyncio.Queue[_Answer],
    ) -> None:
        first = True
        while True:
            req = await inbox.get()
            if req is None:  # (re)connected
                gap = down.reconnected()
                if first:
                    link.ready()
                if first or gap > self._config.catch_up_after_seconds:
                    await self._catch_up(link, first)
                first = False
                continue
            try:
                after = await self._envelope(link, client, req)
            except ChannelError as exc:
                log.error("slack: envelope %s: %s", req.envelope_id, exc)
            else:
                if after is not None:
                    answers.put_nowait(after)

    async def _envelope(
        self, link: Link, client: SocketModeClient, req: SocketModeRequest
    ) -> _Answer | None:
        """One envelope: its effect committed, then acknowledged; what to answer after."""
        payload = req.payload if isinstance(req.payload, dict) else {}
        after = None
        if req.type == "events_api":
            event = payload.get("event")
            if isinstance(event, dict) and event.get("type") == "message":
                await self._message(link, event, payload.get("team_id"))
        elif req.type == "interactive" and payload.get("type") == "block_actions":
            after = await self._pressed(link, payload)
        with contextlib.suppress(ConnectionError, aiohttp.ClientError):
            # not acknowledged: Slack sends it again, and it is found handled
            await client.send_socket_mode_response(SocketModeResponse(req.envelope_id))
        return after

    async def _answer(self, answers: asyncio.Queue[_Answer]) -> None:
        """What a button press shows, in order, apart from the envelopes: a slow or
        rate-limited post never holds back the next envelope's acknowledgement (Slack wants
        it within 3 s). The answers to the owner's words go through the outbox instead."""
        while True:
            answer = await answers.get()
            try:
                async with calls("answering the owner"):
                    await answer()
            except RateLimited as exc:
                await asyncio.sleep(exc.retry_after)
                with contextlib.suppress(ChannelError):
                    async with calls("answering the owner"):
                        await answer()
            except ChannelError as exc:
                log.error("slack: an answer to the owner could not be posted: %s", exc)

    def _owner(self, user: Any, team: Any) -> bool:
        return bool(user == self._config.owner_user_id and team == self._config.owner_team_id)

    async def _message(
        self, link: Link, event: dict[str, Any], team: Any, *, caught_up: bool = False
    ) -> bool:
        """A message in a channel the app is in: if it is the owner's, handled and its answer
        queued in the channel's outbox (sent in order, retried on a 429 or a 5xx, once)."""
        if event.get("subtype") or event.get("bot_id"):
            return False  # edits, deletions, joins and bots (pfar itself) are not words
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
        if not isinstance(ts, str) or not isinstance(channel, str):
            link.audit("slack_ignored", why="a message without ts or channel")
            return False
        team = event.get("team", team)
        if not self._owner(user, team):
            log.warning("slack: ignored a message from user %s of team %s", user, team)
            link.audit("slack_ignored", user=str(user), team=str(team), why="not the owner")
            return False
        if channel != self._dm:
            link.audit("slack_ignored", user=str(user), why="not in the owner's DM with pfar")
            return False
        event_id = f"slack:{channel}:{ts}"
        if await link.seen(event_id):
            if link.answer_lost is not None:  # a kill before its answer was queued?
                thread = event.get("thread_ts")
                await link.answer_lost(event_id, thread if isinstance(thread, str) else ts)
            return False
        text = event.get("text")
        thread = event.get("thread_ts") if isinstance(event.get("thread_ts"), str) else None
        if not isinstance(text, str) or not text.strip():
            await link.save_position(self._position(ts), [event_id])
            await queue_reply(link, "pfar reads text messages only", thread, event_id)
            return True
        replied = await link.replied_to(thread) if thread else None
        key, task, kind = replied if replied else (None, None, None)
        answer = await link.handle(text, Origin("slack", event_id, key, task))
        await link.save_position(self._position(ts), [event_id])
        if kind is MessageKind.credential:
            # the owner's message holds the secret: take it out of the chat where Slack
            # lets an app (a bot token may not delete another user's message)
            try:
                await self._client().chat_delete(channel=channel, ts=ts)
            except SlackApiError as exc:
                answer += (
                    f"\n(your message could not be deleted: {error_code(exc)}; delete it yourself)"
                )
        if caught_up:
            answer = f"(caught up after a disconnection) {answer}"
        await queue_reply(link, answer, thread or ts, event_id)  # in the owner's thread
        return True

    async def _pressed(self, link: Link, payload: dict[str, Any]) -> Any:
        """A button under a question: answered once; then what to show for it."""
        user = field_dict(payload, "user")
        user_id = user.get("id")
        team_id = field_dict(payload, "team").get("id") or user.get("team_id")
        actions = payload.get("actions")
        first = actions[0] if isinstance(actions, list) and actions else None
        chosen = Press.parse(first.get("value")) if isinstance(first, dict) else None
        web = self._client()
        channel = field_dict(payload, "channel").get("id")
        message = field_dict(payload, "message")
        if not self._owner(user_id, team_id):
            log.warning("slack: ignored a button press by user %s of team %s", user_id, team_id)
            link.audit(
                "slack_ignored", user=str(user_id), team=str(team_id), why="button of another user"
            )

            async def refuse() -> None:
                if channel and isinstance(user_id, str):
                    await web.chat_postEphemeral(
                        channel=channel, user=user_id, text="Only pfar's owner can answer."
                    )

            return refuse
        if channel != self._dm:  # pfar's buttons live only in the owner's DM with it
            log.warning("slack: ignored a button press in channel %s (not the DM)", channel)
            link.audit("slack_ignored", user=str(user_id), why="button outside the owner's DM")
            return None
        if chosen is None:
            link.audit("slack_ignored", why="unknown button value")
            return None
        said = await press(link.operator, chosen.question_id, chosen.option)

        async def show() -> None:
            if channel and isinstance(message.get("ts"), str):
                blocks = answered(message.get("blocks") or [], said)
                with contextlib.suppress(SlackApiError):  # too old to edit: the text says it
                    ts, text = message["ts"], str(message.get("text"))
                    await web.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
            if said.startswith(("already", "error")) and channel:
                await self._post(said, thread=message.get("ts"))

        return show

    async def _catch_up(
        self,
        link: Link,
        starting: bool,
    ) -> None:
        """The owner's DM since the last message handled: what Slack did not redeliver."""
        saved = await link.load_position() or {}
        oldest = saved.get("last_ts")
        if not isinstance(oldest, str) or self._dm is None:
            return  # a new app: nothing before now is the owner's work for pfar
        web = self._client()
        async with calls("reading the owner's DM"):
            found = await messages_since(web, self._dm, oldest)
        taken = 0
        for message in found:
            event = {**message, "channel": self._dm}
            if await self._message(link, event, self._config.owner_team_id, caught_up=True):
                taken += 1
        if taken:
            log.warning("slack: caught up %d message(s) missed while disconnected", taken)
            link.audit("slack_caught_up", messages=taken, starting=starting)

    def _position(self, ts: str) -> dict[str, Any]:
        return {"last_ts": ts, "channel": self._dm}

    async def _post(
        self, text: str, *, thread: str | None = None, buttons: list[dict[str, Any]] | None = None
    ) -> str | None:
        """Post `text` to the owner's DM (in pieces); the last piece's ts."""
        web = self._client()
        pieces = chunks(text)
        last = None
        for n, piece in enumerate(pieces):
            blocks: list[dict[str, Any]] = [section(piece)]
            if buttons and n == len(pieces) - 1:
                blocks.append({"type": "actions", "elements": buttons})
            sent = await web.chat_postMessage(
                channel=self._dm or "", text=piece, blocks=blocks, thread_ts=thread
            )
            last = str(sent["ts"])
        return last

    # -- out -----------------------------------------------------------------------

    async def send(self, message: Outbound) -> str | None:
        if self._dm is None:
            raise ChannelDown("Slack is not connected yet")
        web = self._client()
        for old in message.replaces:  # a re-sent question: the old buttons are dead
            with contextlib.suppress(SlackApiError, aiohttp.ClientError):
                await web.chat_update(
                    channel=self._dm,
                    ts=old,
                    text="(this question was asked again below)",
                    blocks=[],
                )
        answers = answer_buttons(message)
        try:
            # a reply to the owner's words goes in the thread of the message it answers
            return await self._post(message.text, thread=message.reply_to, buttons=answers or None)
        except SlackApiError as exc:
            raise send_failure(exc) from None
        except aiohttp.ClientConnectorError as exc:
            raise ChannelDown(f"Slack cannot be reached: {exc.os_error}") from None

    async def close(self) -> None:
        if self._web is not None:
            web, self._web = self._web, None
            session = getattr(web, "session", None)
            if session is not None:
                with contextlib.suppress(Exception):
                    await session.close()
