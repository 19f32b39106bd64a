"""A hold's outcome is one of three closed sets whose values never meet; its JSON is
the value's text, as it always was, and the owner's words for it come from the type."""

from __future__ import annotations

import pytest

from pfar.errors import BadReply
from pfar.journal.holds import (
    HOLD_OUTCOMES,
    CancelOutcome,
    HoldOutcome,
    PauseOutcome,
    ResumeOutcome,
)
from pfar.journal.states import TaskState
from pfar.kernel.api.requests import TASK_PAUSE
from pfar.kernel.holds import HoldResult, describe


def test_the_outcomes_are_the_texts_the_api_always_sent() -> None:
    assert sorted(HOLD_OUTCOMES) == [
        "already",
        "already_cancelled",
        "cancelled",
        "paused",
        "requested",
        "resumed",
        "withdrawn",
    ]
    sizes = len(CancelOutcome) + len(PauseOutcome) + len(ResumeOutcome)
    assert len(HOLD_OUTCOMES) == sizes  # no text is two outcomes


@pytest.mark.parametrize("outcome", list(HOLD_OUTCOMES.values()))
def test_the_json_is_the_text_and_describe_reads_it_back(outcome: HoldOutcome) -> None:
    result = HoldResult("t-1", TaskState.Paused, outcome)
    sent = TASK_PAUSE.reply.dump(result)
    assert sent["outcome"] == outcome.value and type(sent["outcome"]) is str
    back = TASK_PAUSE.reply.parse(sent, "task_pause")
    assert back == result and back.outcome is outcome
    assert describe(back).startswith("task t-1")


def test_an_outcome_a_newer_kernel_sent_is_refused_naming_it() -> None:
    sent = {"task_id": "t-1", "state": "Paused", "outcome": "frozen"}
    with pytest.raises(BadReply, match=r"outcome"):
        TASK_PAUSE.reply.parse(sent, "task_pause")
