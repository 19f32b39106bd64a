"""The spend caps' decisions and the price list: when a call would reach a cap (what was
spent plus what the next call may cost), what the owner's additions do, how the
question reads, and how a model finds its price."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pfar.journal.costs_sql import Spent
from pfar.llm.price_table import BUILT_IN, Price, price_of
from pfar.runners.spend_caps import CapReached, NextCall, Raised, periods, reached

NOTHING = NextCall(0.0, 0)


def test_a_cap_is_reached_when_spent_and_the_next_call_come_to_it() -> None:
    spent = Spent(calls=2, input_tokens=100, output_tokens=20, cost_usd=4.0)
    assert reached("task", "t", spent, NextCall(0.5, 10), 5.0, None, Raised()) is None
    cap = reached("task", "t", spent, NextCall(1.0, 10), 5.0, None, Raised())
    assert cap == CapReached("task", "t", "usd", 4.0, 5.0, 1.0, 5.0)
    # already past it: reached, whatever the next call costs
    assert reached("task", "t", Spent(cost_usd=6.0), NOTHING, 5.0, None, Raised()) is not None


def test_tokens_count_in_and_out_and_dollars_are_checked_first() -> None:
    spent = Spent(calls=1, input_tokens=700, output_tokens=200, cost_usd=9.0)
    tokens = reached("day", "2030-01-02", spent, NextCall(0.0, 100), None, 1000, Raised())
    assert tokens == CapReached("day", "2030-01-02", "tokens", 900, 1000, 100, 1000)
    both = reached("day", "2030-01-02", spent, NextCall(1.0, 100), 10.0, 1000, Raised())
    assert both is not None and both.unit == "usd"
    assert reached("task", "t", spent, NextCall(0.0, 99), None, 1000, Raised()) is None


def test_no_cap_is_never_reached() -> None:
    huge = Spent(calls=10**6, input_tokens=10**12, output_tokens=10**12, cost_usd=1e9)
    assert reached("month", "2030-01", huge, NextCall(1e9, 10**12), None, None, Raised()) is None


def test_each_continue_raises_the_cap_by_its_amount_in_its_unit() -> None:
    raised = Raised().plus("usd", 5.0).plus("usd", 5.0).plus("tokens", 1000)
    assert raised == Raised(10.0, 1000)
    spent = Spent(cost_usd=12.0, input_tokens=1500)
    assert reached("task", "t", spent, NextCall(1.0, 10), 5.0, 2000, raised) is None
    cap = reached("task", "t", spent, NextCall(3.0, 10), 5.0, 2000, raised)
    assert cap is not None and (cap.cap, cap.more) == (15.0, 5.0)


@given(
    spent=st.floats(0, 1e6),
    nxt=st.floats(0, 1e4),
    cap=st.floats(0.01, 1e6),
    raises=st.integers(0, 5),
)
def test_a_call_goes_out_only_while_it_stays_under_the_raised_cap(
    spent: float, nxt: float, cap: float, raises: int
) -> None:
    raised, added = Raised(), 0.0
    for _ in range(raises):
        raised, added = raised.plus("usd", cap), added + cap  # summed as the gate sums
    found = reached("task", "t", Spent(cost_usd=spent), NextCall(nxt, 0), cap, None, raised)
    assert (found is None) == (spent + nxt < cap + added)


def test_the_question_says_spent_of_cap_and_how_much_more() -> None:
    task = CapReached("task", "t", "usd", 4.0, 5.0, 1.0, 5.0)
    assert task.question("note (ab12cd34)") == (
        "Task note (ab12cd34) has spent $4.00 of its cap of $5.00, and its next model call "
        "may cost up to $1.00: continue with $5.00 more, or fail the task?"
    )
    small = CapReached("task", "t", "usd", 0.0075, 0.015, 0.0078, 0.015)
    assert "spent $0.0075 of its cap of $0.0150" in small.question("t")
    day = CapReached("day", "2030-01-02", "tokens", 9000, 10000, 1500, 10000)
    assert day.question("x") == (
        "Today has spent 9,000 tokens of the day's cap of 10,000 tokens (UTC 2030-01-02; "
        "task x waits, and so will every task's next model call: `pfar approvals` lists "
        "them), and its next model call may cost up to 1,500 tokens: continue with "
        "10,000 tokens more, or fail the task?"
    )


def test_periods_are_utc_days_and_months() -> None:
    late = datetime(2030, 1, 31, 23, 59, 59, tzinfo=UTC)
    assert periods(late) == ("2030-01-31", "2030-01")


@pytest.mark.parametrize(
    ("model", "price"),
    [
        ("claude-sonnet-4-5", Price(3.0, 15.0)),
        ("claude-sonnet-4-5-20250929", Price(3.0, 15.0)),  # a dated snapshot
        ("claude-opus-4-1-20250805", Price(15.0, 75.0)),  # not claude-opus-4's by accident
        ("gpt-4o-mini-2024-07-18", Price(0.15, 0.6)),  # the longest name it starts with
        ("gpt-4o-2024-08-06", Price(2.5, 10.0)),
        ("gpt-4.1-nano", Price(0.1, 0.4)),
    ],
)
def test_a_model_finds_its_price_by_name_or_by_the_longest_name_it_starts_with(
    model: str, price: Price
) -> None:
    assert price_of(model) == price


def test_config_wins_and_a_model_in_neither_has_no_price() -> None:
    mine = {"claude-sonnet-4-5": Price(1.0, 2.0), "my-local-model": Price(0.0, 0.0)}
    assert price_of("claude-sonnet-4-5-20250929", mine) == Price(1.0, 2.0)
    assert price_of("my-local-model", mine) == Price(0.0, 0.0)  # priced: free, not unknown
    assert price_of("my-local-model") is None
    assert price_of("gpt-4ox") is None  # a name that only looks alike
    assert price_of("scripted") is None


def test_every_built_in_price_is_dollars_per_million_tokens() -> None:
    for name, price in BUILT_IN.items():
        assert 0 < price.input <= price.output <= 100, name
    assert Price(3.0, 15.0).cost(1_000_000, 100_000) == pytest.approx(4.5)
