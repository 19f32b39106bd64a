"""What a question to the owner is about: the kinds of approval pfar asks, stored as
their text (`pending_approvals.action_type`).

Every question pfar asks is of one of these kinds: the runners, recovery and the
write policy name a member, never a string. The kind is what an answer means: a
"deny" to a permission prompt skips the call, one to a template's write approval may
fail the task, an unanswered permission prompt is a "no" while any other unanswered
question fails its task.

`OtherQuestionKind` holds stored text that is none of them. pfar writes no such row,
but a journal can hold one (a newer pfar's question, a hand edit). Such a question is
still listed, answered, expired and withdrawn as a question with no kind of its own
(what every kind without special handling gets), and its row is never rewritten:
`read_question_kind` gives it, never an error, so that one row cannot stop the
kernel's start or its expiry sweep over every pending question.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class QuestionKind(StrEnum):
    """The kinds of question pfar asks; the value is the stored text."""

    # a template's approval of a write (policy/approvals.py): after untrusted data, or not
    tainted_write = "tainted_write"
    write = "write"
    # the step executor's own (runners/steps.py): the step's tool is no longer
    # registered, or a write a crash cut off may or may not have happened
    tool_missing = "tool_missing"
    write_in_doubt = "write_in_doubt"
    # the pipeline's (runners/pipeline.py): data above the cloud limit would go to a
    # cloud provider, or the task's template changed while it waited
    cloud_routing = "cloud_routing"
    template_changed = "template_changed"
    # the agentic loop's (runners/loop/): a call layer 2 asks about, or the task drifted
    permission = "permission"
    drift = "drift"
    # a model call would reach a spend cap of [budget] (runners/spend_gate.py)
    spend_cap = "spend_cap"
    # recovery's (recovery/in_flight.py): in flight during kernel death after death
    in_flight_deaths = "in_flight_deaths"
    # a traced workflow's, one per state of its trace (runners/workflow/answers.py)
    workflow_not_started = "workflow_not_started"
    workflow_completed = "workflow_completed"
    workflow_between_steps = "workflow_between_steps"
    workflow_mid_step = "workflow_mid_step"
    workflow_failed = "workflow_failed"


@dataclass(frozen=True, slots=True)
class OtherQuestionKind:
    """A stored kind this pfar does not know (a newer pfar's, a hand edit), kept as it is:
    on the operator API, `{"stored": <its text>}`."""

    stored: str

    def __str__(self) -> str:
        return self.stored


StoredQuestionKind = QuestionKind | OtherQuestionKind


def read_question_kind(text: str) -> StoredQuestionKind:
    """The kind a stored row names: one of pfar's, or `OtherQuestionKind` (kept as it is)."""
    try:
        return QuestionKind(text)
    except ValueError:
        return OtherQuestionKind(text)
