"""The owner token the web console takes at login: kept in the vault as a secret
(so it is redacted wherever it might appear), made on first use, rotated on request."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

TOKEN_SECRET = "pfar.console.token"
TOKEN_BYTES = 32


@dataclass(frozen=True, slots=True)
class ConsoleToken:
    """`pfar console token`: the token, whether it is new, and where the console is."""

    token: str
    rotated: bool
    url: str | None  # None: the console is not listening (disabled, or its port taken)


def owner_token(
    get: Callable[[str], str | None], put: Callable[[str, str], None], *, rotate: bool = False
) -> tuple[str, bool]:
    """The token, and whether it was made now (first use, or `rotate`). `put` stores a
    secret the way the owner's `pfar secret set` does: redacted from then on."""
    token = get(TOKEN_SECRET)
    if token is not None and not rotate:
        return token, False
    token = secrets.token_urlsafe(TOKEN_BYTES)
    put(TOKEN_SECRET, token)
    return token, True
