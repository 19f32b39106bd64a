"""Activity by day over a window `[since, until)`: tasks created by kind, steps started,
model calls by model and by template; a day is its UTC date, and `until` is not in it."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

from pfar.journal import TaskKind
from pfar.journal import payloads as p
from pfar.journal.activity_sql import (
    CallUsage,
    ModelDay,
    StepsStarted,
    StoredActivity,
    TasksCreated,
    TemplateDay,
)
from pfar.journal.store import Store

from . import builders as b
from .backends import Backend
from .helpers import llm_call, run, settle
from .verbs import covers

D1, D2, D3, D4 = (date(2001, 3, d) for d in (1, 2, 3, 4))


def _task(store: Store, at: str, template: str = "tpl", kind: TaskKind = TaskKind.pipeline) -> str:
    t = b.task(payload=p.Executing(current_step=0), updated_at=at)
    t = replace(t, template_id=template, kind=kind)
    got, made = run(store.tasks.create(t))
    assert made and got.created_at == at
    return t.task_id


def _call(store: Store, task_id: str, at: str, **kw: object) -> None:
    store.tasks.record_llm_call(llm_call(task_id, at=at, **kw))  # type: ignore[arg-type]


@covers("tasks.activity")
def test_an_empty_window_and_days_with_nothing_are_absent(store: Store) -> None:
    empty = run(store.tasks.activity(D1, D4))
    assert empty == StoredActivity(D1, D4, (), (), (), ())
    _task(store, "2001-03-02T12:00:00.000000Z")
    # a window that ends where the day begins, and one that is no window at all
    assert run(store.tasks.activity(D1, D2)).tasks == ()
    assert run(store.tasks.activity(D3, D1)).tasks == ()
    found = run(store.tasks.activity(D1, D4))
    assert found.tasks == (TasksCreated(D2, TaskKind.pipeline, 1),)  # no row for D1, D3


@covers("tasks.activity", "tasks.create", "tasks.record_llm_call", "tasks.step_started")
def test_midnight_is_its_own_day_and_until_is_left_out(store: Store) -> None:
    first = _task(store, "2001-03-01T00:00:00.000000Z")
    _task(store, "2001-03-01T23:59:59.999999Z")
    _task(store, "2001-03-02T00:00:00.000000Z")
    _task(store, "2001-02-28T23:59:59.999999Z")  # the day before the window
    _task(store, "2001-03-03T00:00:00.000000Z")  # the window's `until`: left out
    step = replace(b.step(first, 0), started_at="2001-03-02T00:00:00.000000Z")
    run(store.tasks.step_started(step))
    late = replace(b.step(first, 1), started_at="2001-03-03T00:00:00.000000Z")
    run(store.tasks.step_started(late))
    _call(store, first, "2001-03-01T00:00:00.000000Z", input_tokens=3)
    _call(store, first, "2001-03-03T00:00:00.000000Z", input_tokens=100)
    settle(store)

    found = run(store.tasks.activity(D1, D3))
    assert found.tasks == (
        TasksCreated(D1, TaskKind.pipeline, 2),
        TasksCreated(D2, TaskKind.pipeline, 1),
    )
    assert found.steps == (StepsStarted(D2, 1),)
    assert found.models == (ModelDay(D1, "scripted", "m", CallUsage(1, 3, 1, 0.0)),)


@covers("tasks.activity", "tasks.record_llm_call")
def test_calls_are_summed_by_model_and_by_template_and_a_task_on_two_days_counts_on_each(
    store: Store,
) -> None:
    note = _task(store, "2001-03-01T08:00:00.000000Z", template="note")
    mail = _task(store, "2001-03-01T09:00:00.000000Z", template="mail")
    loop = _task(store, "2001-03-02T09:00:00.000000Z", template="loop", kind=TaskKind.loop)
    _call(store, note, "2001-03-01T08:00:01.000000Z", model="small", input_tokens=10,
          output_tokens=2, cost_usd=0.25)  # fmt: skip
    _call(store, note, "2001-03-01T08:00:02.000000Z", model="big", input_tokens=20,
          output_tokens=4, cost_usd=1.0)  # fmt: skip
    _call(store, mail, "2001-03-01T09:00:01.000000Z", model="small", input_tokens=5,
          output_tokens=1, cost_usd=0.125)  # fmt: skip
    # the note's task makes a call the next day: it counts on that day
    _call(store, note, "2001-03-02T07:00:00.000000Z", model="small", input_tokens=7,
          output_tokens=7, cost_usd=0.5)  # fmt: skip
    _call(store, loop, "2001-03-02T10:00:00.000000Z", provider="openai", model="small",
          input_tokens=1, output_tokens=1, cost_usd=2.0)  # fmt: skip
    _call(store, "a-task-pruned-long-ago", "2001-03-02T11:00:00.000000Z", model="small")
    settle(store)

    found = run(store.tasks.activity(D1, D4))
    assert found.tasks == (
        TasksCreated(D1, TaskKind.pipeline, 2),
        TasksCreated(D2, TaskKind.loop, 1),
    )
    assert found.models == (
        ModelDay(D1, "scripted", "big", CallUsage(1, 20, 4, 1.0)),
        ModelDay(D1, "scripted", "small", CallUsage(2, 15, 3, 0.375)),
        ModelDay(D2, "openai", "small", CallUsage(1, 1, 1, 2.0)),
        ModelDay(D2, "scripted", "small", CallUsage(2, 8, 8, 0.5)),
    )
    by_template = {(t.day, t.template_id): t.usage for t in found.templates}
    assert by_template == {
        (D1, "mail"): CallUsage(1, 5, 1, 0.125),
        (D1, "note"): CallUsage(2, 30, 6, 1.25),
        (D2, "loop"): CallUsage(1, 1, 1, 2.0),
        (D2, "note"): CallUsage(1, 7, 7, 0.5),
        (D2, None): CallUsage(1, 1, 1, 0.0),  # its task is gone: no template
    }
    assert all(isinstance(t, TemplateDay) for t in found.templates)
    # a window of one day sees that day's calls only
    assert run(store.tasks.activity(D2, D3)).models == found.models[2:]


@covers("tasks.activity")
def test_a_window_reads_the_time_indexes_not_the_history(store: Store, backend: Backend) -> None:
    for day in range(1, 28):
        t = _task(store, f"2001-02-{day:02d}T10:00:00.000000Z")
        _call(store, t, f"2001-02-{day:02d}T10:00:01.000000Z")
    settle(store)
    backend.check_activity_reads_time_indexes(store)
    assert run(store.tasks.activity(D1, D4)).models == ()
