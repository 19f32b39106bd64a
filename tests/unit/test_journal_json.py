"""The journal's JSON columns: written with orjson, read with orjson where it reads what
json reads, and with json where it would not (an integer past 64 bits, NaN, a lone
surrogate). Whatever the reader, a column reads back as json.loads reads it."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pfar.journal.records import dumps, loads

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1 is not 1.0 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@settings(max_examples=300)
@given(values)
def test_a_column_reads_back_as_json_reads_it(value: Any) -> None:
    text = dumps(value)
    assert _same(loads(text), json.loads(text))
    assert _same(loads(text), value) or isinstance(value, float)  # -0.0 == 0.0 and the like


@pytest.mark.parametrize(
    "text",
    [
        "18446744073709551616",  # 2**64: orjson would read a float
        "-9223372036854775809",  # below -2**63
        '{"n": 123456789012345678901234567890}',
        "[NaN, Infinity, -Infinity]",
        "[1e400]",
        '"\\ud800"',  # a lone surrogate
        '{"a": 1, "a": 2}',
    ],
)
def test_what_orjson_reads_otherwise_is_read_as_json_reads_it(text: str) -> None:
    assert _same(loads(text), json.loads(text))


def test_a_malformed_column_is_refused_as_json_refuses_it() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads('{"a": ')
    assert loads(None) is None
