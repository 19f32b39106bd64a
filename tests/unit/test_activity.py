"""The operator API's `activity`: a window of whole UTC days ending today, every day
present and zero-filled, with the window's totals by model and by template."""

from __future__ import annotations

from datetime import date

import pytest

from pfar.errors import BadRequest
from pfar.journal import TaskKind
from pfar.journal.activity_sql import (
    CallUsage,
    ModelDay,
    StepsStarted,
    StoredActivity,
    TasksCreated,
    TemplateDay,
)
from pfar.kernel.api.activity import ModelCost, TemplateCost, shaped, window

D1, D2, D3 = date(2001, 3, 1), date(2001, 3, 2), date(2001, 3, 3)


def test_a_window_is_whole_days_ending_with_today() -> None:
    assert window(1, D2) == (D2, D3)
    assert window(2, D3) == (D2, date(2001, 3, 4))
    assert window(366, D1)[0] == date(2000, 3, 1)


@pytest.mark.parametrize("days", [0, -1, 367, 10_000, True, "7", 1.5])
def test_a_bad_number_of_days_is_refused_naming_days(days: object) -> None:
    with pytest.raises(BadRequest, match=r"^days: must be 1 to 366") as caught:
        window(days, D1)  # type: ignore[arg-type]
    assert caught.value.field == "days"


def test_every_day_is_present_and_zero_filled_with_totals_by_model_and_template() -> None:
    stored = StoredActivity(
        since=D1,
        until=date(2001, 3, 4),
        tasks=(TasksCreated(D1, TaskKind.pipeline, 2), TasksCreated(D1, TaskKind.loop, 1)),
        steps=(StepsStarted(D3, 4),),
        models=(
            ModelDay(D1, "scripted", "m", CallUsage(2, 10, 4, 0.5)),
            ModelDay(D3, "scripted", "m", CallUsage(1, 5, 1, 0.25)),
            ModelDay(D3, "openai", "gpt", CallUsage(1, 1, 1, 3.0)),
        ),
        templates=(
            TemplateDay(D1, "note", CallUsage(2, 10, 4, 0.5)),
            TemplateDay(D3, "note", CallUsage(1, 5, 1, 0.25)),
            TemplateDay(D3, None, CallUsage(1, 1, 1, 3.0)),
        ),
    )
    found = shaped(stored)
    assert (found.since, found.until) == ("2001-03-01", "2001-03-04")
    assert [d.day for d in found.days] == ["2001-03-01", "2001-03-02", "2001-03-03"]
    first, empty, third = found.days
    assert first.tasks == 3
    assert first.tasks_by_kind == {"pipeline": 2, "workflow": 0, "loop": 1}
    assert (first.calls, first.input_tokens, first.output_tokens) == (2, 10, 4)
    assert empty.tasks_by_kind == {"pipeline": 0, "workflow": 0, "loop": 0}
    assert (empty.tasks, empty.steps, empty.calls, empty.cost_usd) == (0, 0, 0, 0.0)
    assert (empty.models, empty.templates) == ((), ())
    assert (third.steps, third.calls, third.cost_usd) == (4, 2, 3.25)
    assert found.models == (  # the most costly first
        ModelCost("openai", "gpt", 1, 1, 1, 3.0),
        ModelCost("scripted", "m", 3, 15, 5, 0.75),
    )
    assert found.templates == (
        TemplateCost(None, 1, 1, 1, 3.0),
        TemplateCost("note", 3, 15, 5, 0.75),
    )
    assert found.cost_usd == 3.75
