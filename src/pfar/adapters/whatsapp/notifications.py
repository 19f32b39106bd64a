"""What Meta sends to pfar's listener: a signed notification, and the messages in it."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

from ..channel import field_dict


def signature(app_secret: str, body: bytes) -> str:
    """Meta's `X-Hub-Signature-256` of `body`."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def verified(app_secret: str, body: bytes, header: str | None) -> bool:
    return header is not None and hmac.compare_digest(signature(app_secret, body), header)


def messages_in(notification: Any) -> list[dict[str, Any]]:
    """The messages of a Cloud API notification (statuses and anything else left out);
    its shape is checked, never trusted."""
    found = []
    entries = notification.get("entry") if isinstance(notification, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        changes = entry.get("changes") if isinstance(entry, dict) else None
        for change in changes if isinstance(changes, list) else []:
            value = field_dict(change, "value") if isinstance(change, dict) else {}
            messages = value.get("messages")
            found += (
                [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
            )
    return found


def age(timestamp: object) -> float | None:
    """Seconds since a message's `timestamp` (Unix seconds, as text); None if unreadable."""
    if not isinstance(timestamp, str | int) or not str(timestamp).isdigit():
        return None
    return time.time() - int(timestamp)
