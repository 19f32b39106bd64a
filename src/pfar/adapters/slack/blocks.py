"""The Block Kit pfar posts to Slack: sections of mrkdwn text, answer buttons, and the
note a question shows once it is answered."""

from __future__ import annotations

from typing import Any

from ..channel import Outbound, Press, split_text

SECTION_TEXT = 3000  # Block Kit's limit for a section's text


def chunks(text: str) -> list[str]:
    """`text` in pieces a section takes."""
    return split_text(text, SECTION_TEXT)


def escape(text: str) -> str:
    """Text shown as it is in Slack's mrkdwn: its three control characters escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def section(piece: str) -> dict[str, Any]:
    """A section showing `piece` as it is (Slack refuses an empty one)."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": escape(piece) or " "}}


def answer_buttons(message: Outbound) -> list[dict[str, Any]]:
    """A question's answers as buttons, each carrying its `Press` (none without a question)."""
    return [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": b.label[:75]},
            "action_id": f"pfar-{n}",
            "value": Press(message.question_id, b.option).data(),
        }
        for n, b in enumerate(message.buttons)
        if message.question_id
    ]


def answered(blocks: list[dict[str, Any]], said: str) -> list[dict[str, Any]]:
    """A question's blocks once answered: its buttons gone, what the answer did below."""
    kept = [b for b in blocks if b.get("type") != "actions"]
    kept.append({"type": "context", "elements": [{"type": "mrkdwn", "text": escape(said)}]})
    return kept
