"""The Graph API's error answers as channel errors (never with the token in them)."""

from __future__ import annotations

import httpx

from ..channel import AuthFailed, ChannelError, RateLimited, Undeliverable, retry_after

_AUTH_CODES = frozenset({190})  # the access token expired or was revoked
# rate limits: the app's, the account's, the pair's, and the spam rate
_RATE_CODES = frozenset({4, 80007, 130429, 131048, 131056})
_OUTSIDE_WINDOW = 131047  # more than 24 hours since the owner last wrote
RENEW = (
    "create a new access token (a System User's token does not expire) in Meta's Business "
    "settings, then `pfar secret set whatsapp_token` and restart pfar"
)


def graph_failure(response: httpx.Response) -> ChannelError:
    """Why the Graph API refused a call (status 300 and up), as the error to raise; an
    `AuthFailed` ends the channel's run."""
    try:
        error = response.json().get("error") or {}
    except ValueError:
        error = {}
    code = error.get("code") if isinstance(error, dict) else None
    why = str(error.get("message") if isinstance(error, dict) else "") or "no reason given"
    if response.status_code == 429 or code in _RATE_CODES:
        retry = retry_after(response.headers.get("retry-after"), 60.0)
        return RateLimited(f"WhatsApp: rate limited ({code})", retry)
    if response.status_code == 401 or code in _AUTH_CODES:
        return AuthFailed(f"WhatsApp refused the access token (code {code})", RENEW)
    if code == _OUTSIDE_WINDOW:
        return Undeliverable(
            "WhatsApp takes messages to the owner only within 24 hours of the owner's "
            "last message: write anything to the business number to open the window"
        )
    if response.status_code >= 500:
        # the Graph API's own failure: it may or may not have taken the message
        return ChannelError(f"the Graph API failed ({response.status_code}): {why}")
    return Undeliverable(f"WhatsApp refused the message (code {code}): {why}")
