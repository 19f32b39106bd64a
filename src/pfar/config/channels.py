"""`[channels]`: the owner's chat channels, one section each."""

from __future__ import annotations

from pydantic import Field

from .section import Section


class TelegramConfig(Section):
    """`[channels.telegram]`: a bot in the owner's private chat (docs/telegram.md)."""

    enabled: bool = True
    # the vault secret holding the bot's token (`pfar secret set telegram_bot_token`)
    token_secret: str = "telegram_bot_token"
    # the only user obeyed; anything from anyone else is ignored and audited
    owner_user_id: int = Field(gt=0)
    # where pfar writes (default: the owner's private chat with the bot)
    chat_id: int | None = None
    api_url: str = "https://api.telegram.org"
    # getUpdates long-poll: how long one request waits for the owner's next update
    poll_timeout_seconds: int = Field(30, ge=0, le=50)


class WebhookRoute(Section):
    """One path of the webhook listener: what arrives there becomes a task."""

    path: str = Field(pattern=r"^/[A-Za-z0-9_./-]{1,200}$")
    # the template its tasks run, or "loop" for a loop task in [channels] directory
    template: str
    # vault secrets holding the Standard Webhooks signing keys ("whsec_..."); more than
    # one while a key is rotated
    secrets: list[str] = Field(min_length=1)
    # the task's text: the whole body, or a JSON pointer into it ("/issue/title")
    text: str = "body"


class WebhooksConfig(Section):
    """`[channels.webhooks]`: an HTTP listener for signed webhooks (docs/webhooks.md)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8787, ge=0, le=65535)
    max_body_bytes: int = Field(1 << 20, gt=0, le=64 << 20)
    # a webhook-timestamp further than this from now is refused (a replay)
    tolerance_seconds: int = Field(300, gt=0, le=86_400)
    # connections open at once (fewer when the open-file limit is low), and the time a
    # request has to arrive whole, headers and body: a flood of idle or slow connections
    # is refused or cut off instead of using up the kernel's file descriptors
    max_connections: int = Field(256, ge=1, le=100_000)
    request_timeout_seconds: float = Field(10, gt=0, le=3600)
    routes: list[WebhookRoute] = []


class SlackConfig(Section):
    """`[channels.slack]`: a Slack app in Socket Mode, talking in the owner's DM (docs/slack.md)."""

    enabled: bool = True
    # vault secrets: the bot token ("xoxb-...") for the Web API, and the app-level token
    # ("xapp-...", scope connections:write) that opens the Socket Mode connection
    bot_token_secret: str = "slack_bot_token"
    app_token_secret: str = "slack_app_token"
    # the only user obeyed, in the only workspace: anything else is ignored and audited
    owner_user_id: str = Field(pattern=r"^[UW][A-Z0-9]{2,30}$")
    owner_team_id: str = Field(pattern=r"^[TE][A-Z0-9]{2,30}$")
    api_url: str = "https://slack.com"
    # after a connection was down longer than this, the owner's DM history is read for
    # what was missed (Slack redelivers an unacknowledged event only a few times)
    catch_up_after_seconds: float = Field(30, ge=0, le=86_400)
    # the Socket Mode client's ping interval (a connection silent for 4 of them is stale)
    ping_interval_seconds: float = Field(5, gt=0, le=300)


class WhatsAppConfig(Section):
    """`[channels.whatsapp]`: the WhatsApp Business Cloud API, in the owner's chat with
    the business number (docs/whatsapp.md)."""

    enabled: bool = True
    # the only number obeyed (international format, digits only: "4915112345678")
    owner_number: str = Field(pattern=r"^[1-9][0-9]{6,15}$")
    # the business number's id in the Graph API (not the number itself)
    phone_number_id: str = Field(pattern=r"^[0-9]{1,30}$")
    # vault secrets: the Graph API access token, the app secret that signs Meta's
    # webhooks (X-Hub-Signature-256), and the verify token of the subscription handshake
    token_secret: str = "whatsapp_token"
    app_secret_secret: str = "whatsapp_app_secret"
    verify_token_secret: str = "whatsapp_verify_token"
    api_url: str = "https://graph.facebook.com/v21.0"
    # where Meta's webhooks arrive (behind a TLS-terminating proxy on the internet)
    host: str = "127.0.0.1"
    port: int = Field(8788, ge=0, le=65535)
    path: str = Field("/whatsapp", pattern=r"^/[A-Za-z0-9_./-]{0,200}$")
    max_body_bytes: int = Field(1 << 20, gt=0, le=64 << 20)
    # connections open at once (fewer when the open-file limit is low), and the time a
    # request has to arrive whole, headers and body: a flood of idle or slow connections
    # is refused or cut off instead of using up the kernel's file descriptors
    max_connections: int = Field(256, ge=1, le=100_000)
    request_timeout_seconds: float = Field(10, gt=0, le=3600)


class ChannelsConfig(Section):
    """The owner's chat channels (seed 000 §8): each one's own section enables it, e.g.
    `[channels.telegram]`. Started after recovery, in this order: telegram, webhooks,
    slack, whatsapp; the `[recovery] adapter_*` keys set their retry backoff."""

    # a chat message that is no command: "loop" starts a loop task in `directory`;
    # a template id submits it to that template
    on_message: str = "loop"
    # a folder of its own, made when missing: not `~`, where a task would see all of it
    directory: str = "~/pfar-work"
    # a channel that is not connected this long after it was started has failed its start
    ready_timeout_seconds: float = Field(30, gt=0, le=3600)
    telegram: TelegramConfig | None = None
    webhooks: WebhooksConfig | None = None
    slack: SlackConfig | None = None
    whatsapp: WhatsAppConfig | None = None

    def receivers(self) -> list[str]:
        """The enabled channels the owner's messages go to (webhooks only take events in)."""
        return [n for n in self.enabled() if n not in INBOUND_ONLY]

    def owner_account(self, name: str) -> str:
        """The owner's account on channel `name`, the only one it obeys (kept with each
        answer given there); "" for a channel with no owner of its own."""
        if name == "telegram" and self.telegram is not None:
            return f"user {self.telegram.owner_user_id}"
        if name == "slack" and self.slack is not None:
            return f"user {self.slack.owner_user_id}"
        if name == "whatsapp" and self.whatsapp is not None:
            return f"number {self.whatsapp.owner_number}"
        return ""

    def enabled(self) -> list[str]:
        """The names of the enabled channels, in the order they start."""
        found = []
        for name in CHANNEL_ORDER:
            section = getattr(self, name, None)
            if section is not None and getattr(section, "enabled", False):
                found.append(name)
        return found


# the seed's start order (§8.3), after the CLI
CHANNEL_ORDER = ("telegram", "webhooks", "slack", "whatsapp")
INBOUND_ONLY = frozenset({"webhooks"})
