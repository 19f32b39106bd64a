"""A loop task's conversation: created with its prompt, appended turn by turn in the
commit that moves the task, refused whole when stale or illegal, and the owner's
messages and retries while it waits."""

from __future__ import annotations

import pytest

from pfar.errors import IllegalTransition, StaleConversation, TaskStateRefused, UnknownTask
from pfar.journal import TaskState
from pfar.journal import payloads as p
from pfar.journal.holds import PauseOutcome
from pfar.journal.store import Store
from pfar.journal.turns import (
    AssistantTurn,
    DiscardTurn,
    LoopCall,
    LoopResult,
    LoopSettings,
    ResultsTurn,
    SkillSeen,
    StoredTurn,
    UserTurn,
)

from . import builders as b
from .helpers import created_loop, loop_task, run
from .verbs import covers

S = TaskState
ASKED = AssistantTurn(
    text="I'll look", calls=(LoopCall(id="c1", name="shell.run", input={"cmd": "ls"}, step=0),)
)
ANSWERED = ResultsTurn(results=(LoopResult(call_id="c1", step=0, content="a.txt ünï"),))


@covers("loops.create", "loops.settings", "loops.turns", "loops.turn_count")
def test_a_loop_task_is_created_with_its_settings_and_its_prompt(store: Store) -> None:
    t = loop_task()
    skill = SkillSeen(
        name="pdf-tools",
        description="Fill forms.",
        source="home",
        path="/h/skills/pdf-tools",
        sha256="ab" * 32,
    )
    settings = LoopSettings(
        working_dir="/w",
        tier="big",
        once=True,
        learnings=("a", "b"),
        title="ünï",
        priority=3,
        skills=(skill,),
    )
    got, made = run(store.loops.create(t, settings, "fix the bug"))
    assert made and got == t
    assert run(store.tasks.get(t.task_id)) == t
    assert run(store.loops.settings(t.task_id)) == settings
    prompt = UserTurn(text="fix the bug", source="prompt")
    assert run(store.loops.turns(t.task_id)) == [StoredTurn(0, t.created_at, prompt)]
    assert run(store.loops.turns(t.task_id, after=0)) == []
    assert run(store.loops.turn_count(t.task_id)) == 1
    # a task that is no loop has no settings and no turns
    with pytest.raises(UnknownTask):
        run(store.loops.settings("nope"))
    assert run(store.loops.turns("nope")) == []
    assert run(store.loops.turn_count("nope")) == 0


@covers("loops.create", "events.for_task")
def test_a_loop_task_is_created_in_one_commit_with_its_messages(store: Store) -> None:
    """The owner's message about a new task (the skill folders it is not given) commits
    with it; a redelivered event creates nothing and sends nothing again."""
    first, again = loop_task(event_id="ev-told"), loop_task(event_id="ev-told")
    settings = LoopSettings(working_dir="/w")
    told = [b.message(f"skills-skipped:{first.task_id}", body="not given", task_id=first.task_id)]
    assert run(store.loops.create(first, settings, "one", b.event("ev-told"), told))[1]
    again_told = [b.message(f"skills-skipped:{again.task_id}", task_id=again.task_id)]
    assert not run(store.loops.create(again, settings, "one", b.event("ev-told"), again_told))[1]
    got = run(store.events.for_task(first.task_id))
    assert [(m["message_key"], m["body"]) for m in got] == [
        (f"skills-skipped:{first.task_id}", "not given")
    ]
    assert run(store.events.for_task(again.task_id)) == []


@covers("loops.create")
def test_a_loop_task_with_an_event_is_created_once(store: Store) -> None:
    first, again = loop_task(event_id="ev-loop"), loop_task(event_id="ev-loop")
    settings = LoopSettings(working_dir="/w")
    assert run(store.loops.create(first, settings, "one", b.event("ev-loop"))) == (first, True)
    assert run(store.loops.create(again, settings, "two", b.event("ev-loop"))) == (first, False)
    assert [t.task_id for t in run(store.tasks.listing())] == [first.task_id]
    assert [s.turn for s in run(store.loops.turns(first.task_id))] == [
        UserTurn(text="one", source="prompt")
    ]
    with pytest.raises(UnknownTask):
        run(store.loops.settings(again.task_id))


@covers("loops.append", "loops.turns", "loops.turn_count")
def test_append_adds_turns_after_the_last_seen_and_moves_the_task(store: Store) -> None:
    t = created_loop(store, p.Executing())
    msg = b.message("loop:said", task_id=t.task_id)
    stored, state = run(
        store.loops.append(
            t.task_id,
            [ASKED, ANSWERED],
            after=0,
            to=p.Executing(current_step=1),
            point=None,
            messages=[msg],
        )
    )
    assert [(s.seq, s.turn) for s in stored] == [(1, ASKED), (2, ANSWERED)]
    assert state is S.Executing
    assert run(store.tasks.payload(t.task_id)) == p.Executing(current_step=1)
    assert run(store.loops.turns(t.task_id, after=0)) == stored
    assert run(store.loops.turn_count(t.task_id)) == 3
    assert run(store.events.pending()) == [msg]
    # turns alone, the task left where it is
    note = UserTurn(text="go on", source="continue")
    stored, state = run(store.loops.append(t.task_id, [note], after=2, point=None))
    assert state is None and [(s.seq, s.turn) for s in stored] == [(3, note)]
    # the model ended its turn: the task waits for the owner
    waits = p.WaitingForUser(after=4, next_step=1)
    _, state = run(
        store.loops.append(t.task_id, [AssistantTurn(text="done")], after=3, to=waits, point=None)
    )
    assert state is S.WaitingForUser
    assert run(store.tasks.payload(t.task_id)) == waits


@covers("loops.append")
def test_a_stale_or_illegal_append_is_refused_and_changes_nothing(store: Store) -> None:
    t = created_loop(store, p.Executing())
    run(store.loops.append(t.task_id, [ASKED], after=0, point=None))
    before = run(store.tasks.get(t.task_id))
    turns = run(store.loops.turns(t.task_id))
    msg = b.message("loop:stale")
    # a writer that read an older end of the conversation
    with pytest.raises(StaleConversation):
        run(
            store.loops.append(
                t.task_id, [ANSWERED], after=0, to=p.Synthesizing(), point=None, messages=[msg]
            )
        )
    # a move the state machine refuses takes its turns with it
    with pytest.raises(IllegalTransition):
        run(store.loops.append(t.task_id, [ANSWERED], after=1, to=p.Planning(), point=None))
    assert run(store.loops.turns(t.task_id)) == turns
    assert run(store.tasks.get(t.task_id)) == before
    assert run(store.events.pending()) == []


@covers("loops.append")
def test_an_answer_pauses_the_task_while_the_owners_pause_stands(store: Store) -> None:
    t = created_loop(store, p.Executing())
    asked = run(store.tasks.request_pause(t.task_id, running=lambda: True))
    assert asked == (S.Executing, PauseOutcome.requested)
    msg = b.message("loop:waits", task_id=t.task_id)
    _, state = run(
        store.loops.append(
            t.task_id,
            [ASKED],
            after=0,
            to=p.WaitingForUser(after=1, next_step=1),
            point=None,
            messages=[msg],
            at_pause=p.Executing(current_step=1),
        )
    )
    # paused holding the answer, its turns kept; the messages spoke of the move not made
    assert state is S.Paused
    assert run(store.tasks.payload(t.task_id)) == p.Paused(then=p.Executing(current_step=1))
    assert [s.turn for s in run(store.loops.turns(t.task_id, after=0))] == [ASKED]
    assert run(store.events.pending()) == []
    # with no pause asked for, `at_pause` is not where it goes
    u = created_loop(store, p.Executing())
    waits = p.WaitingForUser(after=1, next_step=1)
    _, moved = run(
        store.loops.append(
            u.task_id,
            [ASKED],
            after=0,
            to=waits,
            point=None,
            messages=[msg],
            at_pause=p.Executing(current_step=1),
        )
    )
    assert moved is S.WaitingForUser and run(store.tasks.payload(u.task_id)) == waits
    assert run(store.events.pending()) == [msg]


@covers("loops.send")
def test_the_owners_message_goes_on_with_the_loop(store: Store) -> None:
    t = created_loop(store, p.WaitingForUser(after=0, next_step=2))
    assert run(store.loops.send(t.task_id, "and the tests")) is S.Executing
    assert run(store.tasks.payload(t.task_id)) == p.Executing(current_step=2)
    (last,) = run(store.loops.turns(t.task_id, after=0))
    assert (last.seq, last.turn) == (1, UserTurn(text="and the tests", source="owner"))
    # a chat message is taken once: delivered again, it is found and changes nothing
    run(store.tasks.transition(t.task_id, p.WaitingForUser(after=1, next_step=2), point=None))
    assert run(store.loops.send(t.task_id, "once", event=("chat-7", "telegram"))) is S.Executing
    assert run(store.loops.send(t.task_id, "once", event=("chat-7", "telegram"))) is S.Executing
    assert [s.turn for s in run(store.loops.turns(t.task_id, after=1))] == [
        UserTurn(text="once", source="owner")
    ]
    assert run(store.adapters.event_task("chat-7")) == t.task_id


@covers("loops.send")
def test_done_ends_the_conversation_through_its_summary(store: Store) -> None:
    t = created_loop(store, p.WaitingForUser(after=0, next_step=1))
    assert run(store.loops.send(t.task_id, "thanks", done=True)) is S.Synthesizing
    assert run(store.tasks.payload(t.task_id)) == p.Synthesizing()
    assert run(store.loops.turn_count(t.task_id)) == 1


@covers("loops.send")
def test_a_message_to_a_loop_that_is_not_waiting_is_refused(store: Store) -> None:
    working = created_loop(store, p.Executing(current_step=1))
    ended = created_loop(store, p.Completed())
    for t, why in ((working, "not waiting"), (ended, "ended")):
        with pytest.raises(TaskStateRefused, match=why):
            run(store.loops.send(t.task_id, "hello?", event=(f"chat-{why}", "telegram")))
        assert run(store.tasks.get(t.task_id)) == t
        assert run(store.loops.turn_count(t.task_id)) == 1
        # the refusal took the event with it: a redelivery is handled as new
        assert run(store.adapters.seen(f"chat-{why}")) is False
    with pytest.raises(UnknownTask):
        run(store.loops.send("nope", "hello?"))


@covers("loops.retry")
def test_retry_discards_the_answer_that_waits_and_asks_again(store: Store) -> None:
    t = created_loop(store, p.Executing())
    waits = p.WaitingForUser(after=1, next_step=1)
    run(store.loops.append(t.task_id, [AssistantTurn(text="meh")], after=0, to=waits, point=None))
    assert run(store.loops.retry(t.task_id)) is S.Executing
    assert run(store.tasks.payload(t.task_id)) == p.Executing(current_step=1)
    (discard,) = run(store.loops.turns(t.task_id, after=1))
    assert (discard.seq, discard.turn) == (2, DiscardTurn(of=1))
    # the model has the turn now: nothing waits to be discarded
    before = run(store.tasks.get(t.task_id))
    with pytest.raises(TaskStateRefused):
        run(store.loops.retry(t.task_id))
    assert run(store.tasks.get(t.task_id)) == before
    assert run(store.loops.turn_count(t.task_id)) == 3
    with pytest.raises(UnknownTask):
        run(store.loops.retry("nope"))
