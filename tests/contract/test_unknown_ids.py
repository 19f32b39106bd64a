"""A write about a task, question or call the store does not hold is refused, and its
messages and events go with it: nothing is written."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from pfar.answers import Approve
from pfar.errors import UnknownApproval, UnknownCredentialPrompt, UnknownTask
from pfar.journal import StepStatus
from pfar.journal import payloads as p
from pfar.journal.store import Store

from . import builders as b
from .helpers import run

MSG = b.message("about:nope", task_id="nope")
Write = Callable[[Store], Awaitable[object]]

# each write, and the error that names what it does not know
WRITES: dict[str, tuple[Write, type[Exception]]] = {
    "tasks.transition": (
        lambda s: s.tasks.transition("nope", p.Planning(), point=None, messages=[MSG]),
        UnknownTask,
    ),
    "tasks.fail": (lambda s: s.tasks.fail("nope", "gone", [MSG]), UnknownTask),
    "tasks.step_started": (lambda s: s.tasks.step_started(b.step("nope", 0)), UnknownTask),
    "tasks.step_finished": (
        lambda s: s.tasks.step_finished(b.step("nope", 0, StepStatus.completed), next_step=1),
        UnknownTask,
    ),
    "tasks.step_failed": (
        lambda s: s.tasks.step_failed(b.step("nope", 0, StepStatus.failed), "x", [MSG]),
        UnknownTask,
    ),
    "tasks.llm_request_sent": (lambda s: s.tasks.llm_request_sent("nope", "plan"), UnknownTask),
    "tasks.request_pause": (
        lambda s: s.tasks.request_pause("nope", running=lambda: False),
        UnknownTask,
    ),
    "tasks.unpause": (lambda s: s.tasks.unpause("nope"), UnknownTask),
    "tasks.retry": (lambda s: s.tasks.retry("nope"), UnknownTask),
    "tasks.begin_cancel": (lambda s: s.tasks.begin_cancel("nope"), UnknownTask),
    "tasks.finish_cancel": (lambda s: s.tasks.finish_cancel("nope", MSG), UnknownTask),
    "tasks.apply_recovery": (
        lambda s: s.tasks.apply_recovery(abandon=[("nope", "x")], attempted=[], messages=[MSG]),
        UnknownTask,
    ),
    "questions.decide_approval": (
        lambda s: s.questions.decide_approval("nope", Approve(), resume_to=b.resume_to, by="cli"),
        UnknownApproval,
    ),
    "questions.receive_credential": (
        lambda s: s.questions.receive_credential("nope", "cli"),
        UnknownCredentialPrompt,
    ),
    "loops.append": (
        lambda s: s.loops.append(
            "nope", [], after=-1, to=p.Executing(), point=None, messages=[MSG]
        ),
        UnknownTask,
    ),
    "loops.unblock": (
        lambda s: s.loops.unblock(b.step("nope", 0, StepStatus.completed)),
        UnknownTask,
    ),
    "loops.send": (lambda s: s.loops.send("nope", "hi", event=("chat-1", "chat")), UnknownTask),
    "loops.retry": (lambda s: s.loops.retry("nope"), UnknownTask),
}


@pytest.mark.parametrize("verb", sorted(WRITES))
def test_a_write_about_an_unknown_id_is_refused_and_writes_nothing(
    store: Store, verb: str, verbs_called: set[str]
) -> None:
    write, error = WRITES[verb]
    bus = run(store.events.bus(0))
    with pytest.raises(error, match="'nope'"):
        run(write(store))
    assert run(store.events.pending()) == []
    assert run(store.events.bus(0)) == bus
    assert run(store.tasks.listing()) == []
    assert run(store.adapters.seen("chat-1")) is False
    assert verbs_called >= {verb}  # (every verb here has its own tests too)
