from __future__ import annotations

import logging
import sys

from hypothesis import given
from hypothesis import strategies as st

from pfar.policy.redact import _PATTERNS, RedactingFilter, Redactor, _mask


def _redactor() -> Redactor:
    return Redactor(lambda: {"notion_token": "secret_abc123XYZ", "short": "ab"})


def test_known_secret_values_and_token_shapes_are_replaced() -> None:
    r = _redactor()
    assert r.text("token=secret_abc123XYZ!") == "token=[REDACTED:notion_token]!"
    assert r.text("Authorization: Bearer abcdefgh12345678") == ("Authorization: Bearer [REDACTED]")
    assert "sk-" not in r.text("key sk-abcdefghijklmnop")
    assert r.text("ab stays: too short to be a secret") == "ab stays: too short to be a secret"


def test_sensitive_keys_are_masked_but_secret_references_are_kept() -> None:
    r = _redactor()
    value = {
        "headers": {"Authorization": "Bearer {{secret:notion_token}}", "password": "hunter22"},
        "body": ["x", "secret_abc123XYZ"],
    }
    assert r.value(value) == {
        "headers": {"Authorization": "Bearer {{secret:notion_token}}", "password": "[REDACTED]"},
        "body": ["x", "[REDACTED:notion_token]"],
    }


def test_log_records_and_their_tracebacks_are_redacted() -> None:
    f = RedactingFilter(_redactor())
    try:
        raise ValueError("bad token secret_abc123XYZ")
    except ValueError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "pfar.x", logging.ERROR, __file__, 1, "failed with %s", ("secret_abc123XYZ",), exc_info
    )
    assert f.filter(record)
    text = logging.Formatter().format(record)
    assert "secret_abc123XYZ" not in text
    assert "[REDACTED:notion_token]" in text
    assert "ValueError" in text


_PIECES = ["Bearer ", "BEARER\t", "sk-", "ghp_", "gho_", "xoxb-", "xoxp-", "abcdefgh"]
_PIECES += ["1234", "ABCDEFGHIJKLMNOPQRST", " ", "-", "_", "é", "\n"]


@given(
    st.lists(
        st.sampled_from(_PIECES),
        max_size=12,
    ).map("".join)
)
def test_every_token_shape_is_found_by_the_quick_look_first(text: str) -> None:
    """`text` looks for the shapes' common starts before scanning for each shape: what it
    leaves is what scanning for every shape leaves."""
    scanned = text
    for pattern in _PATTERNS:
        scanned = pattern.sub(_mask, scanned)
    assert Redactor().text(text) == scanned


def _value_as_specified(r: Redactor, value: object) -> object:
    """What `Redactor.value` does, written as plainly as it reads in the docs."""
    if isinstance(value, str):
        return r.text(value)
    if isinstance(value, dict):
        return {
            k: (
                "[REDACTED]"
                if str(k).lower()
                in {"authorization", "password", "token", "api_key"} | {"secret", "cookie"}
                and isinstance(v, str)
                and "{{secret:" not in v
                else _value_as_specified(r, v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_value_as_specified(r, v) for v in value]
    return value


_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
_LEAVES |= st.sampled_from(["secret_abc123XYZ", "Bearer abcdefgh12345678", "{{secret:x}}", "ok"])
_KEYS = st.sampled_from(["Token", "password", "name", "COOKIE", "args"]) | st.integers(0, 3)


@given(
    st.recursive(
        _LEAVES,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
        max_leaves=20,
    )
)
def test_value_redacts_every_string_and_masks_sensitive_keys(value: object) -> None:
    r = _redactor()
    assert r.value(value) == _value_as_specified(r, value)
