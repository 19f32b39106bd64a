from __future__ import annotations

import itertools

import pytest

from pfar.errors import IllegalTransition
from pfar.journal.states import TERMINAL, TaskState, check_transition


def test_terminal_states_go_nowhere() -> None:
    for src in TERMINAL:
        for dst in TaskState:
            with pytest.raises(IllegalTransition, match=f"cannot go from {src.value}"):
                check_transition("t1", src, dst)


def test_pipeline_order_is_legal() -> None:
    path = [
        TaskState.Extracting,
        TaskState.Planning,
        TaskState.Executing,
        TaskState.Synthesizing,
        TaskState.Completed,
    ]
    for src, dst in itertools.pairwise(path):
        check_transition("t1", src, dst)


def test_error_names_task_and_both_states() -> None:
    with pytest.raises(IllegalTransition) as info:
        check_transition("abc", TaskState.Planning, TaskState.Completed)
    assert str(info.value) == "task abc: cannot go from Planning to Completed"
