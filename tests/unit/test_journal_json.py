"""The journal's JSON columns keep what they were given: an integer past 64 bits stays an
integer (orjson, which writes them, would read it back as a float)."""

from __future__ import annotations

from pfar.journal.records import dumps, loads


def test_an_integer_past_64_bits_reads_back_exact() -> None:
    value = {"big": 2**70, "neg": -(2**64) - 1, "list": [123456789012345678901234567890]}
    assert loads(dumps(value)) == value
    assert isinstance(loads(dumps(2**64)), int)


def test_a_lone_surrogate_reads_back() -> None:
    assert loads(dumps({"s": "\ud800"})) == {"s": "\ud800"}
    assert loads(None) is None
