"""The messages pfar sends through the Cloud API: text in pieces, and a question's answers
as reply buttons or a list."""

from __future__ import annotations

from typing import Any

from ..channel import Outbound, Press, split_text

TEXT_LIMIT = 4096  # one text message's body
INTERACTIVE_BODY = 1024  # an interactive message's body
MAX_BUTTONS = 3  # reply buttons in one message; more answers make a list


def payloads(owner: str, message: Outbound) -> list[dict[str, Any]]:
    """What `message` is sent as, in order: its text in pieces, then its question."""
    pieces = split_text(message.text, TEXT_LIMIT)
    # a reply to the owner's words quotes it (its first piece)
    sent = [
        text_payload(owner, piece, message.reply_to if n == 0 else None)
        for n, piece in enumerate(pieces)
    ]
    if message.buttons and message.question_id:
        # the last piece becomes the question's body when it fits there
        body = pieces[-1] if len(pieces[-1]) <= INTERACTIVE_BODY else "Your answer:"
        if body is pieces[-1]:
            sent.pop()
        sent.append(interactive_payload(owner, body, message))
    return sent


def text_payload(to: str, body: str, reply_to: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": to,
        "type": "text",
        "text": {"body": body, "preview_url": False},
    }
    if reply_to:
        payload["context"] = {"message_id": reply_to}
    return payload


def interactive_payload(to: str, body: str, message: Outbound) -> dict[str, Any]:
    """A question's answers: reply buttons (titles up to 20 characters), or a list (up to
    10 rows, titles up to 24) when there are more than three."""
    question = message.question_id or ""
    if len(message.buttons) <= MAX_BUTTONS:
        action: dict[str, Any] = {
            "buttons": [
                {
                    "type": "reply",
                    "reply": {"id": Press(question, b.option).data(), "title": b.label[:20]},
                }
                for b in message.buttons
            ]
        }
        kind = "button"
    else:
        rows = [
            {"id": Press(question, b.option).data(), "title": b.label[:24]}
            for b in message.buttons[:10]
        ]
        action = {"button": "Answer", "sections": [{"title": "Answers", "rows": rows}]}
        kind = "list"
    return {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": to,
        "type": "interactive",
        "interactive": {"type": kind, "body": {"text": body}, "action": action},
    }
