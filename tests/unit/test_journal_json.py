"""The journal's JSON columns keep what they were given: an integer past 64 bits stays an
integer (orjson, which writes them, would read it back as a float), and NaN and the
infinities stay what they were (orjson would write them as null)."""

from __future__ import annotations

import math

from pfar.journal.records import dumps, loads


def test_an_integer_past_64_bits_reads_back_exact() -> None:
    value = {"big": 2**70, "neg": -(2**64) - 1, "list": [123456789012345678901234567890]}
    assert loads(dumps(value)) == value
    assert isinstance(loads(dumps(2**64)), int)


def test_a_lone_surrogate_reads_back() -> None:
    assert loads(dumps({"s": "\ud800"})) == {"s": "\ud800"}
    assert loads(None) is None


def test_nan_and_the_infinities_read_back_as_given() -> None:
    value = {"mean": float("nan"), "max": float("inf"), "min": float("-inf"), "none": None}
    back = loads(dumps(value))
    assert math.isnan(back["mean"])
    assert back["max"] == math.inf and back["min"] == -math.inf
    assert back["none"] is None
    assert dumps({"a": [1.5, None, "null"]}) == '{"a":[1.5,null,"null"]}'
    assert dumps({"b": 1, "a": "x"}) == '{"a":"x","b":1}'
