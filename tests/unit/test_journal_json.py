"""The journal's JSON columns keep what they were given: an integer past 64 bits stays an
integer (orjson, which writes them, would read it back as a float). They hold standard
JSON, which SQLite's JSON functions read: NaN and the infinities are written as null."""

from __future__ import annotations

from pfar.journal.records import dumps, loads
from pfar.vault.driver import sqlite


def test_an_integer_past_64_bits_reads_back_exact() -> None:
    value = {"big": 2**70, "neg": -(2**64) - 1, "list": [123456789012345678901234567890]}
    assert loads(dumps(value)) == value
    assert isinstance(loads(dumps(2**64)), int)


def test_a_lone_surrogate_reads_back() -> None:
    assert loads(dumps({"s": "\ud800"})) == {"s": "\ud800"}
    assert loads(None) is None


def test_the_journal_holds_standard_json_that_sqlite_reads() -> None:
    odd = {"mean": float("nan"), "max": float("inf"), "min": [float("-inf")]}
    conn = sqlite.connect(":memory:")
    # orjson writes the first; an int past 64 bits sends the second through json
    for value, more in ((odd, {}), ({**odd, "n": 2**70}, {"n": 2**70})):
        text = dumps(value)
        assert loads(text) == {"mean": None, "max": None, "min": [None], **more}
        (kept,) = conn.execute("SELECT json_extract(?, '$.min')", (text,)).fetchone()
        assert kept == "[null]"
