"""Slack's Web API errors as channel errors: a refused token, a rate limit, a lost
connection, a message Slack will not take."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import aiohttp
from slack_sdk.errors import SlackApiError

from ..channel import (
    AuthFailed,
    ChannelDown,
    ChannelError,
    RateLimited,
    Undeliverable,
    retry_after,
)

AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
RENEW = (
    "reinstall the app in its settings (OAuth & Permissions) or create a new app-level "
    "token (Basic Information), then `pfar secret set slack_bot_token` / "
    "`pfar secret set slack_app_token` and restart pfar"
)


@contextlib.asynccontextmanager
async def calls(doing: str) -> AsyncIterator[None]:
    """Web API errors as channel errors: a refused token, a lost connection."""
    try:
        yield
    except SlackApiError as exc:
        error = error_code(exc)
        if error in AUTH_ERRORS:
            raise AuthFailed(f"Slack refused a token ({error})", RENEW) from None
        if exc.response.status_code == 429 or error == "ratelimited":
            raise RateLimited(f"Slack: rate limited while {doing}", _retry_after(exc)) from None
        raise ChannelError(f"Slack: {error} while {doing}") from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ChannelDown(f"Slack cannot be reached while {doing}: {type(exc).__name__}") from None


def send_failure(exc: SlackApiError) -> ChannelError:
    """Why a message was not posted, as the error the supervisor acts on."""
    error = error_code(exc)
    if exc.response.status_code == 429 or error == "ratelimited":
        return RateLimited("Slack: rate limited", _retry_after(exc))
    if error in AUTH_ERRORS:
        return AuthFailed(f"Slack refused the bot token ({error})", RENEW)
    if exc.response.status_code >= 500:
        # Slack's own failure, answered: not posted, and Slack says to retry
        return ChannelDown(f"Slack failed ({exc.response.status_code}): {error}")
    return Undeliverable(f"Slack refused the message: {error}")


def error_code(exc: SlackApiError) -> str:
    """Slack's name for the error (`invalid_auth`, `ratelimited`...), else the HTTP status."""
    data = exc.response.data if isinstance(exc.response.data, dict) else {}
    return str(data.get("error") or f"HTTP {exc.response.status_code}")


def _retry_after(exc: SlackApiError) -> float:
    headers = {k.lower(): v for k, v in (exc.response.headers or {}).items()}
    value = headers.get("retry-after")
    return retry_after(value[0] if isinstance(value, list) else value, 1.0)
