"""An owner message as a chat channel shows it: a question with its answers as
buttons (a cut action's Yes withheld until the owner has seen it whole), and the
earlier prompts of the same question whose buttons it replaces."""

from __future__ import annotations

import contextlib

from ..journal import OwnerMessage
from ..journal.message_keys import ApprovalKey, CredentialKey, ReplyKey
from ..kernel.api import Operator
from ..kernel.api.channel_host import ChannelHost
from . import whole_action
from .channel import Button, Outbound


async def as_outbound(host: ChannelHost, operator: Operator, message: OwnerMessage) -> Outbound:
    """The message as a channel shows it: a question with its answers as buttons, and
    the earlier prompts of the same question whose buttons it replaces."""
    key = message.message_key
    question_id: str | None = None
    buttons: tuple[Button, ...] = ()
    replaces: tuple[str, ...] = ()
    if isinstance(key, ApprovalKey | CredentialKey):
        question_id = key.question_id
        earlier = await host.sent_ids(key.prefix)
        replaces = tuple(remote for k, remote in earlier if k != key)
    text = message.body
    if isinstance(key, ApprovalKey):
        with contextlib.suppress(Exception):
            approval = await operator.approval(key.approval_id)
            # a cut action: no Yes one tap away, until the owner has seen it whole
            offered = [o for o in approval.options if not whole_action.withheld(approval, o)]
            buttons = tuple(Button(_label(o), o) for o in offered)
            if len(offered) < len(approval.options):
                text += whole_action.note(approval)
    return Outbound(
        key,
        message.kind,
        text,
        message.task_id,
        question_id,
        buttons,
        replaces,
        key.reply_to if isinstance(key, ReplyKey) else None,
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
