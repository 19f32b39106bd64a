"""What a chat channel is (seed 000 §8): a connection that brings the owner's messages in
and takes pfar's messages out, with a ready handshake.

A channel is started by the supervisor (supervisor.py) after recovery, in the seed's
order, and restarted on its backoff when it fails. It never touches the journal or the
kernel directly: it is given a `Link`, whose verbs are the operator API's (one surface
among the CLI, the control socket and the web console) plus the channel's own
position, and it reports `ready()` once it is connected, so the kernel knows.

Outbound, the supervisor hands it one `Outbound` at a time, in the order they were
queued, each committed as `sending` first: `send` returns the message's id on the
channel (kept, so a re-sent question can take the buttons off the old one) or raises
`RateLimited` (sends pause for `retry_after`), `ChannelDown` (the message surely did not
arrive: a server error, a connection refused; sent again on the channel's backoff while
the rest of the channel works), `InDoubt` (it may have arrived: never sent again) or
`Undeliverable` (this message never will be). Any other error counts as `InDoubt`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ..errors import PfarError
from ..journal.message_keys import MessageKey, MessageKind
from ..kernel.api import Operator


class ChannelError(PfarError):
    """A channel could not do what it was asked; the message says why, without secrets."""

    code = "channel"


class RateLimited(ChannelError):
    code = "rate_limited"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ChannelDown(ChannelError):
    """The connection is gone (or not up yet), or the service answered with a server
    error: the message surely did not arrive, and is sent again later."""

    code = "channel_down"


class InDoubt(ChannelError):
    """The message may have arrived (the connection broke after the request went out):
    it is not sent again; the owner is told once that it may be missing."""

    code = "delivery_in_doubt"


class Undeliverable(ChannelError):
    """The channel refused this message for good (too long even when split, blocked)."""

    code = "undeliverable"


class AuthFailed(ChannelError):
    """The channel's token was refused (expired, revoked): the channel is degraded and the
    owner is told on another channel how to renew it (`how`)."""

    code = "channel_auth_failed"

    def __init__(self, message: str, how: str) -> None:
        super().__init__(message)
        self.how = how


@dataclass(frozen=True, slots=True)
class Press:
    """What a button under a question sends back: the question and the option, as one
    short string (Telegram allows 64 bytes of callback data)."""

    question_id: str
    option: str

    def data(self) -> str:
        return f"q:{self.question_id}:{self.option}"

    @classmethod
    def parse(cls, data: object) -> Press | None:
        """The press in `data`, or None for anything that is not one of pfar's."""
        # the question's id holds no ":", an option may ("answer:HH:MM"): split twice
        parts = data.split(":", 2) if isinstance(data, str) else []
        if len(parts) != 3 or parts[0] != "q" or not parts[1] or not parts[2]:
            return None
        return cls(parts[1], parts[2])


def field_dict(payload: dict[str, Any], key: str) -> dict[str, Any]:
    """`payload[key]` when it is an object, else an empty one: a service's JSON has its
    shape checked, never trusted."""
    found = payload.get(key)
    return found if isinstance(found, dict) else {}


@dataclass(frozen=True, slots=True)
class Button:
    """An answer offered under a question: `label` shown, `option` sent back."""

    label: str
    option: str


@dataclass(frozen=True, slots=True)
class Outbound:
    """One owner message as a channel sends it."""

    key: MessageKey
    kind: MessageKind
    text: str
    task_id: str | None = None
    # a question's id (an approval or a credential prompt) and the answers it offers
    question_id: str | None = None
    buttons: tuple[Button, ...] = ()
    # the ids of earlier messages (on this channel) asking the same question: a channel
    # that can, takes their buttons off ("answered elsewhere / re-sent")
    replaces: tuple[str, ...] = ()
    # the owner's message this answers (its id on the channel), for a reply to a command
    reply_to: str | None = None


@dataclass(slots=True)
class Link:
    """What a running channel may use: the operator API, its position, and the owner's
    identity check. `ready` is called once the channel is connected."""

    name: str
    operator: Operator
    ready: Callable[[], None]
    load_position: Callable[[], Awaitable[dict[str, Any] | None]]
    # the new position and the ids of the updates handled up to it, in one commit
    save_position: Callable[[dict[str, Any], list[str]], Awaitable[None]]
    seen: Callable[[str], Awaitable[bool]]
    secret: Callable[[str], str | None]
    # the owner's words in, pfar's reply out (commands.py), for this channel's updates
    handle: Callable[..., Awaitable[str]]
    # the pfar message with this id on the channel: (its key, its task, its kind)
    replied_to: Callable[[str], Awaitable[tuple[MessageKey, str | None, MessageKind] | None]]
    audit: Callable[..., None] = field(default=lambda *a, **k: None)
    # the answer to an update (text, the owner's message it quotes or None, the update's
    # id), queued in the channel's outbox: sent in order, retried, once
    reply: Callable[[str, str | None, str], Awaitable[None]] | None = None
    # an update delivered again after a restart (seen before): its answer, if a kill
    # came between the update's commit and the answer's (update id, message it quotes)
    answer_lost: Callable[[str, str | None], Awaitable[None]] | None = None


async def queue_reply(link: Link, text: str, quoting: str | None, event_id: str) -> None:
    """The answer to the owner's update `event_id`, queued in the channel's outbox (sent
    in order, retried on the channel's backoff, once; in doubt never repeated), quoting
    the owner's message `quoting` where the channel can."""
    if link.reply is None:  # only a link made without the supervisor (a test's)
        raise ChannelError("this channel has no outbox for replies")
    await link.reply(text, quoting, event_id)


class Channel(Protocol):
    name: ClassVar[str]
    # False for a channel that only takes events in (webhooks): no messages go to it
    receives_messages: ClassVar[bool]

    async def run(self, link: Link) -> None:
        """Connect, call `link.ready()`, then take the owner's updates until cancelled.
        Returns or raises when the connection is lost: the supervisor starts it again."""

    async def send(self, message: Outbound) -> str | None:
        """Deliver one message (split when too long); its id on the channel, if any."""

    async def close(self) -> None:
        """Let go of connections and sessions (the channel is stopping)."""


def split_text(text: str, size: int) -> list[str]:
    """`text` in pieces of at most `size` characters, split at line ends where it can
    (each channel has its own limit for one message)."""
    if len(text) <= size:
        return [text]
    out, rest = [], text
    while len(rest) > size:
        cut = rest.rfind("\n", 0, size)
        cut = cut if cut > size // 2 else size
        out.append(rest[:cut])
        rest = rest[cut:].lstrip("\n")
    return [*out, rest] if rest else out


def retry_after(value: object, default: float) -> float:
    """A `Retry-After` header's seconds (`default` when it is missing or no number)."""
    try:
        return max(0.0, float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default
