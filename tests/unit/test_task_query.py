"""The task list's filter and cursor as callers give them: parsed from the socket's JSON,
checked once, and refused by field name (nothing is read for a refused one)."""

from __future__ import annotations

import base64

import pytest

from pfar.errors import BadRequest
from pfar.journal import TaskKind, TaskState
from pfar.journal.task_pages import TaskCursor, TaskFilter, escape_like
from pfar.kernel.api import task_query
from pfar.kernel.api.arguments import TaskPageArgs
from pfar.kernel.api.requests import COMMANDS

PAGE = COMMANDS["task_page"]


def test_the_socket_op_parses_every_filter_and_refuses_unknown_states_and_kinds() -> None:
    args = PAGE.parse(
        {
            "op": "task_page",
            "states": ["Failed", "Paused"],
            "kind": "loop",
            "template": "mail",
            "since": "2030-05-01T00:00:00Z",
            "text": "50%",
            "cursor": "abc",
            "limit": 20,
        }
    )
    assert args == TaskPageArgs(
        (TaskState.Failed, TaskState.Paused),
        TaskKind.loop,
        "mail",
        "2030-05-01T00:00:00Z",
        None,
        "50%",
        "abc",
        20,
    )
    assert args.filter() == TaskFilter(
        (TaskState.Failed, TaskState.Paused),
        TaskKind.loop,
        "mail",
        "2030-05-01T00:00:00Z",
        None,
        "50%",
    )
    with pytest.raises(BadRequest, match=r"^states\[0\]: 'Done' is not one of "):
        PAGE.parse({"states": ["Done"]})
    with pytest.raises(BadRequest, match=r"^kind: 'robot' is not one of pipeline, workflow, loop"):
        PAGE.parse({"kind": "robot"})
    with pytest.raises(BadRequest, match=r"^since: must be a string, not int$"):
        PAGE.parse({"since": 1})


@pytest.mark.parametrize(
    ("given", "field"),
    [
        (TaskFilter(created_since="yesterday"), "since"),
        (TaskFilter(created_until="2030-13-01T00:00:00Z"), "until"),
        (TaskFilter(created_since="2030-05-01T00:00:00"), "since"),  # no zone
        (
            TaskFilter(created_since="2030-05-02T00:00:00Z", created_until="2030-05-01"),
            "until",
        ),
        (TaskFilter(template_id=""), "template"),
        (TaskFilter(text="x" * (task_query.MAX_TEXT + 1)), "text"),
        (TaskFilter(created_until="9999-12-31T23:00:00-05:00"), "until"),  # past year 9999
    ],
)
def test_a_bad_filter_is_refused_naming_its_field(given: TaskFilter, field: str) -> None:
    with pytest.raises(BadRequest) as refused:
        task_query.checked(given)
    assert refused.value.field == field


def test_times_are_read_as_the_journal_writes_them() -> None:
    got = task_query.checked(
        TaskFilter(created_since="2030-05-01T14:00:00+02:00", created_until="2030-05-03", text="")
    )
    assert got.created_since == "2030-05-01T12:00:00.000000Z"
    assert got.created_until == "2030-05-03T00:00:00.000000Z"
    assert got.text is None  # an empty piece of text filters nothing


def test_a_cursor_reads_back_and_anything_else_is_refused_naming_cursor() -> None:
    cursor = TaskCursor("2030-05-01T12:00:00.000001Z", "0b6f6a52-9d4e-4c4e-9e7c-0a1b2c3d4e5f")
    assert task_query.cursor(cursor.encode()) == cursor
    assert task_query.cursor(None) is None

    def enc(raw: str) -> str:
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    for bad in (
        "",
        "!!!",
        "x" * 500,
        enc("no newline"),
        enc("2030-05-01T12:00:00Z\n' OR 1=1 --"),
        enc("not a time\nabc"),
        enc("2030-05-01T12:00:00\nabc"),  # no zone
        base64.urlsafe_b64encode(b"\xff\xfe\n").decode(),
        cursor.encode()[:-3],  # cut short
        cursor.encode().replace(".", "x."),
    ):
        with pytest.raises(BadRequest) as refused:
            task_query.cursor(bad)
        assert refused.value.field == "cursor", bad


def test_like_patterns_escape_their_wildcards() -> None:
    assert escape_like("50%_a\\b") == "%50\\%\\_a\\\\b%"


def test_an_edited_cursor_is_refused_even_when_it_still_reads_as_one() -> None:
    good = TaskCursor("2030-05-01T12:00:00.000001Z", "0b6f6a52-9d4e-4c4e-9e7c-0a1b2c3d4e5f")
    body, check = good.encode().split(".")
    moved = TaskCursor("2031-05-01T12:00:00.000001Z", good.task_id).encode().split(".")[0]
    for bad in (f"{moved}.{check}", body, f"{body}.", f"{body}.{check[:-1]}"):
        with pytest.raises(BadRequest, match=r"^cursor: "):
            task_query.cursor(bad)


def test_a_refused_day_is_quoted_as_it_was_given() -> None:
    with pytest.raises(BadRequest) as refused:
        task_query.checked(TaskFilter(created_since="2030-13-01"))
    assert "'2030-13-01' is no RFC 3339 time" in str(refused.value)
