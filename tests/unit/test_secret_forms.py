"""The forms redaction catches a secret in: each encoding, any letter case, hex set
apart any usual way; and what it leaves alone (text that only looks like one)."""

from __future__ import annotations

import base64
import codecs
import re

from hypothesis import given
from hypothesis import strategies as st

from pfar.policy.redact import Redactor
from pfar.policy.secret_forms import trie_pattern

SECRET = "s3cr3t-Value_42xyz"
RAW = SECRET.encode()
HEX = RAW.hex()
PAIRS = [HEX[i : i + 2] for i in range(0, len(HEX), 2)]


def _redacts(form: str) -> None:
    r = Redactor(lambda: {"tok": SECRET})
    for text in (form, f"before {form} after", f"x{form}\n"):
        out = r.text(text)
        assert "[REDACTED:tok]" in out, (form, out)
        assert form not in out
    assert r.found(f"<{form}>") == ["tok"]


def test_the_secret_in_any_letter_case() -> None:
    for form in (SECRET, SECRET.lower(), SECRET.upper(), SECRET.swapcase()):
        _redacts(form)


def test_hex_lower_upper_and_set_apart() -> None:
    for form in (
        HEX,
        HEX.upper(),
        " ".join(PAIRS),  # od -An -tx1, in one line
        " ".join(PAIRS[:8]) + "\n " + " ".join(PAIRS[8:]),  # ... and over two
        HEX[:20] + "\n" + HEX[20:],  # xxd -p wraps its lines
        ":".join(PAIRS).upper(),
        "".join(f"\\x{p}" for p in PAIRS),
        ", ".join(f"0x{p}" for p in PAIRS),
    ):
        _redacts(form)
    # inside a longer hex text, at an even or an odd digit
    _redacts("00ff" + HEX + "ee")
    _redacts("a" + HEX + "b")


def test_base64_both_alphabets_padded_or_not_at_every_alignment() -> None:
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        _redacts(encode(RAW).decode())
        _redacts(encode(RAW).decode().rstrip("="))
        for prefix in (b"", b"u:", b"us:", b"use:"):
            whole = encode(prefix + RAW + b"!").decode()
            r = Redactor(lambda: {"tok": SECRET})
            assert "[REDACTED:tok]" in r.text(whole), (prefix, whole)


def test_base32_at_every_alignment() -> None:
    _redacts(base64.b32encode(RAW).decode())
    _redacts(base64.b32encode(RAW).decode().lower())
    for prefix in range(5):
        whole = base64.b32encode(b"p" * prefix + RAW + b"!").decode()
        assert "[REDACTED:tok]" in Redactor(lambda: {"tok": SECRET}).text(whole), prefix


def test_reversed_and_rot13() -> None:
    _redacts(SECRET[::-1])
    _redacts(codecs.encode(SECRET, "rot13"))
    _redacts(codecs.encode(SECRET, "rot13").upper())


def test_ordinary_text_is_left_alone() -> None:
    # eight characters, the shortest a secret may be: no form of it is in these texts
    r = Redactor(lambda: {"pin": "12345678", "word": "password"})
    text = (
        "1234567 23456789 passwor and 0x31 0x32 0x33 or 313233343536 are shorter than a "
        "secret, deadbeefcafe0000 is other hex; but password1 holds one, cGFzc3dvcmQ is its "
        "base64 and 87654321 the pin reversed"
    )
    out = r.text(text)
    assert out == (
        "1234567 23456789 passwor and 0x31 0x32 0x33 or 313233343536 are shorter than a "
        "secret, deadbeefcafe0000 is other hex; but [REDACTED:word]1 holds one, "
        "[REDACTED:word] is its base64 and [REDACTED:pin] the pin reversed"
    )


@given(
    st.lists(st.text("abcé-", min_size=1, max_size=6), min_size=1, max_size=8),
    st.text("abcé-x", max_size=40),
)
def test_the_trie_finds_what_a_plain_alternation_finds(forms: list[str], text: str) -> None:
    longest = sorted(set(forms), key=len, reverse=True)
    plain = re.compile("|".join(map(re.escape, longest)))
    trie = re.compile(trie_pattern(longest))
    assert [m.span() for m in trie.finditer(text)] == [m.span() for m in plain.finditer(text)]


def test_a_long_secret_compiles() -> None:
    pem = base64.b64encode(bytes(range(256)) * 8).decode()  # 2,732 characters
    r = Redactor(lambda: {"key": pem})
    assert r.text(f"key: {pem}.") == "key: [REDACTED:key]."
