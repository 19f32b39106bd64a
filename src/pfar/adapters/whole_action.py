"""A cut action is seen whole before a chat can say Yes to it.

An approval's message shows a long action cut (its head and tail: runners/asking.py),
and a chat puts Yes one tap away. So on a chat channel, for an action that was cut:

* its question offers only the answers that let nothing run (No, Never allow, ...),
  and says how to see the rest: `show ID`;
* `show ID` sends the whole action (the channel splits it to its message limit), with
  its sha256, and from then on Yes (`approve ID`, `answer ID always`) is taken;
* an approving answer (a command, or a button of an older message) before that is
  refused, saying why.

What was shown is kept in memory: after a restart the owner shows it again. The CLI
(`pfar approval show`, `pfar approve`) is not gated: it prints whole what it asks about.
"""

from __future__ import annotations

from ..errors import PfarError
from ..kernel.api import Operator
from ..kernel.api.views import ApprovalView
from ..policy.printable import printable
from ..runners.asking import was_cut

# the answers that let nothing run: offered for a cut action before it was seen whole
REFUSING = frozenset({"deny", "never", "fail", "skip", "abandon"})

_shown: set[str] = set()  # approval ids the owner has seen whole on a chat


def withheld(approval: ApprovalView, option: str) -> bool:
    """`option` is not taken in a chat yet: it lets a cut action run, unseen."""
    return (
        option not in REFUSING
        and was_cut(approval.data_preview)
        and approval.approval_id not in _shown
    )


def note(approval: ApprovalView) -> str:
    """The line a chat adds under a cut action's question."""
    short = approval.approval_id[:8]
    return (
        f"\nThe action was cut here: send `show {short}` to see all of it; Yes is "
        f"offered once you have (or answer from the CLI: `pfar approval show {short}`)."
    )


async def show(operator: Operator, approval_id: str) -> str:
    """The whole action of an approval, as a chat shows it; from now on it may be approved."""
    a = await operator.approval(approval_id)
    short = a.approval_id[:8]
    preview = a.data_preview or "(no arguments)"
    _shown.add(a.approval_id)
    lines = [
        f"Approval {short}: {a.description}",
        f"the whole action ({len(preview)} characters"
        + (f", sha256 {a.args_sha256}" if a.args_sha256 else "")
        + "):",
        "  " + printable(preview, indent="  "),
        f"end of the action. Answer: approve {short} | deny {short}"
        + "".join(f" | answer {short} {o}" for o in a.options[1:] if o != "deny"),
    ]
    return "\n".join(lines)


async def refusal(operator: Operator, approval_id: str, option: str) -> str | None:
    """Why `option` is not taken in a chat for this approval now, or None."""
    try:
        a = await operator.approval(approval_id)
    except PfarError:
        return None  # the answer itself says what is wrong with the id
    if not withheld(a, option):
        return None
    short = a.approval_id[:8]
    return (
        f"not taken: the action of {short} was cut in the chat; send `show {short}` to "
        "see all of it first (or answer from the CLI)"
    )
