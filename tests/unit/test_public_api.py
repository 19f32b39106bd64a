from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import json
import subprocess
import sys
import types
import typing
from typing import Any

import pytest
from pydantic import TypeAdapter

import pfar
from pfar import HomeReader, Operator
from pfar.errors import BadRequest
from pfar.journal import TaskState
from pfar.kernel import kernel as kernel_module
from pfar.kernel.api.arguments import SubmitArgs, TasksArgs
from pfar.kernel.api.requests import COMMANDS


def test_public_api_is_exactly_all() -> None:
    public = {
        name
        for name, value in vars(pfar).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert len(set(pfar.__all__)) == len(pfar.__all__)  # ruff (RUF022) keeps it sorted
    assert set(pfar.__all__) == public


def test_the_python_api_loads_no_command_line_code() -> None:
    """`import pfar` is the kernel's API: the CLI is a shell over it, never under it."""
    code = "import sys, pfar; print(sorted(m for m in sys.modules if m.startswith('pfar.cli')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


# -- the operator API: typed verbs, records with to_json, one table of socket commands ----


# not verbs: closing a reader, and the same operator for another actor
_NOT_VERBS = frozenset({"close", "acting_as"})


def _verbs(cls: type) -> dict[str, Any]:
    return {
        name: fn
        for name, fn in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(fn) and name not in _NOT_VERBS
    }


def test_every_verb_of_the_operator_api_returns_a_typed_record() -> None:
    verbs = {**_verbs(HomeReader), **_verbs(Operator)}
    assert {"tasks", "timeline", "questions", "answer", "cancel", "pause", "resume"} <= set(verbs)
    for name, fn in verbs.items():
        names = {**fn.__globals__, **vars(kernel_module)}  # KernelStatistics: TYPE_CHECKING
        returned = typing.get_type_hints(fn, globalns=names)["return"]
        # a list of records, or a stream of them (attach)
        if typing.get_origin(returned) in (list, collections.abc.AsyncIterator):
            (returned,) = typing.get_args(returned)
        if returned in (type(None), str):  # wait_idle, request_shutdown; trace is a trace.md
            continue
        # a record, or a closed union of them (what a followed conversation yields)
        union = typing.get_origin(returned) in (types.UnionType, typing.Union)
        for record in typing.get_args(returned) if union else (returned,):
            assert dataclasses.is_dataclass(record), (name, record)
            assert record.__dataclass_params__.frozen, (name, record)  # type: ignore[union-attr]
        TypeAdapter(returned).json_schema(mode="serialization")  # one schema (wire.py)


def _sample(hint: Any) -> Any:
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        return (_sample(typing.get_args(hint)[0]),)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint))
    return {str: "abcd1234", int: 7, bool: True}[hint]


@pytest.mark.parametrize("op", sorted(COMMANDS))
def test_each_socket_command_parses_what_a_client_sends_for_it(op: str) -> None:
    command = COMMANDS[op]
    assert command.op == op
    args = command.arguments
    hints = typing.get_type_hints(args)
    arguments = args(**{f.name: _sample(hints[f.name]) for f in dataclasses.fields(args)})
    sent = json.loads(json.dumps(command.request(arguments)))  # what crosses the socket
    assert sent["op"] == op
    assert command.parse(sent) == arguments


def test_a_request_field_of_the_wrong_type_is_refused_by_name_never_converted() -> None:
    refusals: dict[str, tuple[dict[str, Any], str]] = {
        "answer": (
            {"approval_id": 1, "decision": "approve"},
            "approval_id: must be a string, not int",
        ),
        "credential": ({"prompt_id": "abcd1234"}, "secret: is required"),
        "submit": (
            {"template": "t", "text": "x", "event_id": True},
            "event_id: must be a string, not bool",
        ),
        "tasks": ({"limit": True}, "limit: must be an integer, not bool"),
    }
    for op, (body, message) in refusals.items():
        with pytest.raises(BadRequest) as refused:
            COMMANDS[op].parse(body)
        assert str(refused.value) == message
    with pytest.raises(BadRequest) as refused:
        COMMANDS["tasks"].parse({"states": ["Completed", "Done"]})
    assert str(refused.value).startswith("states[1]: 'Done' is not one of Extracting, ")
    with pytest.raises(BadRequest, match=r"^states: must be a list, not str$"):
        COMMANDS["tasks"].parse({"states": "Completed"})
    with pytest.raises(BadRequest, match=r"^answered: must be true or false, not str$"):
        COMMANDS["approvals"].parse({"answered": "yes"})
    # a null or missing field with a default takes it; fields the record lacks are ignored
    parsed = COMMANDS["submit"].parse(
        {"op": "submit", "template": "t", "text": "x", "adapter": None, "z": 1}
    )
    assert parsed == SubmitArgs("t", "x", event_id=None, adapter="cli")
    assert COMMANDS["tasks"].parse({"states": ["Paused"]}) == TasksArgs((TaskState.Paused,), 50)
