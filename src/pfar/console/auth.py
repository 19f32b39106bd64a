"""Who may use the console: the owner, with the owner token kept in the vault.

* **Login**: the token, typed into a password field, compared in constant time. It is
  never put in a URL, a log line or a page.
* **Session**: a cookie (HttpOnly, SameSite=Strict, Secure behind TLS) holding an id
  and an expiry signed with a key derived from the token: rotating the token
  (`pfar console token --rotate`) ends every session at once.
* **Actions**: POST only, each with a CSRF token issued for this session and spent
  once (a replayed form is refused), and refused when the browser says it comes
  from another site (`Origin`, `Sec-Fetch-Site`). A script may instead send the
  token as `Authorization: Bearer ...`: no cookie, so nothing another site can ride.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

COOKIE = "pfar_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
TOKEN_BYTES = 32
MAX_OPEN_FORMS = 4096  # CSRF tokens issued and not yet spent, across sessions


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str
    expires: float  # unix time

    @property
    def short(self) -> str:
        return self.session_id[:8]


class Gate:
    """The owner token's checks: login, sessions and one-time CSRF tokens."""

    def __init__(self, token: str, session_seconds: float) -> None:
        self._token = token.encode()
        self._key = hmac.new(self._token, b"pfar console session", hashlib.sha256).digest()
        self._session_seconds = session_seconds
        self._forms: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def token_matches(self, given: str) -> bool:
        return bool(self._token) and hmac.compare_digest(given.strip().encode(), self._token)

    # -- sessions ------------------------------------------------------------------------

    def open_session(self) -> tuple[Session, str]:
        """A new session and its cookie value."""
        session = Session(secrets.token_hex(16), time.time() + self._session_seconds)
        body = f"{session.session_id}.{int(session.expires)}"
        return session, f"{body}.{self._sign(body)}"

    def session(self, cookie: str | None) -> Session | None:
        """The session a cookie proves, or None (missing, forged, expired, or signed
        with a token since rotated)."""
        if not self._token or not cookie or cookie.count(".") != 2:
            return None
        session_id, expires, mac = cookie.split(".")
        if not hmac.compare_digest(mac, self._sign(f"{session_id}.{expires}")):
            return None
        if not expires.isdigit() or int(expires) < time.time():
            return None
        return Session(session_id, float(expires))

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    # -- CSRF ----------------------------------------------------------------------------

    def issue_form(self, session: Session) -> str:
        """A CSRF token for one action of this session."""
        token = secrets.token_urlsafe(18)
        self._forms[token] = (session.session_id, session.expires)
        while len(self._forms) > MAX_OPEN_FORMS:
            self._forms.popitem(last=False)  # the oldest form on any page goes stale
        return token

    def spend_form(self, session: Session, token: str | None) -> bool:
        """True once for a token issued to this session; never again."""
        if not token:
            return False
        issued = self._forms.pop(token, None)
        return issued is not None and issued[0] == session.session_id


def same_site(headers: dict[str, str], host: str) -> bool:
    """Whether a request comes from the console's own pages, as far as the browser
    says: a cross-site `Sec-Fetch-Site`, or an `Origin` of another host, is not."""
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is not None and origin != "null":
        return origin.split("://", 1)[-1] == host
    return origin != "null"


# before the owner asked for a token: nothing matches, no session is valid
NO_TOKEN = Gate("", 0)
