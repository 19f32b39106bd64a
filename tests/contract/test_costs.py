"""Spending over a window of days `[since, until)` (either side open): model calls summed
by day, model, template or task, most costly first (by day: oldest first); calls of a
model with no price count their tokens and say so; a task's and a window's sums (what
the spend caps read)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pfar.errors import BadRequest
from pfar.journal import payloads as p
from pfar.journal.costs_sql import CostRow, Spent
from pfar.journal.records import rfc3339
from pfar.journal.store import Store
from pfar.kernel.api.costs import costs as api_costs

from . import builders as b
from .helpers import llm_call, run, settle
from .verbs import covers


def _task(store: Store, at: str, template: str) -> str:
    t = replace(b.task(payload=p.Executing(current_step=0), updated_at=at), template_id=template)
    run(store.tasks.create(t))
    return t.task_id


def _calls(store: Store) -> tuple[str, str]:
    note = _task(store, "2001-03-01T08:00:00.000000Z", "note")
    mail = _task(store, "2001-03-01T09:00:00.000000Z", "mail")
    for task_id, at, model, tin, tout, usd, priced in (
        (note, "2001-03-01T08:00:01.000000Z", "small", 10, 2, 0.25, True),
        (note, "2001-03-01T08:00:02.000000Z", "big", 20, 4, 1.0, True),
        (mail, "2001-03-01T23:59:59.999999Z", "small", 5, 1, 0.125, True),
        (mail, "2001-03-02T00:00:00.000000Z", "local-llm", 100, 50, 0.0, False),
        ("a-task-pruned-long-ago", "2001-03-03T11:00:00.000000Z", "small", 1, 1, 0.5, True),
    ):
        store.tasks.record_llm_call(
            llm_call(  # type: ignore[arg-type]
                task_id,
                at=at,
                model=model,
                input_tokens=tin,
                output_tokens=tout,
                cost_usd=usd,
                priced=priced,
            )
        )
    settle(store)
    return note, mail


@covers("tasks.costs", "tasks.record_llm_call")
def test_costs_by_day_model_template_and_task_name_the_models_with_no_price(
    store: Store,
) -> None:
    note, mail = _calls(store)
    by_day = run(store.tasks.costs("day", None, None))
    assert by_day.rows == (
        CostRow("2001-03-01", Spent(3, 35, 7, 1.375, 0)),
        CostRow("2001-03-02", Spent(1, 100, 50, 0.0, 1)),
        CostRow("2001-03-03", Spent(1, 1, 1, 0.5, 0)),
    )
    assert by_day.unpriced_models == ("local-llm",)
    by_model = run(store.tasks.costs("model", None, None))
    assert by_model.rows == (
        CostRow("big", Spent(1, 20, 4, 1.0, 0)),
        CostRow("small", Spent(3, 16, 4, 0.875, 0)),
        CostRow("local-llm", Spent(1, 100, 50, 0.0, 1)),
    )
    by_template = run(store.tasks.costs("template", None, None))
    assert by_template.rows == (
        CostRow("note", Spent(2, 30, 6, 1.25, 0)),
        CostRow(None, Spent(1, 1, 1, 0.5, 0)),  # its task is gone: no template
        CostRow("mail", Spent(2, 105, 51, 0.125, 1)),
    )
    by_task = run(store.tasks.costs("task", None, None))
    assert [r.key for r in by_task.rows] == [note, "a-task-pruned-long-ago", mail]


@covers("tasks.costs")
def test_a_window_takes_its_first_day_and_leaves_out_its_until(store: Store) -> None:
    _calls(store)
    one_day = run(store.tasks.costs("model", "2001-03-01", "2001-03-02"))
    assert one_day.rows == (
        CostRow("big", Spent(1, 20, 4, 1.0, 0)),
        CostRow("small", Spent(2, 15, 3, 0.375, 0)),
    )
    assert one_day.unpriced_models == ()
    since = run(store.tasks.costs("day", "2001-03-02", None))
    assert [r.key for r in since.rows] == ["2001-03-02", "2001-03-03"]
    assert since.unpriced_models == ("local-llm",)
    until = run(store.tasks.costs("day", None, "2001-03-02"))
    assert [r.key for r in until.rows] == ["2001-03-01"]
    assert run(store.tasks.costs("task", "2001-04-01", None)).rows == ()


@covers("tasks.spent_by_task", "tasks.spent_between", "tasks.record_llm_call")
def test_what_a_task_and_a_window_spent(store: Store) -> None:
    note, mail = _calls(store)
    assert run(store.tasks.spent_by_task(note)) == Spent(2, 30, 6, 1.25, 0)
    assert run(store.tasks.spent_by_task(mail)) == Spent(2, 105, 51, 0.125, 1)
    assert run(store.tasks.spent_by_task("no-such-task")) == Spent(0, 0, 0, 0.0, 0)
    assert run(store.tasks.spent_between("2001-03-01", "2001-03-02")) == Spent(3, 35, 7, 1.375)
    # a month, by its name: "2001-03" sorts before each of its days' stamps
    assert run(store.tasks.spent_between("2001-03", "2001-04")).calls == 5
    assert run(store.tasks.spent_between("2001-02", "2001-03")) == Spent()


@covers("tasks.spent_by_tasks", "tasks.record_llm_call")
def test_what_each_task_of_a_page_spent(store: Store) -> None:
    note, mail = _calls(store)
    found = run(store.tasks.spent_by_tasks([note, "no-such-task", mail]))
    assert found == {note: Spent(2, 30, 6, 1.25, 0), mail: Spent(2, 105, 51, 0.125, 1)}
    assert run(store.tasks.spent_by_tasks([])) == {}
    # more ids than one read takes: read a few hundred at a time
    many = [f"t{i}" for i in range(1200)] + [mail]
    assert run(store.tasks.spent_by_tasks(many)) == {mail: Spent(2, 105, 51, 0.125, 1)}


@covers("tasks.spent_between", "tasks.cleanup", "tasks.fail", "tasks.record_llm_call")
def test_a_days_spending_outlives_the_pruning_of_its_tasks(store: Store) -> None:
    t = _task(store, "2001-03-01T08:00:00.000000Z", "note")
    run(store.tasks.fail(t, "done with"))
    store.tasks.record_llm_call(
        llm_call(t, at="2001-03-01T08:00:01.000000Z", cost_usd=3.0)  # type: ignore[arg-type]
    )
    settle(store)
    later = rfc3339(datetime.now(UTC) + timedelta(days=1))
    while run(store.tasks.cleanup(later, later)) > 0:
        pass
    assert run(store.tasks.spent_by_task(t)) == Spent()  # its calls went with it
    assert run(store.tasks.spent_between("2001-03-01", "2001-03-02")) == Spent(1, 1, 1, 3.0)


def test_the_operators_window_takes_the_first_and_last_days_there_are(store: Store) -> None:
    # the operator API's reading of --since and --until: the last day (9999-12-31) has no
    # next day to end the window at, and is read as "up to the end", not an overflow
    _calls(store)
    every = run(api_costs(store, "day", "0001-01-01", "9999-12-31"))
    assert [line.key for line in every.lines] == ["2001-03-01", "2001-03-02", "2001-03-03"]
    assert every.until == "9999-12-31"
    assert run(api_costs(store, "day", "9999-12-31", "9999-12-31")).lines == ()
    for since, until, field in (
        ("2001-13-01", None, "since"),
        (None, "tomorrow", "until"),
        ("2001-03-02", "2001-03-01", "until"),
    ):
        with pytest.raises(BadRequest) as err:
            run(api_costs(store, "day", since, until))
        assert err.value.field == field
