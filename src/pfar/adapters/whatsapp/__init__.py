"""WhatsApp (seed 000 §8): the WhatsApp Business Cloud API, in the owner's chat with the
business number.

Meta delivers the owner's messages as webhooks to pfar's listener (Starlette on
uvicorn, see listener.py) and pfar writes through the Graph API (plain HTTPS with
httpx: the Cloud API is a small JSON API, and the Python clients for it add a web
framework of their own). What pfar does:

* **only Meta**: a notification counts only with a valid `X-Hub-Signature-256` (an
  HMAC-SHA256 of the raw body under the app secret); the subscription handshake
  (`hub.verify_token`) is answered only with the configured verify token;
* **exactly once**: a message's id (`wamid...`) is its event id, committed with what
  it did; Meta delivers a notification again until it gets a 200, and the message
  found handled does nothing the second time;
* **only the owner**: a message counts only from `owner_number`; anything else is
  ignored, audited and logged with the reason;
* **answers as buttons**: up to three answers are reply buttons, more (a permission
  prompt has four) an interactive list; a reply or a pick answers once;
* **a refused token** (401, Graph error 190: expired or revoked) ends the channel's
  run: it is degraded, and the owner is told on another channel how to renew it.

WhatsApp lets no one delete or edit a message through the API: a credential reply
stays in the owner's chat (pfar says so), and a question re-sent after a restart
leaves the old one's buttons, which then answer "already answered".

The modules: `channel` (the channel itself: notifications in, messages out),
`notifications` (what Meta sends: its signature, its messages, their age),
`payloads` (the messages pfar sends: text, reply buttons, lists) and `graph_errors`
(the Graph API's errors as channel errors). Importing the package registers the
channel with `run`.
"""

from __future__ import annotations

from typing import Any

from ...config import Config
from ..run import FACTORIES
from .channel import MIN_WINDOW, WhatsAppChannel
from .notifications import signature, verified


def _factory(config: Config, secret: Any) -> WhatsAppChannel:
    section = config.channels.whatsapp
    assert section is not None  # only enabled channels are built
    # the window in which a message's id stays known (journal cleanup keeps inbound
    # events this long), with a floor so that a retention of 0 still takes messages
    window = max(MIN_WINDOW, config.recovery.journal_retention_completed_hours * 3600)
    return WhatsAppChannel(section, secret, max_age=window)


FACTORIES["whatsapp"] = _factory

__all__ = ["MIN_WINDOW", "WhatsAppChannel", "signature", "verified"]
