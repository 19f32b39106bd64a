"""The operator API's typed wire: every op's reply is read back into the record its verb
returned (`parse(dump(x)) == x`), a reply that does not fit is refused naming the
field, and the published JSON Schema is the one the records give."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pfar.errors import BadReply
from pfar.journal.json_text import JsonValue
from pfar.kernel.api.requests import COMMANDS, TASK_SHOW
from pfar.kernel.api.schema import api_schema
from pfar.kernel.api.timeline_entries import Entry, TimelineEntry
from pfar.kernel.api.wire import Wire

DOCS = Path(__file__).resolve().parents[2] / "docs"

_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
st.register_type_strategy(JsonValue, _json)  # type: ignore[arg-type]


def _records(shape: Any) -> st.SearchStrategy[Any]:
    return st.from_type(shape)


@pytest.mark.parametrize("op", sorted(COMMANDS))
def test_every_reply_reads_back_as_the_record_its_verb_returned(op: str) -> None:
    command = COMMANDS[op]

    @settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
    @given(_records(command.reply.shape))
    def round_trip(record: Any) -> None:
        try:  # as it crosses the socket (a cost is never NaN: JSON has none)
            text = json.dumps(command.reply.dump(record), allow_nan=False)
        except ValueError:
            assume(False)
        sent = json.loads(text)
        assert command.reply.parse(sent, op) == record

    round_trip()


@pytest.mark.parametrize("kind", typing.get_args(Entry), ids=lambda k: k.__name__)
def test_every_kind_of_timeline_entry_reads_back_as_itself(kind: type[Any]) -> None:
    """The timeline's closed union, kind by kind: the discriminator picks the record."""
    wire: Wire[Any] = Wire(tuple[TimelineEntry, ...])

    @settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(_records(kind), min_size=1, max_size=3))
    def round_trip(entries: list[Any]) -> None:
        try:
            text = json.dumps(wire.dump(tuple(entries)), allow_nan=False)
        except ValueError:
            assume(False)
        back = wire.parse(json.loads(text), "task_show")
        assert back == tuple(entries) and {type(e) for e in back} == {kind}

    round_trip()


def test_a_reply_that_does_not_fit_is_refused_naming_the_field() -> None:
    with pytest.raises(
        BadReply, match=r"'task_show' is not a TaskTimeline \(task\.task_id: Field required"
    ):
        TASK_SHOW.reply.parse({"task": {"state": 3}}, "task_show")
    with pytest.raises(BadReply, match=r"\(0: Input should be a valid integer"):
        Wire(list[int]).parse(["1"], "x")  # "1" is not 1: never converted
    assert Wire(list[int]).parse([1], "x") == [1]


def test_the_published_schema_is_the_one_the_records_give() -> None:
    published = json.loads((DOCS / "operator-api.schema.json").read_text())
    assert published == api_schema(), (
        "docs/operator-api.schema.json is out of date: "
        "python -m pfar.kernel.api.schema > docs/operator-api.schema.json"
    )
    assert set(published["ops"]) == set(COMMANDS)


def test_no_reply_is_untyped() -> None:
    for op, command in COMMANDS.items():
        assert command.reply.shape is not Any, op
        assert typing.get_origin(command.reply.shape) is not dict, op
