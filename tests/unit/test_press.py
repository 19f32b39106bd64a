"""A button's callback data: the question and the option, read back as they were sent."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pfar.adapters.channel import Press

IDS = st.text("0123456789abcdef-", min_size=1, max_size=36)
OPTIONS = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)


@given(IDS, OPTIONS)
def test_a_press_reads_back_as_it_was_sent_whatever_its_option_holds(
    question: str, option: str
) -> None:
    assert Press.parse(Press(question, option).data()) == Press(question, option)


def test_an_option_with_colons_is_read_whole() -> None:
    assert Press.parse("q:abc123:at:09:30") == Press("abc123", "at:09:30")


@pytest.mark.parametrize("data", ["", "q", "q:", "q::x", "q:abc:", "x:abc:approve", 42, None])
def test_what_is_not_a_press_of_pfars_is_none(data: object) -> None:
    assert Press.parse(data) is None
