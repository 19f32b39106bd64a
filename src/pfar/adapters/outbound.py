"""An owner message as a chat channel shows it: a question with its answers as
buttons (a cut action's Yes withheld until the owner has seen it whole), and the
earlier prompts of the same question whose buttons it replaces."""

from __future__ import annotations

import contextlib

from ..journal import OwnerMessage
from ..kernel.api import Operator
from ..kernel.api.channel_host import ChannelHost
from . import whole_action
from .channel import REPLY_KIND, Button, Outbound, quoted


async def as_outbound(host: ChannelHost, operator: Operator, message: OwnerMessage) -> Outbound:
    """The message as a channel shows it: a question with its answers as buttons, and
    the earlier prompts of the same question whose buttons it replaces."""
    kind, key = message.kind, message.message_key
    question_id: str | None = None
    buttons: tuple[Button, ...] = ()
    replaces: tuple[str, ...] = ()
    if kind in ("approval", "credential") and key.count(":") >= 2:
        question_id = key.split(":")[1]
        prefix = f"{kind}:{question_id}:"
        earlier = await host.sent_ids(prefix)
        replaces = tuple(remote for k, remote in earlier if k != key)
    text = message.body
    if kind == "approval" and question_id is not None:
        with contextlib.suppress(Exception):
            approval = await operator.approval(question_id)
            # a cut action: no Yes one tap away, until the owner has seen it whole
            offered = [o for o in approval.options if not whole_action.withheld(approval, o)]
            buttons = tuple(Button(_label(o), o) for o in offered)
            if len(offered) < len(approval.options):
                text += whole_action.note(approval)
    return Outbound(
        key,
        kind,
        text,
        message.task_id,
        question_id,
        buttons,
        replaces,
        quoted(key) if kind == REPLY_KIND else None,
    )


_LABELS = {
    "approve": "Yes",
    "deny": "No",
    "always": "Always allow",
    "never": "Never allow",
    "retry": "Retry",
    "skip": "Skip",
    "fail": "Fail",
    "continue": "Continue",
    "resume": "Resume",
    "abandon": "Abandon",
}


def _label(option: str) -> str:
    return _LABELS.get(option, option.replace("_", " ").capitalize())
